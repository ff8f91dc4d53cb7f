package plant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/acq"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/tag"
)

// acquisition is the part of a plant a reload replaces: the stations with
// their scheduler and links, the Modbus servers and the control paths
// built from them. The tag table and the archive queue outlive it, so a
// reload keeps every current value and loses nothing already queued.
type acquisition struct {
	sched   *acq.Scheduler
	links   *acq.ModbusLinks
	servers []*publisher
	ctl     *controller
	cancel  context.CancelFunc
	stops   []stopStep // in start order
}

// startAcquisition starts the stations, servers and control paths of cfg
// on tab. On error whatever was started is stopped again.
func startAcquisition(ctx context.Context, cfg *config.Config, tab *tag.Table, clk acq.Clock, log *slog.Logger) (*acquisition, error) {
	a := &acquisition{}
	ctx, a.cancel = context.WithCancel(ctx)
	if err := a.start(ctx, cfg, tab, clk, log); err != nil {
		a.stop(log)
		return nil, err
	}
	return a, nil
}

func (a *acquisition) start(ctx context.Context, cfg *config.Config, tab *tag.Table, clk acq.Clock, log *slog.Logger) error {
	a.sched = acq.NewScheduler(tab, clk, log.With("part", "acq"))
	step := func(name string, start func() error, stop func() error) error {
		t := time.Now()
		if err := start(); err != nil {
			return err
		}
		a.stops = append(a.stops, stopStep{name: name, stop: stop})
		log.Info("plant part started", "part", name, "took", time.Since(t).Round(time.Microsecond))
		return nil
	}
	// Stations are added (their tags defined) before the servers and the
	// control path look tags up, so that those see the stations' metadata.
	err := step("modbus stations", func() error {
		var err error
		a.links, err = a.sched.AddModbus(cfg.Modbus.Clients, log.With("part", "modbus-client"))
		return err
	}, func() error { return a.links.Close() })
	if err != nil {
		return err
	}
	for i := range cfg.Modbus.Servers {
		sc := cfg.Modbus.Servers[i]
		var pub *publisher
		err := step("modbus server "+sc.Listen, func() error {
			var err error
			pub, err = startPublisher(ctx, sc, tab, log.With("part", "modbus-server", "listen", sc.Listen))
			return err
		}, func() error { return pub.stop() })
		if err != nil {
			return fmt.Errorf("start modbus.server[%d]: %w", i, err)
		}
		a.servers = append(a.servers, pub)
	}
	if a.ctl, err = newController(cfg.Modbus, tab, a.links, log.With("part", "control")); err != nil {
		return err
	}
	return step("scheduler", func() error { return a.sched.Start(ctx) },
		func() error { a.sched.Stop(); return nil })
}

// stop ends the parts in reverse start order, logging each.
func (a *acquisition) stop(log *slog.Logger) error {
	a.cancel()
	var errs []error
	for i := len(a.stops) - 1; i >= 0; i-- {
		s := a.stops[i]
		t := time.Now()
		err := s.stop()
		took := time.Since(t).Round(time.Microsecond)
		if err != nil {
			log.Error("plant part stopped with an error", "part", s.name, "took", took, "err", err)
			errs = append(errs, fmt.Errorf("stop %s: %w", s.name, err))
			continue
		}
		log.Info("plant part stopped", "part", s.name, "took", took)
	}
	a.stops = nil
	return errors.Join(errs...)
}

// liveController is the plant's api.Controller: it passes each write to
// the control paths of the acquisition running now, so that the HTTP
// routes built once keep working across reloads.
type liveController struct {
	cur atomic.Pointer[controller]
}

var _ api.Controller = (*liveController)(nil)

func (l *liveController) Control(ctx context.Context, name string, value float64, who string) error {
	c := l.cur.Load()
	if c == nil {
		return errors.New("control: acquisition is restarting; try again")
	}
	return c.Control(ctx, name, value, who)
}

// Reload replaces the stations, Modbus servers and control paths with
// those of cfg when its [modbus] section differs from the running one; it
// reports whether it did. The tag table and the archive queue stay: every
// current value and everything queued for the store is kept, and polling
// pauses only for the switch. Tags of removed stations keep their last
// value and turn bad, since nothing updates them any more. When cfg's
// acquisition cannot start (a server port taken, a serial port missing),
// the previous one is started again and the error says so.
func (p *Plant) Reload(cfg *config.Config) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.acq == nil {
		return false, errors.New("reload: plant stopped")
	}
	if reflect.DeepEqual(p.cfg.Modbus, cfg.Modbus) {
		p.cfg = cfg
		return false, nil
	}
	old := p.cfg
	p.log.Info("reloading acquisition", "stations", len(cfg.Modbus.Clients), "servers", len(cfg.Modbus.Servers))
	p.ctl.cur.Store(nil)
	if err := p.acq.stop(p.log); err != nil {
		p.log.Warn("stop previous acquisition", "err", err)
	}
	p.acq = nil
	a, err := startAcquisition(p.ctx, cfg, p.tab, p.opts.Clock, p.log)
	if err != nil {
		back, berr := startAcquisition(p.ctx, old, p.tab, p.opts.Clock, p.log)
		if berr != nil {
			return true, fmt.Errorf("reload acquisition: %w; restarting the previous one failed too: %v", err, berr)
		}
		p.acq = back
		p.ctl.cur.Store(back.ctl)
		return false, fmt.Errorf("reload acquisition: %w (previous stations restored)", err)
	}
	p.acq, p.cfg = a, cfg
	p.ctl.cur.Store(a.ctl)
	p.markRemoved(old, cfg)
	return true, nil
}

// markRemoved turns the tags of stations that old had and cfg has not
// bad, stamped now.
func (p *Plant) markRemoved(old, cfg *config.Config) {
	keep := map[string]bool{}
	for _, sc := range cfg.Modbus.Clients {
		tags, _ := sc.ExpandedTags()
		for _, t := range tags {
			keep[t.Name] = true
		}
	}
	var gone []tag.ID
	for _, sc := range old.Modbus.Clients {
		tags, _ := sc.ExpandedTags()
		for _, t := range tags {
			if keep[t.Name] {
				continue
			}
			if id, ok := p.tab.Lookup(t.Name); ok {
				gone = append(gone, id)
			}
		}
	}
	if len(gone) > 0 {
		p.tab.MarkBad(gone, time.Now().UnixMilli())
		p.log.Info("tags of removed stations marked bad", "tags", len(gone))
	}
}
