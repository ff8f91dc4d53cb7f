package plant

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

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
	if _, err := p.Reload(parse(t, bad)); err == nil || !strings.Contains(err.Error(), "address already in use") {
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

// mbRead sends one raw Modbus TCP request (read holding register addr)
// on conn and returns the value, so that a test can tell whether the very
// same connection still works.
func mbRead(conn net.Conn, addr uint16) (uint16, error) {
	req := []byte{0, 1, 0, 0, 0, 6, 1, 3, byte(addr >> 8), byte(addr), 0, 1}
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return 0, err
	}
	if _, err := conn.Write(req); err != nil {
		return 0, err
	}
	var resp [11]byte
	if _, err := io.ReadFull(conn, resp[:]); err != nil {
		return 0, err
	}
	if resp[7] != 3 {
		return 0, fmt.Errorf("exception %d", resp[8])
	}
	return uint16(resp[9])<<8 | uint16(resp[10]), nil
}

// serverConfig is one Modbus server on listen publishing tag at holding 0.
func serverConfig(listen, tag string) string {
	return fmt.Sprintf(`
[[modbus.server]]
listen = %q
registers = [ { tag = %q, register = "holding:0", type = "uint16" } ]
`, listen, tag)
}

// TestPrepareChangesNothingUntilCommit checks the two-phase reload: a
// prepared acquisition neither polls nor answers, the running one keeps
// its stations and its server connections, Abort leaves everything as it
// was, and a failed Prepare (a port taken) never stops the running
// acquisition.
func TestPrepareChangesNothingUntilCommit(t *testing.T) {
	dev := startDevice(t, "127.0.0.1:0")
	_ = dev.srv.Bank().SetRegisters(modbus.HoldingRegisters, 30, 7)
	cfg := parse(t, serverConfig("127.0.0.1:0", "pub.a"))
	p, _ := startPlant(t, cfg)
	if _, err := p.Table().UpdatePoints([]model.Point{{Tag: "pub.a", T: 1, V: 11}}, true, "test"); err != nil {
		t.Fatal(err)
	}
	addr := p.ServerAddrs()[0]
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	waitFor(t, "server publishes 11", func() bool { v, err := mbRead(conn, 0); return err == nil && v == 11 })

	station := fmt.Sprintf(`
[[modbus.client]]
name = "boiler"
url = "tcp://%s"
period = "50ms"
tags = [ { name = "boiler.t", register = "holding:30", type = "uint16" } ]
`, dev.addr)
	// A new station and a second server: prepared, then aborted.
	other := "127.0.0.2:0"
	ch, err := p.Prepare(parse(t, serverConfig("127.0.0.1:0", "pub.a")+serverConfig(other, "pub.b")+station))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, _, ok := latest(t, p, "boiler.t"); ok {
		t.Error("a prepared station polled before Commit")
	}
	ch.Abort()
	if got := len(p.ServerAddrs()); got != 1 {
		t.Errorf("servers after Abort: %d, want 1", got)
	}
	if v, err := mbRead(conn, 0); err != nil || v != 11 {
		t.Errorf("running server after Abort: %v %v, want 11 on the same connection", v, err)
	}

	// A server on a taken port: refused, and the running server kept its
	// connection (it was never stopped).
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if _, err := p.Prepare(parse(t, serverConfig("127.0.0.1:0", "pub.a")+serverConfig(busy.Addr().String(), "pub.b")+station)); err == nil {
		t.Fatal("prepare with a taken port succeeded")
	}
	if v, err := mbRead(conn, 0); err != nil || v != 11 {
		t.Errorf("running server after a refused reload: %v %v, want 11 on the same connection", v, err)
	}
	if _, _, ok := latest(t, p, "boiler.t"); ok {
		t.Error("the station of a refused reload polled")
	}

	// Commit: the station polls, the unchanged server keeps its
	// connection.
	ch, err = p.Prepare(parse(t, serverConfig("127.0.0.1:0", "pub.a")+station))
	if err != nil {
		t.Fatal(err)
	}
	ch.Commit()
	waitFor(t, "boiler.t = 7", func() bool { v, _, ok := latest(t, p, "boiler.t"); return ok && v == 7 })
	if v, err := mbRead(conn, 0); err != nil || v != 11 {
		t.Errorf("unchanged server after Commit: %v %v, want 11 on the same connection", v, err)
	}
}

// TestReloadKeepsServerPort changes what a server publishes but not its
// listen address: the new server answers on the very port the old one
// bound, which no other process could take in between.
func TestReloadKeepsServerPort(t *testing.T) {
	cfg := parse(t, serverConfig("127.0.0.1:0", "pub.a"))
	p, _ := startPlant(t, cfg)
	if _, err := p.Table().UpdatePoints([]model.Point{{Tag: "pub.a", T: 1, V: 1}, {Tag: "pub.b", T: 1, V: 2}}, true, "test"); err != nil {
		t.Fatal(err)
	}
	addr := p.ServerAddrs()[0]
	stop := make(chan struct{})
	stole := make(chan string, 1)
	go func() { // another process trying to take the port all along
		for {
			select {
			case <-stop:
				return
			default:
			}
			if ln, err := net.Listen("tcp", addr); err == nil {
				ln.Close()
				stole <- addr
				return
			}
		}
	}()
	// "127.0.0.1:0" again: a fresh bind would get another port.
	if changed, err := p.Reload(parse(t, serverConfig("127.0.0.1:0", "pub.b"))); err != nil || !changed {
		t.Fatalf("reload: changed %v, err %v", changed, err)
	}
	close(stop)
	select {
	case a := <-stole:
		t.Fatalf("port %s was free during the reload", a)
	default:
	}
	if got := p.ServerAddrs()[0]; got != addr {
		t.Fatalf("server address after reload: %s, want %s", got, addr)
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if v, err := mbRead(conn, 0); err != nil || v != 2 {
		t.Errorf("holding 0 after reload: %v %v, want pub.b = 2", v, err)
	}
}
