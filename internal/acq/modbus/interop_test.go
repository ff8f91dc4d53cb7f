package modbus

// Interop tests against independent Modbus implementations. Each skips with
// a message when its peer is missing; CI installs them with
//
//	apt-get install -y python3-pymodbus mbpoll libmodbus-dev gcc
//
// The rate comparisons (log lines "rate ...") run for
// PITH_MODBUS_RATE_SECONDS seconds each (default 2); they are reported,
// never asserted, because the machine is shared.

import (
	"bufio"
	"context"
	"fmt"
	"github.com/pith-historian/pith/internal/testpeer"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	smb "github.com/simonvetter/modbus"
)

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitPort waits until something accepts connections on addr.
func waitPort(t testing.TB, addr string) {
	t.Helper()
	giveUp := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(giveUp) {
			t.Fatalf("peer never listened on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startPeer starts a peer process and kills it when the test ends.
func startPeer(t testing.TB, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
}

func rateSeconds() time.Duration {
	if s, err := strconv.ParseFloat(os.Getenv("PITH_MODBUS_RATE_SECONDS"), 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	return 2 * time.Second
}

// ourRate polls 10 registers back to back for d and returns polls/s and the
// last values.
func ourRate(t testing.TB, addr string, d time.Duration) (float64, []uint16) {
	t.Helper()
	c := dialT(t, "tcp://"+addr)
	buf := make([]byte, 0, 20)
	ctx := context.Background()
	n := 0
	start := time.Now()
	for time.Since(start) < d {
		var err error
		if buf, err = c.ReadRegisters(ctx, 1, HoldingRegisters, 0, 10, buf[:0]); err != nil {
			t.Fatal(err)
		}
		n++
	}
	rate := float64(n) / time.Since(start).Seconds()
	vals := make([]uint16, 10)
	for i := range vals {
		vals[i] = uint16(buf[2*i])<<8 | uint16(buf[2*i+1])
	}
	return rate, vals
}

func checkTriples(t testing.TB, who string, vals []uint16) {
	t.Helper()
	for i, v := range vals {
		if int(v) != 3*i {
			t.Fatalf("%s read %v, want 0,3,6,...", who, vals)
		}
	}
}

func TestInteropSimonvetter(t *testing.T) {
	// Their client against our server.
	s, addr := startServer(t, ServerOptions{})
	_ = s.Bank().SetRegisters(HoldingRegisters, 0, 10, 20, 30)
	cl, err := smb.NewClient(&smb.ClientConfiguration{URL: "tcp://" + addr, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Open(); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	regs, err := cl.ReadRegisters(0, 3, smb.HOLDING_REGISTER)
	if err != nil || regs[2] != 30 {
		t.Fatalf("their read = %v, %v", regs, err)
	}
	f, err := cl.ReadFloat32(0, smb.HOLDING_REGISTER) // 10, 20 as ABCD
	if want, _ := DecodeFloat64([]byte{0, 10, 0, 20}, Float32, ABCD); err != nil || float64(f) != want {
		t.Errorf("their float = %v, %v; want %v", f, err, want)
	}
	if err := cl.WriteRegisters(5, []uint16{7, 8}); err != nil {
		t.Fatal(err)
	}
	if err := cl.WriteCoil(9, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Bank().Registers(HoldingRegisters, 5, 2); got[1] != 8 {
		t.Errorf("bank after their write = %v", got)
	}
	if got, _ := s.Bank().Bits(Coils, 9, 1); !got[0] {
		t.Error("coil not written by their client")
	}

	// Our client against their server.
	port := freePort(t)
	srv, err := smb.NewServer(&smb.ServerConfiguration{URL: fmt.Sprintf("tcp://127.0.0.1:%d", port), MaxClients: 4}, &svHandler{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	c := dialT(t, fmt.Sprintf("tcp://127.0.0.1:%d", port))
	got, err := c.ReadInputRegisters(context.Background(), 1, 100, 4)
	if err != nil || got[0] != 100 || got[3] != 103 {
		t.Fatalf("our read from their server = %v, %v", got, err)
	}
	if err := c.WriteMultipleRegisters(context.Background(), 1, 0, []uint16{1, 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadInputRegisters(context.Background(), 1, 65000, 4); err == nil {
		t.Error("their illegal address exception was not reported")
	}
}

// svHandler is a simonvetter/modbus server handler: input register i holds
// i below 1000 and everything else is an illegal address.
type svHandler struct{}

func (svHandler) HandleCoils(*smb.CoilsRequest) ([]bool, error) { return nil, smb.ErrIllegalFunction }
func (svHandler) HandleDiscreteInputs(*smb.DiscreteInputsRequest) ([]bool, error) {
	return nil, smb.ErrIllegalFunction
}
func (svHandler) HandleHoldingRegisters(req *smb.HoldingRegistersRequest) ([]uint16, error) {
	return make([]uint16, req.Quantity), nil
}
func (svHandler) HandleInputRegisters(req *smb.InputRegistersRequest) ([]uint16, error) {
	if int(req.Addr)+int(req.Quantity) > 1000 {
		return nil, smb.ErrIllegalDataAddress
	}
	out := make([]uint16, req.Quantity)
	for i := range out {
		out[i] = req.Addr + uint16(i)
	}
	return out, nil
}

func havePymodbus(t *testing.T) {
	if err := exec.Command("/usr/bin/python3", "-c", "import pymodbus").Run(); err != nil {
		testpeer.Missing(t, "pymodbus missing (apt-get install python3-pymodbus)")
	}
}

func TestInteropPymodbusClient(t *testing.T) {
	havePymodbus(t)
	s, addr := startServer(t, ServerOptions{HoldingRegisters: 1000})
	for i := range uint16(10) {
		_ = s.Bank().SetRegisters(HoldingRegisters, i, 3*i)
	}
	_ = s.Bank().SetBits(Coils, 0, true, false, true)
	_, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command("/usr/bin/python3", "testdata/pymodbus_client.py", port).CombinedOutput()
	if err != nil {
		t.Fatalf("pymodbus client: %v\n%s", err, out)
	}
	want := "holding 0,3,6,9,12,15,18,21,24,27\nwritten 4321,1,2\ncoils 1,0,1,0,0,0,0,0\nexception 2\n"
	if string(out) != want {
		t.Errorf("pymodbus client printed\n%s\nwant\n%s", out, want)
	}
}

func TestInteropPymodbusServer(t *testing.T) {
	havePymodbus(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	_, port, _ := net.SplitHostPort(addr)
	startPeer(t, "/usr/bin/python3", "testdata/pymodbus_server.py", port)
	waitPort(t, addr)
	c := dialT(t, "tcp://"+addr)
	ctx := context.Background()
	regs, err := c.ReadHoldingRegisters(ctx, 1, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	checkTriples(t, "our client from pymodbus", regs)
	if err := c.WriteMultipleRegisters(ctx, 1, 100, []uint16{11, 12}); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteSingleCoil(ctx, 1, 1, true); err != nil {
		t.Fatal(err)
	}
	bits, err := c.ReadCoils(ctx, 1, 0, 3)
	if err != nil || !bits[0] || !bits[1] || !bits[2] {
		t.Errorf("coils = %v, %v", bits, err)
	}
	if _, err := c.ReadHoldingRegisters(ctx, 1, 500, 10); err == nil {
		t.Error("pymodbus exception not reported")
	}
}

func TestInteropMbpoll(t *testing.T) {
	mbpoll, err := exec.LookPath("mbpoll")
	if err != nil {
		testpeer.Missing(t, "mbpoll missing (apt-get install mbpoll)")
	}
	s, addr := startServer(t, ServerOptions{})
	_ = s.Bank().SetRegisters(HoldingRegisters, 0, 100, 200, 300, 400)
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command(mbpoll, "-m", "tcp", "-a", "1", "-r", "0", "-0", "-c", "4", "-t", "4",
		"-1", "-p", port, host).CombinedOutput()
	if err != nil {
		t.Fatalf("mbpoll: %v\n%s", err, out)
	}
	for i, want := range []string{"100", "200", "300", "400"} {
		if !strings.Contains(string(out), fmt.Sprintf("[%d]: \t%s", i, want)) {
			t.Fatalf("mbpoll output lacks register %d = %s:\n%s", i, want, out)
		}
	}
	// A write through mbpoll lands in the bank.
	out, err = exec.Command(mbpoll, "-m", "tcp", "-a", "1", "-r", "10", "-0", "-t", "4",
		"-1", "-p", port, host, "555", "666").CombinedOutput()
	if err != nil {
		t.Fatalf("mbpoll write: %v\n%s", err, out)
	}
	if got, _ := s.Bank().Registers(HoldingRegisters, 10, 2); got[0] != 555 || got[1] != 666 {
		t.Errorf("bank after mbpoll write = %v\n%s", got, out)
	}
}

// TestInteropLibmodbus compiles a libmodbus C peer and compares polling
// rates: C client against C server (the reference pair), C client and our
// client against our server, our client against the C server, and, when
// pymodbus is installed, both clients against a pymodbus server.
func TestInteropLibmodbus(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		testpeer.Missing(t, "no C compiler (apt-get install gcc)")
	}
	if _, err := os.Stat("/usr/include/modbus/modbus.h"); err != nil {
		testpeer.Missing(t, "libmodbus headers missing (apt-get install libmodbus-dev)")
	}
	bin := filepath.Join(t.TempDir(), "libmodbus_peer")
	if out, err := exec.Command(cc, "-O2", "-I/usr/include/modbus", "-o", bin,
		"testdata/libmodbus_peer.c", "-lmodbus").CombinedOutput(); err != nil {
		t.Fatalf("compile libmodbus peer: %v\n%s", err, out)
	}
	d := rateSeconds()
	cRate := func(addr string) float64 {
		host, port, _ := net.SplitHostPort(addr)
		out, err := exec.Command(bin, "client", host, port, fmt.Sprint(d.Seconds())).Output()
		if err != nil {
			t.Fatalf("libmodbus client: %v\n%s", err, out)
		}
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		var polls, secs float64
		sc.Scan()
		fmt.Sscanf(sc.Text(), "%f %f", &polls, &secs)
		sc.Scan()
		var vals []uint16
		for _, f := range strings.Split(sc.Text(), ",") {
			v, _ := strconv.Atoi(f)
			vals = append(vals, uint16(v))
		}
		checkTriples(t, "libmodbus client", vals)
		return polls / secs
	}

	cAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	_, cPort, _ := net.SplitHostPort(cAddr)
	startPeer(t, bin, "server", cPort)
	waitPort(t, cAddr)
	s, ourAddr := startServer(t, ServerOptions{})
	for i := range uint16(10) {
		_ = s.Bank().SetRegisters(HoldingRegisters, i, 3*i)
	}

	pair := cRate(cAddr)
	cOnOurs := cRate(ourAddr)
	oursOnC, vals := ourRate(t, cAddr, d)
	checkTriples(t, "our client from libmodbus", vals)
	ours, _ := ourRate(t, ourAddr, d)
	t.Logf("rate libmodbus client -> libmodbus server: %8.0f polls/s (reference)", pair)
	t.Logf("rate libmodbus client -> our server:       %8.0f polls/s (%.0f%% of reference)", cOnOurs, 100*cOnOurs/pair)
	t.Logf("rate our client -> libmodbus server:       %8.0f polls/s (%.0f%% of reference)", oursOnC, 100*oursOnC/pair)
	t.Logf("rate our client -> our server:             %8.0f polls/s (%.0f%% of reference)", ours, 100*ours/pair)

	if exec.Command("/usr/bin/python3", "-c", "import pymodbus").Run() != nil {
		t.Log("pymodbus missing: no rates against a pymodbus server")
		return
	}
	pyAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	_, pyPort, _ := net.SplitHostPort(pyAddr)
	startPeer(t, "/usr/bin/python3", "testdata/pymodbus_server.py", pyPort)
	waitPort(t, pyAddr)
	cOnPy := cRate(pyAddr)
	oursOnPy, vals := ourRate(t, pyAddr, d)
	checkTriples(t, "our client from pymodbus", vals)
	t.Logf("rate libmodbus client -> pymodbus server:  %8.0f polls/s", cOnPy)
	t.Logf("rate our client -> pymodbus server:        %8.0f polls/s (%.0f%% of libmodbus client)", oursOnPy, 100*oursOnPy/cOnPy)
}
