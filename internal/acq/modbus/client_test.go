package modbus

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// startServer serves a fresh server on a loopback port and closes it when
// the test ends.
func startServer(t testing.TB, opts ServerOptions) (*Server, string) {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	s := NewServer(opts)
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, addr.String()
}

func dialT(t testing.TB, url string) *Client {
	t.Helper()
	opts := DefaultOptions()
	opts.Timeout = 2 * time.Second
	c, err := Dial(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestRoundTripAllFunctions(t *testing.T) {
	s, addr := startServer(t, ServerOptions{})
	for _, scheme := range []string{"tcp", "rtuovertcp"} {
		t.Run(scheme, func(t *testing.T) {
			if scheme == "rtuovertcp" {
				// Our server speaks MBAP only; put an RTU server behind a
				// TCP listener for the RTU-over-TCP client.
				addr = serveRTUOverTCP(t, s)
			}
			c := dialT(t, scheme+"://"+addr)
			ctx := context.Background()
			const unit = 1
			if err := s.Bank().SetRegisters(InputRegisters, 10, 7, 8, 9); err != nil {
				t.Fatal(err)
			}
			if err := s.Bank().SetBits(DiscreteInputs, 3, true, false, true); err != nil {
				t.Fatal(err)
			}
			if err := c.WriteSingleRegister(ctx, unit, 100, 0xBEEF); err != nil {
				t.Fatal(err)
			}
			if err := c.WriteMultipleRegisters(ctx, unit, 101, []uint16{1, 2, 3}); err != nil {
				t.Fatal(err)
			}
			regs, err := c.ReadHoldingRegisters(ctx, unit, 100, 4)
			if err != nil || len(regs) != 4 || regs[0] != 0xBEEF || regs[3] != 3 {
				t.Fatalf("ReadHoldingRegisters = %v, %v", regs, err)
			}
			in, err := c.ReadInputRegisters(ctx, unit, 10, 3)
			if err != nil || in[0] != 7 || in[2] != 9 {
				t.Fatalf("ReadInputRegisters = %v, %v", in, err)
			}
			if err := c.WriteSingleCoil(ctx, unit, 5, true); err != nil {
				t.Fatal(err)
			}
			if err := c.WriteMultipleCoils(ctx, unit, 6, []bool{false, true, true, false, true, true, true, true, true}); err != nil {
				t.Fatal(err)
			}
			coils, err := c.ReadCoils(ctx, unit, 5, 10)
			want := []bool{true, false, true, true, false, true, true, true, true, true}
			if err != nil || len(coils) != 10 {
				t.Fatalf("ReadCoils = %v, %v", coils, err)
			}
			for i := range want {
				if coils[i] != want[i] {
					t.Fatalf("ReadCoils = %v, want %v", coils, want)
				}
			}
			di, err := c.ReadDiscreteInputs(ctx, unit, 3, 3)
			if err != nil || !di[0] || di[1] || !di[2] {
				t.Fatalf("ReadDiscreteInputs = %v, %v", di, err)
			}
			raw, _ := AppendEncoded(nil, -1234.5, Float32, CDAB)
			if err := c.WriteRegisterBytes(ctx, unit, 200, raw); err != nil {
				t.Fatal(err)
			}
			got, err := c.ReadRegisters(ctx, unit, HoldingRegisters, 200, 2, nil)
			if err != nil {
				t.Fatal(err)
			}
			if v, _ := DecodeFloat64(got, Float32, CDAB); v != -1234.5 {
				t.Errorf("float32 round trip = %v", v)
			}
			// The bank saw the client's writes.
			if b, _ := s.Bank().Registers(HoldingRegisters, 101, 3); b[2] != 3 {
				t.Errorf("bank = %v", b)
			}
		})
	}
}

// serveRTUOverTCP accepts one TCP client and serves RTU frames on it.
func serveRTUOverTCP(t testing.TB, s *Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		_ = s.ServeRTU(ctx, conn)
	}()
	t.Cleanup(func() { cancel(); _ = ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

func TestExceptions(t *testing.T) {
	refuse := func(w Write) error {
		if w.Address == 13 {
			return &ExceptionError{Code: ExIllegalDataValue}
		}
		if w.Address == 14 {
			return errors.New("tag is read-only")
		}
		return nil
	}
	_, addr := startServer(t, ServerOptions{HoldingRegisters: 100, InputRegisters: 100, Coils: 100, DiscreteInputs: 100, OnWrite: refuse, UnitID: 7})
	c := dialT(t, "tcp://"+addr)
	ctx := context.Background()
	tests := []struct {
		name string
		do   func() error
		code ExceptionCode
	}{
		{"read beyond table", func() error { _, err := c.ReadHoldingRegisters(ctx, 7, 95, 10); return err }, ExIllegalDataAddress},
		{"coil beyond table", func() error { return c.WriteSingleCoil(ctx, 7, 100, true) }, ExIllegalDataAddress},
		{"hook exception", func() error { return c.WriteSingleRegister(ctx, 7, 13, 1) }, ExIllegalDataValue},
		{"hook error", func() error { return c.WriteMultipleRegisters(ctx, 7, 14, []uint16{1}) }, ExServerDeviceFailure},
		{"other unit", func() error { _, err := c.ReadHoldingRegisters(ctx, 8, 0, 1); return err }, ExGatewayTargetFailedRespond},
	}
	for _, tt := range tests {
		err := tt.do()
		var ex *ExceptionError
		if !errors.As(err, &ex) || ex.Code != tt.code {
			t.Errorf("%s: err = %v, want exception %v", tt.name, err, tt.code)
		}
	}
	// An exception keeps the connection.
	if st := c.Stats(); st.Dials != 1 || st.Exceptions != uint64(len(tests)) {
		t.Errorf("stats = %+v", st)
	}
	// Illegal function, sent raw because the client refuses to encode it.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write(AppendTCPFrame(nil, 9, 7, []byte{0x2B, 0x0E, 0x01, 0x00}))
	resp := make([]byte, 9)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(conn, resp); err != nil {
		t.Fatal(err)
	}
	if string(resp) != "\x00\x09\x00\x00\x00\x03\x07\xab\x01" {
		t.Errorf("illegal function answer = % x", resp)
	}
}

// fakeServer accepts connections and hands each to handle.
func fakeServer(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				handle(conn)
			}()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

func TestStaleTransactionID(t *testing.T) {
	addr := fakeServer(t, func(conn net.Conn) {
		req := make([]byte, 12)
		for {
			if _, err := io.ReadFull(conn, req); err != nil {
				return
			}
			id := binary.BigEndian.Uint16(req)
			// First a late answer to an older request with a wrong value,
			// then a frame split in two writes with the right id.
			stale := AppendTCPFrame(nil, id-1, 1, []byte{3, 2, 0xDE, 0xAD})
			good := AppendTCPFrame(nil, id, 1, []byte{3, 2, 0x00, 0x2A})
			_, _ = conn.Write(append(stale, good[:5]...))
			time.Sleep(time.Millisecond)
			_, _ = conn.Write(good[5:])
		}
	})
	c := dialT(t, "tcp://"+addr)
	for range 3 {
		regs, err := c.ReadHoldingRegisters(context.Background(), 1, 0, 1)
		if err != nil || regs[0] != 42 {
			t.Fatalf("read = %v, %v; want [42]", regs, err)
		}
	}
	if st := c.Stats(); st.Stale != 3 {
		t.Errorf("stale = %d, want 3", st.Stale)
	}
}

func TestTimeoutAndReconnect(t *testing.T) {
	// A server that never answers: the request times out and the
	// connection is dropped.
	silent := fakeServer(t, func(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) })
	opts := DefaultOptions()
	opts.Timeout = 100 * time.Millisecond
	c, err := Dial(context.Background(), "tcp://"+silent, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ReadHoldingRegisters(context.Background(), 1, 0, 1)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want timeout", err)
	}
	c.sem <- struct{}{}
	closed := c.link == nil
	c.release()
	if !closed {
		t.Error("connection kept after a timeout")
	}
	c.Close()

	// Our server stops and comes back on the same port: the client
	// recovers by itself. The back-off is long enough that the request
	// after two failed dials comes inside it on a slow machine too (under
	// qemu-user at a load of 10, 100 ms had passed).
	opts.BackoffMin = time.Second
	s, addr := startServer(t, ServerOptions{})
	_ = s.Bank().SetRegisters(HoldingRegisters, 0, 99)
	c, err = Dial(context.Background(), "tcp://"+addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.ReadHoldingRegisters(context.Background(), 1, 0, 1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	var failures int
	for i := range 3 {
		if _, err := c.ReadHoldingRegisters(context.Background(), 1, 0, 1); err != nil {
			failures++
		} else {
			t.Fatalf("request %d succeeded with the server down", i)
		}
	}
	// Back-off: after two failed dials the third request does not dial.
	if _, err := c.ReadHoldingRegisters(context.Background(), 1, 0, 1); !errors.Is(err, ErrBackoff) {
		t.Errorf("err = %v, want back-off", err)
	}
	s2 := NewServer(ServerOptions{Addr: addr})
	if _, err := s2.Listen(); err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	_ = s2.Bank().SetRegisters(HoldingRegisters, 0, 77)
	giveUp := time.Now().Add(20 * time.Second)
	for {
		regs, err := c.ReadHoldingRegisters(context.Background(), 1, 0, 1)
		if err == nil {
			if regs[0] != 77 {
				t.Fatalf("read %v from the restarted server", regs)
			}
			break
		}
		if time.Now().After(giveUp) {
			t.Fatalf("no reconnect: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestContextCancel(t *testing.T) {
	silent := fakeServer(t, func(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) })
	opts := DefaultOptions()
	opts.Timeout = time.Minute
	c, err := Dial(context.Background(), "tcp://"+silent, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := c.ReadHoldingRegisters(ctx, 1, 0, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := c.ReadHoldingRegisters(ctx, 1, 0, 1); !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want timeout", err)
	}
}

// TestSharedClient polls one client from several goroutines with different
// unit ids; run with -race.
func TestSharedClient(t *testing.T) {
	s, addr := startServer(t, ServerOptions{})
	_ = s.Bank().SetRegisters(HoldingRegisters, 0, 1, 2, 3, 4, 5, 6, 7, 8)
	c := dialT(t, "tcp://"+addr)
	var wg sync.WaitGroup
	for unit := uint8(1); unit <= 4; unit++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 16)
			for range 200 {
				raw, err := c.ReadRegisters(context.Background(), unit, HoldingRegisters, uint16(unit), 2, buf[:0])
				if err != nil || binary.BigEndian.Uint16(raw) != uint16(unit)+1 {
					t.Errorf("unit %d: %x, %v", unit, raw, err)
					return
				}
				_ = s.Bank().SetRegisters(InputRegisters, uint16(unit), uint16(unit))
			}
		}()
	}
	wg.Wait()
}

func TestParseURL(t *testing.T) {
	good := map[string]target{
		"tcp://10.0.0.1":       {scheme: "tcp", addr: "10.0.0.1:502"},
		"rtuovertcp://gw:4001": {scheme: "rtuovertcp", addr: "gw:4001"},
		"rtu:///dev/ttyUSB0":   {scheme: "rtu", addr: "/dev/ttyUSB0", serial: SerialConfig{9600, 8, 'N', 1}},
		"rtu:///dev/ttyS1?baud=19200&parity=e&stop=2&data=7": {scheme: "rtu", addr: "/dev/ttyS1", serial: SerialConfig{19200, 7, 'E', 2}},
	}
	for in, want := range good {
		if got, err := parseTarget(in); err != nil || got != want {
			t.Errorf("parseTarget(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"udp://x:1", "tcp://", "rtu://", "rtu:///dev/x?baud=fast", "rtu:///dev/x?parity=X", "rtu:///dev/x?speed=1", "rtu:///dev/x?data=9"} {
		if _, err := parseTarget(in); err == nil {
			t.Errorf("parseTarget(%q) accepted", in)
		}
	}
}

// TestServerPipelining sends two requests in one write: the server answers
// both, in order.
func TestServerPipelining(t *testing.T) {
	s, addr := startServer(t, ServerOptions{})
	_ = s.Bank().SetRegisters(HoldingRegisters, 0, 5, 6)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r1 := Request{Unit: 1, Function: FuncReadHoldingRegisters, Address: 0, Quantity: 1}
	r2 := Request{Unit: 1, Function: FuncReadHoldingRegisters, Address: 1, Quantity: 1}
	_, _ = conn.Write(AppendTCPRequest(AppendTCPRequest(nil, 1, &r1), 2, &r2))
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 22)
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatal(err)
	}
	want := "\x00\x01\x00\x00\x00\x05\x01\x03\x02\x00\x05" + "\x00\x02\x00\x00\x00\x05\x01\x03\x02\x00\x06"
	if string(got) != want {
		t.Errorf("answers = % x", got)
	}
}

// TestLockWaitBounded checks that a request queued behind a slow one gives
// up at its own deadline instead of waiting for the slow one.
func TestLockWaitBounded(t *testing.T) {
	silent := fakeServer(t, func(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) })
	opts := DefaultOptions()
	opts.Timeout = time.Minute
	c, err := Dial(context.Background(), "tcp://"+silent, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	slow, cancelSlow := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.ReadHoldingRegisters(slow, 1, 0, 1)
	}()
	// Wait until the slow request holds the lock.
	for c.Stats().Requests == 0 || len(c.sem) == 0 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.ReadHoldingRegisters(ctx, 2, 0, 1); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrTimeout) {
		t.Errorf("queued request: %v, want a timeout", err)
	}
	cancelSlow()
	<-done
}
