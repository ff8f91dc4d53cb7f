package agent

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/sdnotify"
)

// TestServeNotifiesSystemd runs the real serve under a fake systemd
// notification socket with a watchdog and checks the sequence it sees:
// READY=1 once serving, WATCHDOG=1 pings while running, STOPPING=1 when
// told to stop, then a clean exit.
func TestServeNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msgs := make(chan string, 1024)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, _, err := c.ReadFromUnix(buf)
			if err != nil {
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	next := func() string {
		t.Helper()
		select {
		case m := <-msgs:
			return m
		case <-time.After(20 * time.Second):
			t.Fatal("no notification within 20 s")
			return ""
		}
	}
	t.Setenv(sdnotify.EnvSocket, sock)
	t.Setenv(sdnotify.EnvWatchdogUS, "100000") // a ping every 50 ms
	t.Setenv(sdnotify.EnvWatchdogPID, "")

	cfg := config.Default()
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, cfg, NewLogger("warn"), func(addr string, _ *plant.Plant) { addrc <- addr })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatal(err)
	}
	if got, want := next(), "READY=1\nSTATUS=serving on "+addr; got != want {
		t.Fatalf("first notification %q, want %q", got, want)
	}
	for i := 0; i < 2; i++ {
		if got := next(); got != "WATCHDOG=1" {
			t.Fatalf("notification %q while running, want WATCHDOG=1", got)
		}
	}
	cancel()
	for {
		m := next()
		if m == "WATCHDOG=1" {
			continue // a ping already on its way
		}
		if !strings.HasPrefix(m, "STOPPING=1") {
			t.Fatalf("notification %q after the stop, want STOPPING=1", m)
		}
		break
	}
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

// TestServeWithoutNotifySocket checks that notifyReady is a no-op outside
// systemd.
func TestServeWithoutNotifySocket(t *testing.T) {
	t.Setenv(sdnotify.EnvSocket, "")
	stop := notifyReady(context.Background(), "127.0.0.1:1", nil, NewLogger("error"))
	stop()
}
