package acq

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/config"
)

// TestModbusStations polls a loopback Modbus server with two stations on
// one link: unit 1 answers, unit 2 does not exist behind the "gateway".
func TestModbusStations(t *testing.T) {
	srv := modbus.NewServer(modbus.ServerOptions{Addr: "127.0.0.1:0", UnitID: 1})
	addr, err := srv.Listen()
	if err != nil {
		t.Skipf("no loopback listener: %v", err)
	}
	defer srv.Close()
	bank := srv.Bank()
	bank.SetRegisters(modbus.HoldingRegisters, 0, uint16(0xFFFE)) // int16 -2
	f := math.Float32bits(21.5)
	bank.SetRegisters(modbus.HoldingRegisters, 10, uint16(f>>16), uint16(f))
	bank.SetBits(modbus.Coils, 5, true)

	spec := func(name, reg, typ string, scale float64) config.ModbusTagSpec {
		s := config.DefaultModbusTagSpec()
		s.Name, s.Register, s.Type, s.Scale = name, reg, typ, scale
		return s
	}
	ok := config.DefaultModbusClient()
	ok.Name, ok.URL, ok.Unit, ok.Timeout = "plc1", "tcp://"+addr.String(), 1, config.Duration(500*time.Millisecond)
	ok.Tags = []config.ModbusTagSpec{
		spec("plc1.level", "holding:0", "int16", 0.5),
		spec("plc1.temp", "holding:10", "float32", 1),
		spec("plc1.run", "coil:5", "bool", 1),
	}
	dead := ok
	dead.Name, dead.Unit = "plc2", 2
	dead.Tags = []config.ModbusTagSpec{spec("plc2.level", "holding:0", "int16", 1)}

	clk := newFakeClock(t0)
	tab := newRecTable()
	s := NewScheduler(tab, clk, nil)
	links, err := s.AddModbus([]config.ModbusClient{ok, dead}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer links.Close()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	clk.waitSleepers(t, 3)
	clk.Advance(700 * time.Millisecond)
	clk.waitSleepers(t, 3)

	for _, tc := range []struct {
		tag  string
		want float64
	}{{"plc1.level", -1}, {"plc1.temp", 21.5}, {"plc1.run", 1}, {StatTag("plc1", TagComm), 1}, {StatTag("plc2", TagComm), 0}} {
		v := tab.current(t, tc.tag)
		if v.V != tc.want || !v.Has {
			t.Errorf("%s = %+v, want %v", tc.tag, v, tc.want)
		}
	}
	if v := tab.current(t, "plc2.level"); v.Has || v.Q != model.QualityBad {
		t.Errorf("plc2.level = %+v, want bad without value", v)
	}
	if d, _ := tab.Def(0); d.Source != "modbus:plc1" {
		t.Errorf("def = %+v", d)
	}
}

// BenchmarkModbusPoll polls 100 holding registers (one block read, the
// D2000 reference set-up) from a loopback server and reports polls/s.
// Run: go test -run '^$' -bench ModbusPoll ./internal/acq/
func BenchmarkModbusPoll(b *testing.B) {
	srv := modbus.NewServer(modbus.ServerOptions{Addr: "127.0.0.1:0"})
	addr, err := srv.Listen()
	if err != nil {
		b.Skipf("no loopback listener: %v", err)
	}
	defer srv.Close()
	c := config.DefaultModbusClient()
	c.Name, c.URL = "bench", "tcp://"+addr.String()
	s := config.DefaultModbusTagSpec()
	s.Name, s.Register, s.Type, s.Count = "bench.r{i}", "holding:0", "uint16", 100
	c.Tags = []config.ModbusTagSpec{s}
	cl, err := modbus.NewClient(c.URL, modbus.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	st, err := NewModbusStation(c, cl)
	if err != nil {
		b.Fatal(err)
	}
	vals := make([]Value, len(st.Tags()))
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if err := st.Poll(ctx, vals); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "polls/s")
}
