package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/config"
)

// TestLatestCurrentDuringFreeze holds the archive with a FREEZE while a
// Modbus station is polled (50 tags every 50 ms, each value changing):
// through GET /api/v1/latest, pith.sys.archive.pending grows with the
// backlog while the acquired tags stay current (ts within 2 s of now,
// values moving), so a lagging store never makes the plant look frozen.
func TestLatestCurrentDuringFreeze(t *testing.T) {
	const regs = 50
	dev := modbus.NewServer(modbus.ServerOptions{Addr: "127.0.0.1:0", HoldingRegisters: regs})
	da, err := dev.Listen()
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	var tags []string
	for i := range regs {
		tags = append(tags, fmt.Sprintf(`{ name = "plc.r%d", register = "holding:%d", type = "uint16" }`, i, i))
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
[log]
level = "warn"
[http]
listen = "127.0.0.1:0"
[[modbus.client]]
name = "plc"
url = "tcp://%s"
period = "50ms"
tags = [ %s ]
`, da, strings.Join(tags, ", "))))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	url := startServe(t, context.Background(), cfg).URL

	// The device's values change all the time.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for n := uint16(1); ctx.Err() == nil; n++ {
			for i := range regs {
				_ = dev.Bank().SetRegisters(modbus.HoldingRegisters, uint16(i), n+uint16(i))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()

	type value struct {
		Tag   string  `json:"tag"`
		TS    int64   `json:"ts"`
		Value float64 `json:"value"`
	}
	// tryLatest is nil until every tag asked for exists.
	tryLatest := func() map[string]value {
		t.Helper()
		resp, err := http.Get(url + "/api/v1/latest?tag=pith.sys.archive.pending&tag=plc.r0&tag=plc.r49")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a struct{ Values []value }
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &a) != nil {
			return nil
		}
		m := map[string]value{}
		for _, v := range a.Values {
			m[v.Tag] = v
		}
		return m
	}
	latest := func() map[string]value {
		t.Helper()
		m := tryLatest()
		if m == nil {
			t.Fatal("GET /api/v1/latest failed")
		}
		return m
	}
	eventually(t, 10*time.Second, "acquired values and pith.sys.archive.pending", func() bool {
		m := tryLatest()
		return m != nil && m["plc.r0"].TS > 0 && m["plc.r49"].TS > 0
	})

	const freeze = 4 * time.Second
	froze := make(chan error, 1)
	go func() {
		resp, err := http.Post(url+"/api/v1/admin/freeze", "application/json", strings.NewReader(fmt.Sprintf(`{"seconds": %g}`, freeze.Seconds())))
		if err == nil {
			io.Copy(io.Discard, resp.Body) // the stream ends with the freeze
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("freeze: %s", resp.Status)
			}
		}
		froze <- err
	}()
	time.Sleep(500 * time.Millisecond)
	var pending []float64
	last := map[string]float64{}
	for start := time.Now(); time.Since(start) < freeze-time.Second; time.Sleep(700 * time.Millisecond) {
		m := latest()
		now := time.Now().UnixMilli()
		pending = append(pending, m["pith.sys.archive.pending"].Value)
		for _, tag := range []string{"plc.r0", "plc.r49"} {
			v := m[tag]
			if age := now - v.TS; age > 2000 || age < -1000 {
				t.Errorf("%s during the freeze: ts %d is %d ms from now, want within 2 s", tag, v.TS, age)
			}
			if old, ok := last[tag]; ok && old == v.Value {
				t.Errorf("%s during the freeze: value stuck at %v", tag, v.Value)
			}
			last[tag] = v.Value
		}
	}
	if len(pending) < 3 {
		t.Fatalf("only %d readings during the freeze", len(pending))
	}
	// The collector reads the queue every second: readings may repeat,
	// never fall, and must rise by the acquisition rate (1,000 values/s).
	for i := 1; i < len(pending); i++ {
		if pending[i] < pending[i-1] {
			t.Errorf("pith.sys.archive.pending fell during the freeze: %v", pending)
			break
		}
	}
	if grew := pending[len(pending)-1] - pending[0]; grew < 1000 {
		t.Errorf("pith.sys.archive.pending grew by %v during the freeze, want at least 1000: %v", grew, pending)
	}
	if err := <-froze; err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the backlog drained after the freeze", func() bool {
		return latest()["pith.sys.archive.pending"].Value < pending[len(pending)-1]
	})
}
