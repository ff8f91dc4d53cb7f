package modbus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair and returns the master and the
// slave's path; the client opens the slave like a USB serial adapter.
func openPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("skip: no pseudo-terminals here: %v", err)
	}
	rc, err := m.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	// Control keeps the descriptor non-blocking (Fd would not), so that
	// closing the master unblocks the server's read.
	_ = rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr == nil {
			n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	})
	if ierr != nil {
		m.Close()
		t.Fatalf("unlock pty: %v", ierr)
	}
	return m, fmt.Sprintf("/dev/pts/%d", n)
}

func TestSerialRTUOverPTY(t *testing.T) {
	master, slave := openPTY(t)
	s := NewServer(ServerOptions{UnitID: 5, HoldingRegisters: 1000})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.ServeRTU(ctx, master) }()
	defer func() {
		cancel()
		<-done
	}()

	opts := DefaultOptions()
	opts.Timeout = 300 * time.Millisecond
	c, err := Dial(context.Background(), "rtu://"+slave+"?baud=115200", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bg := context.Background()
	_ = s.Bank().SetRegisters(InputRegisters, 0, 11, 22, 33)
	for i := range 20 {
		regs, err := c.ReadInputRegisters(bg, 5, 0, 3)
		if err != nil || regs[2] != 33 {
			t.Fatalf("poll %d: %v, %v", i, regs, err)
		}
	}
	if err := c.WriteMultipleRegisters(bg, 5, 10, []uint16{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteSingleCoil(bg, 5, 3, true); err != nil {
		t.Fatal(err)
	}
	if bits, err := c.ReadCoils(bg, 5, 0, 4); err != nil || !bits[3] {
		t.Fatalf("coils = %v, %v", bits, err)
	}
	if _, err := c.ReadHoldingRegisters(bg, 5, 999, 2); !errors.Is(err, &ExceptionError{Code: ExIllegalDataAddress}) {
		t.Errorf("read past the table: %v", err)
	}
	// Another unit is silent: a timeout that keeps the serial line open.
	if _, err := c.ReadHoldingRegisters(bg, 6, 0, 1); !errors.Is(err, ErrTimeout) {
		t.Fatalf("unit 6: %v, want timeout", err)
	}
	// Broadcast: executed, never answered.
	if err := c.WriteSingleRegister(bg, 0, 20, 99); err != nil {
		t.Fatal(err)
	}
	regs, err := c.ReadHoldingRegisters(bg, 5, 10, 11)
	if err != nil || regs[0] != 1 || regs[1] != 2 || regs[10] != 99 {
		t.Fatalf("after writes: %v, %v", regs, err)
	}
	if st := c.Stats(); st.Dials != 1 || st.Timeouts != 1 {
		t.Errorf("stats = %+v, want one dial and one timeout", st)
	}
}

// TestSerialRTUNoiseAndEcho plays a device on a two-wire adapter that echoes
// the request and has line noise before its answer; the client must skip
// both and take the real response.
func TestSerialRTUNoiseAndEcho(t *testing.T) {
	master, slave := openPTY(t)
	defer master.Close()
	go func() {
		req := make([]byte, 8)
		for {
			if _, err := io.ReadFull(master, req); err != nil {
				return
			}
			resp := AppendRTUFrame(nil, req[0], []byte{3, 4, 0x12, 0x34, 0x56, 0x78})
			// Noise that looks like a frame start (unit, function) but
			// fails its CRC, then our echo, then the answer.
			_, _ = master.Write([]byte{0x00, req[0], 0x03, 0x04, 0xFF})
			_, _ = master.Write(req)
			_, _ = master.Write(resp[:3])
			_, _ = master.Write(resp[3:])
		}
	}()
	opts := DefaultOptions()
	opts.Timeout = time.Second
	c, err := Dial(context.Background(), "rtu://"+slave+"?baud=38400&parity=E", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 5 {
		raw, err := c.ReadRegisters(context.Background(), 9, HoldingRegisters, 0, 2, nil)
		if err != nil || string(raw) != "\x12\x34\x56\x78" {
			t.Fatalf("poll %d: %x, %v", i, raw, err)
		}
	}
	if st := c.Stats(); st.Garbage == 0 || st.Errors != 0 {
		t.Errorf("stats = %+v, want skipped garbage and no errors", st)
	}
}
