package agent

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/sdnotify"
)

// minStale is the shortest silence of the scan loop's heartbeat (which
// beats every second) that counts as a hang, whatever WatchdogSec says.
const minStale = 3 * time.Second

// notifyReady speaks to systemd when it started Pith as a Type=notify
// service ($NOTIFY_SOCKET set; otherwise it does nothing): READY=1 now
// (the store is open and the HTTP listener bound), WATCHDOG=1 at half of
// WatchdogSec while the plant's scan loop is alive, and STOPPING=1 as soon
// as ctx ends, before the drain. The returned func, called at the stop,
// stops the watchdog and waits until STOPPING=1 went out.
func notifyReady(ctx context.Context, addr string, p *plant.Plant, log *slog.Logger) func() {
	n, err := sdnotify.FromEnv(os.Getenv, log)
	if err != nil {
		log.Warn("service manager notifications off", "err", err)
	}
	if !n.Enabled() {
		return func() {}
	}
	if err := n.Ready("serving on " + addr); err != nil {
		log.Warn("tell systemd ready", "err", err)
	}
	every := sdnotify.WatchdogInterval(os.Getenv, os.Getpid())
	stale := max(every, minStale)
	alive := func() bool {
		s := p.Scheduler()
		if s == nil {
			return false // the plant stopped
		}
		hb := s.Heartbeat()
		return !hb.IsZero() && time.Since(hb) < stale
	}
	wctx, stopWatchdog := context.WithCancel(ctx)
	watchdogDone := make(chan struct{})
	go func() {
		defer close(watchdogDone)
		n.Watchdog(wctx, every, alive)
	}()
	if every > 0 {
		log.Info("systemd watchdog on", "ping_every", every)
	}
	stopped := make(chan struct{})
	stopNotify := context.AfterFunc(ctx, func() {
		defer close(stopped)
		if err := n.Stopping("stopping: draining the archive queue"); err != nil {
			log.Warn("tell systemd stopping", "err", err)
		}
	})
	return func() {
		stopWatchdog()
		<-watchdogDone
		if stopNotify() {
			// The agent stops on an error, not a stop signal: the process
			// exit tells systemd.
			return
		}
		<-stopped
	}
}
