package rule_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/rule"
	"github.com/pith-historian/pith/internal/schedule"
	"github.com/pith-historian/pith/internal/store"
)

type clock struct{ t time.Time }

func (c *clock) Now() time.Time { return c.t }

// TestScheduleRuleSwitchesCoil runs the whole path: a weekly schedule
// sets its tag, a rule reading that tag writes a coil through the plant's
// control path to our own Modbus server standing in for a PLC, and the
// station's poll reads the coil back into the tag table. The schedule and
// the rule run on a fake clock; the Modbus side is real.
func TestScheduleRuleSwitchesCoil(t *testing.T) {
	opts := modbus.DefaultServerOptions()
	opts.Addr = "127.0.0.1:0"
	dev := modbus.NewServer(opts)
	addr, err := dev.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dev.Close() })

	cfg, err := config.Parse([]byte(fmt.Sprintf(`
[[modbus.client]]
name    = "plc"
url     = "tcp://%s"
period  = "20ms"
timeout = "300ms"
tags = [ { name = "plc.pump", register = "coil:3", type = "bool" } ]

[schedules]
enabled = true
timezone = "Europe/London"
[[schedules.schedule]]
name = "pump"
weekly = ["daily 08:00-12:00"]

[rules]
enabled = true
[[rules.rule]]
name = "pump-on-schedule"
when = 'tag("pith.schedule.pump") == 1'
tag = "plc.pump"
value = 1
release_value = 0
`, addr)))
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(t.TempDir(), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	p, err := plant.Start(context.Background(), cfg, db, nil)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(); db.Close() })

	clk := &clock{t: time.Date(2026, 12, 3, 7, 59, 0, 0, time.UTC)} // winter: London is UTC
	sched, err := schedule.New(cfg.Schedules, filepath.Join(t.TempDir(), "schedules"), p.Table(), clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	guard := rule.NewGuard(p.Controller(), rule.Limits(cfg.Rules.Limit), nil, nil, nil)
	rules, err := rule.New(cfg.Rules, p.Table(), sched, guard, rule.Options{Clock: clk}, nil)
	if err != nil {
		t.Fatal(err)
	}
	coil := func() bool {
		b, err := dev.Bank().Bits(modbus.Coils, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		return b[0]
	}
	polled := func() (float64, bool) {
		v, err := p.Table().Latest("plc.pump")
		if err != nil {
			t.Fatal(err)
		}
		return v[0].V, v[0].Has && v[0].Q == model.QualityGood
	}
	step := func(at time.Time, want bool) {
		t.Helper()
		clk.t = at
		sched.Scan(at)
		rules.Evaluate(context.Background(), at)
		if coil() != want {
			t.Fatalf("at %s: coil %v, want %v", at.Format(time.TimeOnly), coil(), want)
		}
		wantV := map[bool]float64{true: 1, false: 0}[want]
		giveUp := time.Now().Add(20 * time.Second)
		for v, ok := polled(); !ok || v != wantV; v, ok = polled() {
			if time.Now().After(giveUp) {
				t.Fatalf("at %s: plc.pump never polled as %v", at.Format(time.TimeOnly), wantV)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	_ = dev.Bank().SetBits(modbus.Coils, 3, true) // left on before a restart
	step(clk.t, false)                            // first judgement switches it off
	step(time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC), true)
	step(time.Date(2026, 12, 3, 11, 59, 0, 0, time.UTC), true)
	step(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC), false)
}
