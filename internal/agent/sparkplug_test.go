package agent

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/sparkplug"
	"github.com/pith-historian/pith/internal/tag"
	"github.com/pith-historian/pith/internal/testpeer"
)

// TestSparkplugEdgeToHost runs a Pith whose Sparkplug edge node publishes
// its plant tags and whose host application reads them back under
// "mirror.", through Mosquitto: the wiring of both parts, the push road
// of the host's values, and NCMD writes through the guarded control path
// (a write within the limits, one over them, one of a tag not writable).
// A reload then renames the mirror.
func TestSparkplugEdgeToHost(t *testing.T) {
	addr := testpeer.Env(t, "PITH_TEST_MQTT", "127.0.0.1:1883")
	addr = strings.TrimPrefix(strings.TrimPrefix(addr, "mqtt://"), "tcp://")
	group := fmt.Sprintf("agent-%d-%d", os.Getpid(), time.Now().UnixNano()%1e9)
	conf := func(mirror string) *config.Config {
		cfg, err := config.Parse([]byte(fmt.Sprintf(`
[store]
dir = %q
[http]
listen = "127.0.0.1:0"
[[modbus.server]]
listen = "127.0.0.1:0"
registers = [
  { register = "holding:0", tag = "plant.sp", type = "float32", writable = true },
  { register = "holding:2", tag = "plant.ro", type = "float32" },
]
[rules]
[[rules.limit]]
tag = "plant.sp"
max = 100
[[sparkplug.edge]]
name = "edge"
broker = "mqtt://%s"
group = %q
node = "pith"
tags = ["plant.*"]
writable = ["plant.sp"]
interval = "20ms"
[[sparkplug.host]]
name = "host"
broker = "mqtt://%s"
groups = [%q]
tag_template = "%s.{metric}"
writable = ["*.plant.sp"]
`, t.TempDir(), addr, group, addr, group, mirror)))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	cfg := conf("mirror")
	dir := cfg.Store.Dir
	next := cfg
	ctx := withConfigLoader(context.Background(), func() (*config.Config, error) { return next, nil })
	s := startServe(t, ctx, cfg)
	tab := s.Plant.Table()
	set := func(name string, v float64) {
		id, ok := tab.Lookup(name)
		if !ok {
			t.Fatalf("no tag %s", name)
		}
		tab.Update([]tag.Sample{{ID: id, T: time.Now().UnixMilli(), V: v}})
	}
	value := func(name string) (float64, model.Quality, bool) {
		vs, err := tab.Latest(name)
		if err != nil || !vs[0].Has {
			return 0, 0, false
		}
		return vs[0].V, vs[0].Q, true
	}
	waitValue := func(name string, want float64) {
		t.Helper()
		eventually(t, 10*time.Second, fmt.Sprintf("%s = %v", name, want), func() bool {
			v, q, ok := value(name)
			return ok && v == want && q == model.QualityGood
		})
	}
	set("plant.ro", 5)
	waitValue("mirror.plant.ro", 5)

	ncmd := func(metric string, v float64) {
		t.Helper()
		p := sparkplug.Payload{Timestamp: uint64(time.Now().UnixMilli()), Metrics: []sparkplug.Metric{{
			Name: []byte(metric), Datatype: sparkplug.TypeDouble, Kind: sparkplug.KindDouble, Bits: math.Float64bits(v)}}}
		publishOnce(t, addr, "spBv1.0/"+group+"/NCMD/pith", sparkplug.Append(nil, &p))
	}
	ncmd("plant/sp", 42)
	waitValue("plant.sp", 42)
	waitValue("mirror.plant.sp", 42)
	ncmd("plant/sp", 500) // over the limit: refused by the guard
	ncmd("plant/ro", 1)   // not writable
	ncmd("plant/sp", 43)  // commands apply in order: once this is done, the others were refused
	waitValue("plant.sp", 43)
	if v, _, _ := value("plant.ro"); v != 5 {
		t.Errorf("plant.ro written by an NCMD: %v", v)
	}

	// A control write of the host's tag goes to the edge node as an NCMD,
	// which writes plant.sp through the guard; the answer comes once the
	// new value came back.
	resp, err := http.Post(s.URL+"/api/v1/control", "application/json", strings.NewReader(`{"tag":"mirror.plant.sp","value":50}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("control of mirror.plant.sp: %d %s", resp.StatusCode, b)
	}
	if v, _, _ := value("plant.sp"); v != 50 {
		t.Errorf("plant.sp = %v after the write through the host", v)
	}
	resp, err = http.Post(s.URL+"/api/v1/control", "application/json", strings.NewReader(`{"tag":"mirror.plant.ro","value":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("control of a host tag not writable: %d, want 403", resp.StatusCode)
	}

	// The system tags count what happened.
	eventually(t, 5*time.Second, "system tags", func() bool {
		w, _, ok1 := value("pith.sys.sparkplug.edge.writes")
		r, _, ok2 := value("pith.sys.sparkplug.edge.refused")
		p, _, ok3 := value("pith.sys.sparkplug.host.points")
		return ok1 && ok2 && ok3 && w == 3 && r == 2 && p >= 3
	})

	// A reload that changes the host's template restarts the host with it.
	next = conf("copy")
	next.Store.Dir = dir
	if err := postReload(t, s.URL); err != nil {
		t.Fatal(err)
	}
	// The new host may subscribe after a change: keep changing plant.ro
	// until one arrives (data from a node it has not seen born asks for a
	// rebirth, which brings the current value).
	ro := 6.0
	eventually(t, 10*time.Second, "copy.plant.ro", func() bool {
		if v, q, ok := value("copy.plant.ro"); ok && v >= 6 && q == model.QualityGood {
			return true
		}
		set("plant.ro", ro)
		ro++
		return false
	})
}

// publishOnce publishes one QoS 1 message from a short-lived client.
func publishOnce(t *testing.T, addr, topic string, payload []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("pith-test-%d", time.Now().UnixNano()), CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(&paho.Disconnect{})
	if _, err := c.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: payload}); err != nil {
		t.Fatal(err)
	}
}

// postReload asks a keyless test server to reload its config.
func postReload(t *testing.T, base string) error {
	t.Helper()
	resp, err := http.Post(base+"/api/v1/admin/reload", "application/json", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("reload: %d %s", resp.StatusCode, b)
	}
	return nil
}
