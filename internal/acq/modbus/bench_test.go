package modbus

// Run the benchmarks with
//
//	go test -run '^$' -bench . -benchtime 3s ./internal/acq/modbus/
//
// BenchmarkPollLoopback is the figure to compare with the libmodbus pair
// measured by TestInteropLibmodbus.

import (
	"context"
	"testing"
	"time"
)

// BenchmarkPollLoopback polls 10 holding registers back to back from our
// server over loopback TCP, like a fast station with period 0.
func BenchmarkPollLoopback(b *testing.B) {
	_, addr := startServer(b, ServerOptions{})
	c := dialT(b, "tcp://"+addr)
	buf := make([]byte, 0, 2*MaxReadRegisters)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		var err error
		if buf, err = c.ReadRegisters(ctx, 1, HoldingRegisters, 0, 10, buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "polls/s")
}

func BenchmarkEncodeTCPRequest(b *testing.B) {
	req := Request{Unit: 1, Function: FuncReadHoldingRegisters, Quantity: 10}
	buf := make([]byte, 0, MaxTCPFrame)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendTCPRequest(buf[:0], 1, &req)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkParseTCPResponse(b *testing.B) {
	req := Request{Unit: 1, Function: FuncReadHoldingRegisters, Quantity: 125}
	frame := AppendTCPFrame(nil, 1, 1, append([]byte{3, 250}, make([]byte, 250)...))
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		_, pdu, err := ParseTCPFrame(frame)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ParseResponsePDU(&req, pdu); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCRC16(b *testing.B) {
	frame := make([]byte, MaxRTUFrame-2)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for b.Loop() {
		_ = CRC16(frame)
	}
}

func BenchmarkServerAnswer(b *testing.B) {
	s := NewServer(ServerOptions{})
	pdu := AppendRequestPDU(nil, &Request{Function: FuncReadHoldingRegisters, Quantity: 10})
	out := make([]byte, 0, MaxTCPFrame)
	b.ReportAllocs()
	for b.Loop() {
		out = s.appendAnswer(out[:0], 1, pdu)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "answers/s")
}

func BenchmarkDecodeFloat64(b *testing.B) {
	raw, _ := AppendEncoded(nil, 1234.5, Float64, CDAB)
	b.ReportAllocs()
	var sum float64
	for b.Loop() {
		v, _ := DecodeFloat64(raw, Float64, CDAB)
		sum += v
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "values/s")
}

func BenchmarkNewPlan(b *testing.B) {
	items := make([]Item, 100)
	for i := range items {
		items[i] = Item{Area: HoldingRegisters, Address: uint16(3 * i), Width: 2}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewPlan(items, DefaultPlanOptions()); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(items))/b.Elapsed().Seconds(), "items/s")
}

// BenchmarkClientRTUDecode runs the client's RTU response path (echo skip,
// frame search, CRC, PDU check) over an in-memory link.
func BenchmarkClientRTUDecode(b *testing.B) {
	req := Request{Unit: 1, Function: FuncReadHoldingRegisters, Quantity: 10}
	in := append(AppendRTURequest(nil, &req), AppendRTUFrame(nil, 1, append([]byte{3, 20}, make([]byte, 20)...))...)
	c, err := NewClient("rtuovertcp://bench:1", DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	l := &fakeLink{}
	c.link = l
	buf := make([]byte, 0, 32)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		l.in = in
		l.out.Reset()
		if buf, err = c.Do(ctx, &req, buf[:0]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "responses/s")
}
