package plant

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/acq/opcua/opcuatest"
)

// startOPCUAServer starts the node-opcua test server (one counter) and
// returns its endpoint.
func startOPCUAServer(t *testing.T) string {
	return fmt.Sprintf("opc.tcp://127.0.0.1:%d/pith", opcuatest.Start(t, 1, 10))
}

// TestPlantOPCUA runs an OPC UA station in a plant: its values reach the
// store through the tag table, and control writes go through the audited
// control path with the server's status answered back.
func TestPlantOPCUA(t *testing.T) {
	endpoint := startOPCUAServer(t)
	cfg := parse(t, fmt.Sprintf(`
[[opcua.client]]
name = "ua"
endpoint = %q
tags = [
  { name = "ua.v0", node = "ns=1;s=v0000", type = "Double", sampling_interval = "0s" },
  { name = "ua.sp", node = "ns=1;s=sp_double", type = "Double", writable = true, scale = 2.0 },
  { name = "ua.wrong", node = "ns=1;s=sp_bool", type = "Double", writable = true },
]
`, endpoint))
	p, _ := startPlant(t, cfg)
	waitFor(t, "ua.v0 counting", func() bool { v, q, ok := latest(t, p, "ua.v0"); return ok && v > 3 && q == model.QualityGood })
	ctx := context.Background()
	if err := p.Controller().Control(ctx, "ua.sp", 25, "test"); err != nil {
		t.Fatalf("control: %v", err)
	}
	waitFor(t, "ua.sp written and read back", func() bool { v, _, _ := latest(t, p, "ua.sp"); return v == 25 })
	err := p.Controller().Control(ctx, "ua.wrong", 3, "test")
	if err == nil || !strings.Contains(err.Error(), "BadTypeMismatch") {
		t.Errorf("write of a Double to a Boolean variable: got %v, want the server's BadTypeMismatch", err)
	}
	if err := p.Controller().Control(ctx, "ua.v0", 1, "test"); err == nil || !strings.Contains(err.Error(), "not mark it writable") {
		t.Errorf("write to a read-only OPC UA tag: got %v", err)
	}
	if v, _, _ := latest(t, p, "pith.station.ua.comm"); v != 1 {
		t.Errorf("comm = %v, want 1", v)
	}
	if m, ok := p.Meta()("ua.v0"); !ok || m.Status != "Good (0x00000000)" || m.Source != "opcua:ua" {
		t.Errorf("meta of ua.v0 = %+v, want the raw status Good", m)
	}
	// A reload that only changes the OPC UA section restarts the
	// acquisition.
	cfg2 := parse(t, strings.Replace(fmt.Sprintf(`
[[opcua.client]]
name = "ua"
endpoint = %q
publish_interval = "500ms"
tags = [ { name = "ua.v0", node = "ns=1;s=v0000", type = "Double" } ]
`, endpoint), "\t", "", -1))
	if changed, err := p.Reload(cfg2); err != nil || !changed {
		t.Fatalf("reload: changed %v, err %v", changed, err)
	}
	waitFor(t, "ua.sp of the removed tag turns bad", func() bool { _, q, _ := latest(t, p, "ua.sp"); return q == model.QualityBad })
}
