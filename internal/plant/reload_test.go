package plant

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/acq/modbus"
)

func TestReloadReplacesStations(t *testing.T) {
	dev := startDevice(t, "127.0.0.1:0")
	for i := range 10 {
		_ = dev.srv.Bank().SetRegisters(modbus.HoldingRegisters, uint16(i), uint16(100+i))
	}
	cfg := parse(t, stationConfig(dev.addr))
	p, db := startPlant(t, cfg)
	waitFor(t, "plc.r9 = 109", func() bool { v, _, ok := latest(t, p, "plc.r9"); return ok && v == 109 })

	// Same [modbus] section: nothing restarts.
	if changed, err := p.Reload(parse(t, stationConfig(dev.addr))); err != nil || changed {
		t.Fatalf("reload of the same config: changed %v, err %v", changed, err)
	}

	// A second station and a scale change on the first.
	two := strings.Replace(stationConfig(dev.addr), `{ name = "plc.r{i}", register = "holding:0", type = "uint16", count = 10 }`,
		`{ name = "plc.r{i}", register = "holding:0", type = "uint16", count = 10, scale = 2 }`, 1) + fmt.Sprintf(`
[[modbus.client]]
name    = "boiler"
url     = "tcp://%s"
period  = "50ms"
timeout = "300ms"
tags = [ { name = "boiler.t", register = "holding:30", type = "uint16" } ]
`, dev.addr)
	_ = dev.srv.Bank().SetRegisters(modbus.HoldingRegisters, 30, 55)
	if changed, err := p.Reload(parse(t, two)); err != nil || !changed {
		t.Fatalf("reload: changed %v, err %v", changed, err)
	}
	waitFor(t, "boiler.t = 55", func() bool { v, q, ok := latest(t, p, "boiler.t"); return ok && v == 55 && q == model.QualityGood })
	waitFor(t, "plc.r9 scaled to 218", func() bool { v, _, _ := latest(t, p, "plc.r9"); return v == 218 })
	if err := p.Controller().Control(context.Background(), "plc.r1", 8, "test"); err != nil {
		t.Fatalf("control after reload: %v", err)
	}
	waitFor(t, "plc.r1 written through the new path", func() bool { v, _, _ := latest(t, p, "plc.r1"); return v == 8 })

	// A config whose server port is taken is refused; the stations of
	// the running one keep polling.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	bad := two + fmt.Sprintf(`
[[modbus.server]]
listen = "%s"
registers = [ { tag = "boiler.t", register = "holding:0", type = "uint16" } ]
`, busy.Addr())
	if _, err := p.Reload(parse(t, bad)); err == nil || !strings.Contains(err.Error(), "previous stations restored") {
		t.Fatalf("reload with a taken port: err %v", err)
	}
	_ = dev.srv.Bank().SetRegisters(modbus.HoldingRegisters, 30, 56)
	waitFor(t, "boiler.t = 56 after the refused reload", func() bool { v, _, _ := latest(t, p, "boiler.t"); return v == 56 })

	// Removing the boiler station turns its tag bad; the plc polls on.
	if _, err := p.Reload(parse(t, stationConfig(dev.addr))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "boiler.t bad", func() bool { _, q, _ := latest(t, p, "boiler.t"); return q == model.QualityBad })
	_ = dev.srv.Bank().SetRegisters(modbus.HoldingRegisters, 9, 3)
	waitFor(t, "plc.r9 = 3 unscaled", func() bool { v, _, _ := latest(t, p, "plc.r9"); return v == 3 })
	_ = db
}
