// Package sdnotify speaks systemd's service notification protocol: one
// datagram per state change ("READY=1", "WATCHDOG=1", "STOPPING=1",
// "STATUS=...") sent to the unix socket named by $NOTIFY_SOCKET. It needs
// no libsystemd and no cgo, so the static binary keeps it.
//
// Outside systemd (no $NOTIFY_SOCKET) every method does nothing, so the
// caller never has to ask where it runs.
package sdnotify

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"time"
)

// Environment variables the service manager sets.
const (
	EnvSocket      = "NOTIFY_SOCKET" // where to send notifications: a path or "@abstract"
	EnvWatchdogUS  = "WATCHDOG_USEC" // the watchdog timeout in microseconds (WatchdogSec=)
	EnvWatchdogPID = "WATCHDOG_PID"  // the process the watchdog is meant for, when set
)

// sendTimeout bounds one datagram write: the manager reads its socket
// promptly, and a stuck write must not hold up a shutdown.
const sendTimeout = time.Second

// Notifier sends notifications to one socket. The zero of it (or nil)
// is disabled. Its methods are safe for concurrent use: each send opens
// its own connection, as sd_notify does.
type Notifier struct {
	addr *net.UnixAddr // nil: disabled
	log  *slog.Logger
}

// New returns a Notifier for the socket named by socket, the value of
// $NOTIFY_SOCKET. An empty name gives a disabled Notifier; a name that is
// neither an absolute path nor an abstract name ("@...") is refused with
// an error (systemd's vsock addresses are not supported) and also gives
// a disabled Notifier. Go maps a leading '@' to Linux's abstract socket
// namespace itself.
func New(socket string, log *slog.Logger) (*Notifier, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	n := &Notifier{log: log}
	switch {
	case socket == "":
		return n, nil
	case strings.HasPrefix(socket, "/"), strings.HasPrefix(socket, "@") && len(socket) > 1:
		n.addr = &net.UnixAddr{Name: socket, Net: "unixgram"}
		return n, nil
	}
	return n, fmt.Errorf("use %s %q: not a socket path or abstract name", EnvSocket, socket)
}

// FromEnv is New with the socket taken from getenv (os.Getenv in
// production, a map in tests).
func FromEnv(getenv func(string) string, log *slog.Logger) (*Notifier, error) {
	return New(getenv(EnvSocket), log)
}

// Enabled reports whether notifications go anywhere.
func (n *Notifier) Enabled() bool { return n != nil && n.addr != nil }

// Send sends one notification: newline-separated KEY=VALUE assignments.
// It does nothing when the Notifier is disabled.
func (n *Notifier) Send(state string) error {
	if !n.Enabled() {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, n.addr)
	if err != nil {
		return fmt.Errorf("notify service manager: %w", err)
	}
	defer c.Close()
	if err := c.SetWriteDeadline(time.Now().Add(sendTimeout)); err != nil {
		return fmt.Errorf("notify service manager: %w", err)
	}
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify service manager: %w", err)
	}
	return nil
}

// Ready tells the manager that start-up is complete (Type=notify units
// count as started only then), with an optional status line.
func (n *Notifier) Ready(status string) error {
	return n.Send(withStatus("READY=1", status))
}

// Stopping tells the manager that a clean shutdown has begun, so that a
// slow drain is not mistaken for a hang.
func (n *Notifier) Stopping(status string) error {
	return n.Send(withStatus("STOPPING=1", status))
}

// Status sets the free-form line `systemctl status` shows.
func (n *Notifier) Status(status string) error {
	return n.Send("STATUS=" + oneLine(status))
}

func withStatus(state, status string) string {
	if status == "" {
		return state
	}
	return state + "\nSTATUS=" + oneLine(status)
}

// oneLine keeps a status from smuggling in other assignments.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// WatchdogInterval returns how often to send WATCHDOG=1: half of
// $WATCHDOG_USEC, as systemd recommends. It returns 0 (no watchdog) when
// the variable is unset or malformed, or when $WATCHDOG_PID names another
// process than pid.
func WatchdogInterval(getenv func(string) string, pid int) time.Duration {
	us, err := strconv.ParseUint(getenv(EnvWatchdogUS), 10, 63)
	if err != nil || us == 0 {
		return 0
	}
	if p := getenv(EnvWatchdogPID); p != "" {
		if v, err := strconv.Atoi(p); err != nil || v != pid {
			return 0
		}
	}
	const maxUS = uint64(1<<63-1) / uint64(time.Microsecond)
	if us > maxUS {
		us = maxUS
	}
	return time.Duration(us) * time.Microsecond / 2
}

// Watchdog sends WATCHDOG=1 every interval until ctx ends, but only when
// alive returns true: a process whose work loop has stopped stays silent
// and the manager restarts it after WatchdogSec. It returns at once when
// the Notifier is disabled or every <= 0. alive nil means always alive.
// Run it in its own goroutine.
func (n *Notifier) Watchdog(ctx context.Context, every time.Duration, alive func() bool) {
	if !n.Enabled() || every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	healthy := true
	for {
		if alive == nil || alive() {
			if !healthy {
				n.log.Info("watchdog: alive again, pinging the service manager")
			}
			healthy = true
			if err := n.Send("WATCHDOG=1"); err != nil {
				n.log.Warn("watchdog ping", "err", err)
			}
		} else if healthy {
			healthy = false
			n.log.Error("watchdog: the scan loop is not alive, no longer pinging the service manager")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
