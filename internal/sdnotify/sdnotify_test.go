package sdnotify

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// listen opens a fake service-manager socket and returns its name (as
// $NOTIFY_SOCKET would carry it) and a channel of received datagrams.
func listen(t *testing.T, abstract bool) (string, <-chan string) {
	t.Helper()
	name := filepath.Join(t.TempDir(), "notify")
	if abstract {
		name = "@pith-sdnotify-test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ch := make(chan string, 1024)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := c.ReadFromUnix(buf)
			if err != nil {
				close(ch)
				return
			}
			ch <- string(buf[:n])
		}
	}()
	return name, ch
}

// recv waits for the next datagram; the bound only catches a hang.
func recv(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10 s")
		return ""
	}
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestSendStates(t *testing.T) {
	for _, abstract := range []bool{false, true} {
		t.Run("abstract="+strconv.FormatBool(abstract), func(t *testing.T) {
			sock, ch := listen(t, abstract)
			n, err := FromEnv(env(map[string]string{EnvSocket: sock}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !n.Enabled() {
				t.Fatal("not enabled with a socket set")
			}
			steps := []struct {
				send func() error
				want string
			}{
				{func() error { return n.Ready("") }, "READY=1"},
				{func() error { return n.Ready("serving on :8080") }, "READY=1\nSTATUS=serving on :8080"},
				{func() error { return n.Status("two\nlines") }, "STATUS=two lines"},
				{func() error { return n.Stopping("draining") }, "STOPPING=1\nSTATUS=draining"},
				{func() error { return n.Stopping("") }, "STOPPING=1"},
			}
			for _, s := range steps {
				if err := s.send(); err != nil {
					t.Fatal(err)
				}
				if got := recv(t, ch); got != s.want {
					t.Errorf("got %q, want %q", got, s.want)
				}
			}
		})
	}
}

// TestDisabled checks that without $NOTIFY_SOCKET nothing is sent and
// nothing fails, and that a bad socket name is refused.
func TestDisabled(t *testing.T) {
	n, err := FromEnv(env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.Enabled() {
		t.Fatal("enabled without NOTIFY_SOCKET")
	}
	for _, f := range []func() error{
		func() error { return n.Ready("x") }, func() error { return n.Stopping("") },
		func() error { return n.Status("x") }, func() error { return n.Send("WATCHDOG=1") },
	} {
		if err := f(); err != nil {
			t.Errorf("disabled send: %v", err)
		}
	}
	var nilN *Notifier
	if nilN.Enabled() || nilN.Ready("") != nil {
		t.Error("nil Notifier is not a quiet no-op")
	}
	// Watchdog returns at once when disabled, even with a long interval.
	n.Watchdog(context.Background(), time.Hour, nil)

	for _, bad := range []string{"relative/path", "@", "vsock:2:1234"} {
		n, err := New(bad, nil)
		if err == nil || n.Enabled() {
			t.Errorf("New(%q): err %v, enabled %v; want an error and disabled", bad, err, n.Enabled())
		}
	}
}

func TestSendToMissingSocket(t *testing.T) {
	n, err := New(filepath.Join(t.TempDir(), "gone"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Ready(""); err == nil || !strings.Contains(err.Error(), "notify service manager") {
		t.Errorf("send to a missing socket: %v", err)
	}
}

func TestWatchdogInterval(t *testing.T) {
	pid := 4242
	cases := []struct {
		usec, pid string
		want      time.Duration
	}{
		{"", "", 0},
		{"0", "", 0},
		{"abc", "", 0},
		{"-5", "", 0},
		{"30000000", "", 15 * time.Second},
		{"30000000", "4242", 15 * time.Second},
		{"30000000", "1", 0}, // meant for another process
		{"30000000", "x", 0},
		{"1000", "", 500 * time.Microsecond},
		{"18446744073709551615", "", 0}, // beyond int63: malformed for us
	}
	for _, c := range cases {
		got := WatchdogInterval(env(map[string]string{EnvWatchdogUS: c.usec, EnvWatchdogPID: c.pid}), pid)
		if got != c.want {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: got %v, want %v", c.usec, c.pid, got, c.want)
		}
	}
}

// TestWatchdogPings checks that pings keep coming while alive, none is
// sent while not alive, and the loop ends with its context. It counts
// messages, never measures intervals.
func TestWatchdogPings(t *testing.T) {
	sock, ch := listen(t, false)
	n, err := New(sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	every := WatchdogInterval(env(map[string]string{EnvWatchdogUS: "20000"}), 1) // 10 ms
	// Not alive for the first 3 checks, then alive: a ping can only be
	// sent after a check that said alive.
	var checks atomic.Int64
	alive := func() bool { return checks.Add(1) > 3 }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Watchdog(ctx, every, alive)
	}()
	for i := 0; i < 5; i++ {
		if got := recv(t, ch); got != "WATCHDOG=1" {
			t.Fatalf("ping %d: got %q", i, got)
		}
		if i == 0 && checks.Load() < 4 {
			t.Fatalf("ping after %d checks, want it only after the 4th (the first alive one)", checks.Load())
		}
	}
	cancel()
	<-done // the loop ends with its context
}

// TestWatchdogSilentWhenDead checks that no ping is sent while alive
// says no: the manager must get to restart a stuck process.
func TestWatchdogSilentWhenDead(t *testing.T) {
	sock, ch := listen(t, false)
	n, err := New(sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	var checks atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.Watchdog(ctx, time.Millisecond, func() bool { checks.Add(1); return false })
	}()
	for checks.Load() < 20 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	// A marker sent now arrives after anything the watchdog sent.
	if err := n.Send("MARK=1"); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, ch); got != "MARK=1" {
		t.Errorf("got %q before the marker, want no pings", got)
	}
}
