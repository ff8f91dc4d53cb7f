package plant

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/acq"
	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/store"
)

// device is a loopback Modbus server standing in for a PLC.
type device struct {
	srv  *modbus.Server
	addr string
}

func startDevice(t testing.TB, addr string) *device {
	t.Helper()
	opts := modbus.DefaultServerOptions()
	opts.Addr = addr
	opts.HoldingRegisters = 200 // beyond it: exception "illegal data address"
	s := modbus.NewServer(opts)
	a, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return &device{srv: s, addr: a.String()}
}

// parse builds a validated config from TOML.
func parse(t testing.TB, toml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(toml))
	if err != nil {
		t.Fatalf("parse config: %v\n%s", err, toml)
	}
	return cfg
}

// startPlant starts a plant archiving into a fresh store; the cleanup stops
// the plant, then closes the store.
func startPlant(t testing.TB, cfg *config.Config) (*Plant, *store.DB) {
	t.Helper()
	db, err := store.Open(t.TempDir(), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions()
	opts.Archive.MaxDelay = 20 * time.Millisecond
	p, err := StartOptions(context.Background(), cfg, db, nil, opts)
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	return p, db
}

// waitFor polls cond until it holds, failing the test after 20 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(giveUp) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stationConfig(addr string) string {
	return fmt.Sprintf(`
[[modbus.client]]
name    = "plc"
url     = "tcp://%s"
period  = "50ms"
timeout = "300ms"
tags = [
  { name = "plc.r{i}", register = "holding:0", type = "uint16", count = 10 },
  { name = "plc.flow", register = "holding:20", type = "float32", order = "CDAB", scale = 0.1, offset = 5 },
  { name = "plc.pump", register = "coil:3", type = "bool" },
  { name = "plc.in", register = "input:0", type = "int16" },
  { name = "plc.far", register = "holding:250", type = "uint16" },
]
`, addr)
}

func latest(t testing.TB, p *Plant, name string) (float64, model.Quality, bool) {
	t.Helper()
	v, err := p.Table().Latest(name)
	if err != nil {
		t.Fatal(err)
	}
	return v[0].V, v[0].Q, v[0].Has
}

func TestPlantArchivesPolledValues(t *testing.T) {
	dev := startDevice(t, "127.0.0.1:0")
	for i := range 10 {
		_ = dev.srv.Bank().SetRegisters(modbus.HoldingRegisters, uint16(i), uint16(100+i))
	}
	p, db := startPlant(t, parse(t, stationConfig(dev.addr)))
	waitFor(t, "plc.r9 = 109", func() bool { v, q, ok := latest(t, p, "plc.r9"); return ok && v == 109 && q == model.QualityGood })
	_ = dev.srv.Bank().SetRegisters(modbus.HoldingRegisters, 9, 7)
	waitFor(t, "plc.r9 = 7", func() bool { v, _, _ := latest(t, p, "plc.r9"); return v == 7 })
	waitFor(t, "polls_per_s", func() bool {
		_, _, ok := latest(t, p, acq.StatTag("plc", acq.TagPolls))
		return ok
	})
	if m, ok := p.Meta()("plc.flow"); !ok || m.Source != "modbus:plc" || m.Archive != "change" {
		t.Errorf("meta(plc.flow) = %+v, %v", m, ok)
	}
	p.Stop() // drains the archive queue into the store
	got, err := db.Raw("plc.r9", 0, math.MaxInt64, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].V != 109 || got[1].V != 7 {
		t.Fatalf("archived plc.r9 = %+v, want 109 then 7", got)
	}
	if _, err := db.Raw(acq.StatTag("plc", acq.TagComm), 0, math.MaxInt64, 0); err != nil {
		t.Errorf("station comm tag not archived: %v", err)
	}
}

func TestPlantStationFailsAndRecovers(t *testing.T) {
	dev := startDevice(t, "127.0.0.1:0")
	_ = dev.srv.Bank().SetRegisters(modbus.HoldingRegisters, 0, 42)
	p, _ := startPlant(t, parse(t, stationConfig(dev.addr)))
	comm := acq.StatTag("plc", acq.TagComm)
	waitFor(t, "first good poll", func() bool { v, q, _ := latest(t, p, "plc.r0"); return v == 42 && q == model.QualityGood })

	_ = dev.srv.Close()
	waitFor(t, "tags bad", func() bool {
		v, q, ok := latest(t, p, "plc.r0")
		c, _, _ := latest(t, p, comm)
		return ok && v == 42 && q == model.QualityBad && c == 0
	})

	dev2 := startDevice(t, dev.addr) // the device restarts on the same port
	_ = dev2.srv.Bank().SetRegisters(modbus.HoldingRegisters, 0, 43)
	waitFor(t, "recovery", func() bool {
		v, q, _ := latest(t, p, "plc.r0")
		c, _, _ := latest(t, p, comm)
		return v == 43 && q == model.QualityGood && c == 1
	})
}

func TestPlantControl(t *testing.T) {
	dev := startDevice(t, "127.0.0.1:0")
	p, _ := startPlant(t, parse(t, stationConfig(dev.addr)))
	ctl := p.Controller()
	ctx := context.Background()

	// plc.flow = raw*0.1 + 5, float32 CDAB at holding:20.
	if err := ctl.Control(ctx, "plc.flow", 17.5, "test"); err != nil {
		t.Fatal(err)
	}
	regs, _ := dev.srv.Bank().Registers(modbus.HoldingRegisters, 20, 2)
	raw := []byte{byte(regs[0] >> 8), byte(regs[0]), byte(regs[1] >> 8), byte(regs[1])}
	if v, _ := modbus.DecodeFloat64(raw, modbus.Float32, modbus.CDAB); v != 125 {
		t.Errorf("device holds raw %v (registers %v), want 125", v, regs)
	}
	waitFor(t, "plc.flow read back", func() bool { v, _, _ := latest(t, p, "plc.flow"); return v == 17.5 })

	if err := ctl.Control(ctx, "plc.r3", 65535, "test"); err != nil {
		t.Fatal(err)
	}
	if r, _ := dev.srv.Bank().Registers(modbus.HoldingRegisters, 3, 1); r[0] != 65535 {
		t.Errorf("holding 3 = %d, want 65535", r[0])
	}
	if err := ctl.Control(ctx, "plc.pump", 1, "test"); err != nil {
		t.Fatal(err)
	}
	if b, _ := dev.srv.Bank().Bits(modbus.Coils, 3, 1); !b[0] {
		t.Error("coil 3 not set")
	}

	for _, tc := range []struct {
		tag   string
		value float64
		want  error
	}{
		{"plc.r3", 65536, api.ErrControlValue},
		{"plc.r3", -1, api.ErrControlValue},
		{"plc.pump", 2, api.ErrControlValue},
		{"plc.in", 1, api.ErrNoControlPath},
		{acq.StatTag("plc", acq.TagComm), 1, api.ErrNoControlPath},
		{"no.such.tag", 1, store.ErrUnknownTag},
	} {
		if err := ctl.Control(ctx, tc.tag, tc.value, "test"); !errors.Is(err, tc.want) {
			t.Errorf("Control(%s, %v) = %v, want %v", tc.tag, tc.value, err, tc.want)
		}
	}
	// The device refuses an address beyond its table: a device error,
	// which the API answers with 502.
	err := ctl.Control(ctx, "plc.far", 1, "test")
	var ex *modbus.ExceptionError
	if !errors.As(err, &ex) || ex.Code != modbus.ExIllegalDataAddress ||
		errors.Is(err, api.ErrControlValue) || errors.Is(err, api.ErrNoControlPath) {
		t.Errorf("Control(plc.far) = %v, want a device exception", err)
	}
}

func TestPlantServerPublishesAndAcceptsWrites(t *testing.T) {
	cfg := parse(t, `
[[modbus.server]]
listen = "127.0.0.1:0"
registers = [
  { register = "holding:0", tag = "pub.r{i}", type = "uint16", count = 3 },
  { register = "holding:10", tag = "pub.sp", type = "float32", scale = 0.5, offset = 1, writable = true },
  { register = "coil:0", tag = "pub.run", type = "bool", writable = true },
]
`)
	p, db := startPlant(t, cfg)
	addr := p.ServerAddrs()[0]
	opts := modbus.DefaultOptions()
	cl, err := modbus.Dial(context.Background(), "tcp://"+addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()

	// Published values follow the table.
	if _, err := p.Table().UpdatePoints([]model.Point{{Tag: "pub.r1", T: 1000, V: 321}}, false, ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "holding 1 = 321", func() bool {
		r, err := cl.ReadHoldingRegisters(ctx, 1, 0, 3)
		return err == nil && r[1] == 321
	})

	// A client write to a writable register becomes a tag value:
	// value = raw*0.5 + 1.
	raw, _ := modbus.AppendEncoded(nil, 40, modbus.Float32, modbus.ABCD)
	if err := cl.WriteRegisterBytes(ctx, 1, 10, raw); err != nil {
		t.Fatal(err)
	}
	if v, q, ok := latest(t, p, "pub.sp"); !ok || v != 21 || q != model.QualityGood {
		t.Errorf("pub.sp = %v %v %v, want 21 good", v, q, ok)
	}
	if m, _ := p.Meta()("pub.sp"); m.Source != SourceModbusServer {
		t.Errorf("pub.sp source = %q", m.Source)
	}
	if err := cl.WriteSingleCoil(ctx, 1, 0, true); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := latest(t, p, "pub.run"); v != 1 {
		t.Errorf("pub.run = %v, want 1", v)
	}
	// Read-only published registers refuse writes and keep their value.
	err = cl.WriteSingleRegister(ctx, 1, 1, 5)
	if !errors.Is(err, &modbus.ExceptionError{Code: modbus.ExIllegalDataAddress}) {
		t.Errorf("write to read-only register: %v, want illegal data address", err)
	}
	if v, _, _ := latest(t, p, "pub.r1"); v != 321 {
		t.Errorf("pub.r1 = %v after a refused write", v)
	}

	// A control write to a tag only the server holds sets it in the table,
	// and the server publishes it.
	if err := p.Controller().Control(ctx, "pub.sp", 11, "test"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "holding 10 = float32(20)", func() bool {
		b, err := cl.ReadRegisters(ctx, 1, modbus.HoldingRegisters, 10, 2, nil)
		if err != nil {
			return false
		}
		v, _ := modbus.DecodeFloat64(b, modbus.Float32, modbus.ABCD)
		return v == 20
	})
	if err := p.Controller().Control(ctx, "pub.r0", 1, "test"); !errors.Is(err, api.ErrNoControlPath) {
		t.Errorf("control of a read-only published tag = %v, want no control path", err)
	}

	p.Stop()
	got, err := db.Raw("pub.sp", 0, math.MaxInt64, 0)
	// Both values are archived, unless they fell in the same millisecond,
	// where the later write wins by design.
	ok := err == nil && len(got) > 0 && got[len(got)-1].V == 11 &&
		(len(got) == 2 && got[0].V == 21 || len(got) == 1)
	if !ok {
		t.Errorf("archived pub.sp = %+v, %v; want 21 then 11", got, err)
	}
}

func TestStartFailsCleanly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := parse(t, fmt.Sprintf(`
[[modbus.server]]
listen = %q
registers = [{ register = "holding:0", tag = "x.y", type = "uint16" }]
`, ln.Addr().String()))
	db, err := store.Open(t.TempDir(), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if p, err := Start(context.Background(), cfg, db, nil); err == nil {
		p.Stop()
		t.Fatal("Start succeeded on a busy port")
	}
}
