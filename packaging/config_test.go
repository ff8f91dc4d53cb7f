package packaging

import (
	"testing"

	"github.com/pith-historian/pith/internal/config"
)

// TestPackagedConfig: the config the .deb installs loads, keeps the data
// in the unit's StateDirectory and starts nothing that reaches out (no
// stations, forwarders or central consumer) on a fresh install.
func TestPackagedConfig(t *testing.T) {
	cfg, err := config.Load("pith.toml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store.Dir != "/var/lib/pith" {
		t.Errorf("store.dir %q, want /var/lib/pith", cfg.Store.Dir)
	}
	f := cfg.Forward
	if n := len(cfg.Modbus.Clients) + len(f.NATS) + len(f.Postgres) + len(f.MQTT) + len(f.HTTP); n != 0 || cfg.Central.NATS != "" || cfg.MQTT.Enabled {
		t.Errorf("packaged config reaches out: %d stations/forwarders, central %q, mqtt %v", n, cfg.Central.NATS, cfg.MQTT.Enabled)
	}
}
