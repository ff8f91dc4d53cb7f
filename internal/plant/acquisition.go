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
	"github.com/pith-historian/pith/internal/acq/opcua"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/tag"
)

// acquisition is the part of a plant a reload replaces: the stations with
// their scheduler and links, the Modbus servers and the control paths
// built from them. The tag table and the archive queue outlive it, so a
// reload keeps every current value and loses nothing already queued.
//
// An acquisition is built in two steps, so that a reload never stops the
// running one before its successor is ready: prepareAcquisition builds
// everything that can fail (stations added to a scheduler that does not
// poll yet, links, servers bound or given their predecessor's port but
// not answering, control paths), and run makes it live.
type acquisition struct {
	cfg     config.Modbus
	uacfg   config.OPCUA
	sched   *acq.Scheduler
	links   *acq.ModbusLinks
	ua      []*opcua.Station // OPC UA stations, pushed to rather than polled
	servers []*publisher
	ctl     *controller
	running bool
}

// prepareAcquisition builds the acquisition of cfg on tab next to prev,
// the running one (nil at the first start): a server of prev whose
// settings are unchanged is kept as it is, one whose listen address is
// unchanged takes over its bound port. Nothing of it polls or answers
// until run; on error whatever it built is released and prev is
// untouched.
func prepareAcquisition(ctx context.Context, cfg *config.Config, tab *tag.Table, clk acq.Clock, prev *acquisition, log *slog.Logger) (*acquisition, error) {
	a := &acquisition{cfg: cfg.Modbus, uacfg: cfg.OPCUA}
	if err := a.prepare(ctx, cfg, tab, clk, prev, log); err != nil {
		a.release(prev, log)
		return nil, err
	}
	return a, nil
}

func (a *acquisition) prepare(ctx context.Context, cfg *config.Config, tab *tag.Table, clk acq.Clock, prev *acquisition, log *slog.Logger) error {
	t := time.Now()
	a.sched = acq.NewScheduler(tab, clk, log.With("part", "acq"))
	// Stations are added (their tags defined) before the servers and the
	// control path look tags up, so that those see the stations' metadata.
	var err error
	if a.links, err = a.sched.AddModbus(cfg.Modbus.Clients, log.With("part", "modbus-client")); err != nil {
		return err
	}
	log.Info("plant part prepared", "part", "modbus stations", "stations", len(cfg.Modbus.Clients), "took", time.Since(t).Round(time.Microsecond))
	if len(cfg.OPCUA.Clients) > 0 {
		t = time.Now()
		for _, sc := range cfg.OPCUA.Clients {
			st, err := opcua.NewStation(sc, tab, log.With("part", "opcua-client"))
			if err != nil {
				return err
			}
			a.ua = append(a.ua, st)
		}
		log.Info("plant part prepared", "part", "opcua stations", "stations", len(a.ua), "took", time.Since(t).Round(time.Microsecond))
	}
	for i, sc := range cfg.Modbus.Servers {
		if old := prev.server(sc.Listen); old != nil && reflect.DeepEqual(old.cfg, sc) {
			a.servers = append(a.servers, old) // unchanged: keeps running as it is
			continue
		}
		var inherit *port
		if old := prev.server(sc.Listen); old != nil {
			inherit = old.port
		}
		t := time.Now()
		pub, err := newPublisher(ctx, sc, tab, inherit, log.With("part", "modbus-server", "listen", sc.Listen))
		if err != nil {
			return fmt.Errorf("start modbus.server[%d]: %w", i, err)
		}
		a.servers = append(a.servers, pub)
		log.Info("plant part prepared", "part", "modbus server "+sc.Listen, "took", time.Since(t).Round(time.Microsecond))
	}
	if a.ctl, err = newController(cfg.Modbus, tab, a.links, a.ua, log.With("part", "control")); err != nil {
		return err
	}
	return nil
}

// server returns a's publisher listening on listen, nil when none (or a
// is nil).
func (a *acquisition) server(listen string) *publisher {
	if a == nil {
		return nil
	}
	for _, s := range a.servers {
		if s.cfg.Listen == listen {
			return s
		}
	}
	return nil
}

// owns reports whether pub is a server of a.
func (a *acquisition) owns(pub *publisher) bool {
	return a != nil && a.server(pub.cfg.Listen) == pub
}

// run makes a prepared acquisition live: its new servers answer, its
// stations poll. The acquisition it was prepared next to must be stopped.
func (a *acquisition) run(ctx context.Context, log *slog.Logger) {
	for _, s := range a.servers {
		if s.served == nil {
			s.serve()
		}
	}
	t := time.Now()
	if err := a.sched.Start(ctx); err != nil {
		// Only a second Start fails, and run is called once.
		log.Error("start scheduler", "err", err)
	}
	log.Info("plant part started", "part", "scheduler", "took", time.Since(t).Round(time.Microsecond))
	for _, st := range a.ua {
		st.Start(ctx)
	}
	a.running = true
}

// release undoes prepareAcquisition for an acquisition that never ran:
// its own servers close (ports taken over stay with prev) and its links
// close; prev's kept servers are not touched.
func (a *acquisition) release(prev *acquisition, log *slog.Logger) {
	for _, s := range a.servers {
		if prev.owns(s) {
			continue
		}
		if err := s.stop(false); err != nil {
			log.Warn("release modbus server", "listen", s.cfg.Listen, "err", err)
		}
	}
	if a.links != nil {
		if err := a.links.Close(); err != nil {
			log.Warn("release modbus links", "err", err)
		}
	}
}

// stop ends the parts in reverse start order, logging each: the
// scheduler, the servers, then the links. Servers next keeps are left
// running, and the ports of those next takes over stay bound (next is nil
// at the plant's stop).
func (a *acquisition) stop(next *acquisition, log *slog.Logger) error {
	var errs []error
	step := func(name string, stop func() error) {
		t := time.Now()
		err := stop()
		took := time.Since(t).Round(time.Microsecond)
		if err != nil {
			log.Error("plant part stopped with an error", "part", name, "took", took, "err", err)
			errs = append(errs, fmt.Errorf("stop %s: %w", name, err))
			return
		}
		log.Info("plant part stopped", "part", name, "took", took)
	}
	if a.running {
		for i := len(a.ua) - 1; i >= 0; i-- {
			st := a.ua[i]
			step("opcua station "+st.Name(), func() error { st.Stop(); return nil })
		}
		step("scheduler", func() error { a.sched.Stop(); return nil })
	}
	for i := len(a.servers) - 1; i >= 0; i-- {
		s := a.servers[i]
		if next.owns(s) {
			continue
		}
		handOver := next.server(s.cfg.Listen) != nil
		step("modbus server "+s.cfg.Listen, func() error { return s.stop(handOver) })
	}
	step("modbus stations", a.links.Close)
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

// Reload applies cfg at once: Prepare, then Commit. It reports whether
// the acquisition restarted.
func (p *Plant) Reload(cfg *config.Config) (bool, error) {
	ch, err := p.Prepare(cfg)
	if err != nil {
		return false, err
	}
	ch.Commit()
	return ch.Restarts(), nil
}

// Change is a prepared reload of the plant: Commit makes it the running
// acquisition, Abort drops it. Exactly one of them must be called.
type Change struct {
	p    *Plant
	cfg  *config.Config
	next *acquisition // nil when [modbus] is unchanged
	done bool
	keep bool // leave the tags of removed stations as they are
}

// KeepValues makes Commit leave the tags of removed stations as they are
// instead of turning them bad: the standby of a redundant pair, whose
// stations are removed, shows the values it mirrors.
func (c *Change) KeepValues() { c.keep = true }

// Prepare builds the stations, Modbus servers and control paths of cfg
// next to the running ones when its [modbus] section differs, without
// letting any of them poll or answer: a server whose listen address is
// unchanged will take over its predecessor's port at Commit, one whose
// settings are unchanged keeps running. When something cannot be built (a
// server port taken, a bad station) it returns the error and the running
// acquisition is untouched. Reloads must not overlap: call Commit or
// Abort before the next Prepare.
func (p *Plant) Prepare(cfg *config.Config) (*Change, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.acq == nil {
		return nil, errors.New("prepare reload: plant stopped")
	}
	ch := &Change{p: p, cfg: cfg}
	if reflect.DeepEqual(p.cfg.Modbus, cfg.Modbus) && reflect.DeepEqual(p.cfg.OPCUA, cfg.OPCUA) {
		return ch, nil
	}
	p.log.Info("preparing acquisition", "stations", len(cfg.Modbus.Clients), "opcua_stations", len(cfg.OPCUA.Clients), "servers", len(cfg.Modbus.Servers))
	next, err := prepareAcquisition(p.ctx, cfg, p.tab, p.opts.Clock, p.acq, p.log)
	if err != nil {
		return nil, fmt.Errorf("prepare acquisition: %w", err)
	}
	ch.next = next
	return ch, nil
}

// Restarts reports whether Commit restarts the acquisition.
func (c *Change) Restarts() bool { return c.next != nil }

// Commit stops the running stations and the servers cfg changed, then
// starts the prepared ones: polling pauses only for the switch, and the
// tag table and the archive queue stay, so every current value and
// everything queued for the store is kept. Tags of removed stations keep
// their last value and turn bad, since nothing updates them any more.
// Commit cannot fail; on a plant stopped since Prepare it aborts.
func (c *Change) Commit() {
	if c.done {
		return
	}
	c.done = true
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.acq == nil {
		if c.next != nil {
			c.next.release(nil, p.log)
		}
		return
	}
	old := p.cfg
	if c.next != nil {
		p.ctl.cur.Store(nil)
		if err := p.acq.stop(c.next, p.log); err != nil {
			p.log.Warn("stop previous acquisition", "err", err)
		}
		c.next.run(p.ctx, p.log)
		p.acq = c.next
		p.ctl.cur.Store(c.next.ctl)
		if !c.keep {
			p.markRemoved(old, c.cfg)
		}
	}
	p.cfg = c.cfg
}

// Abort drops what Prepare built; the running acquisition is untouched.
func (c *Change) Abort() {
	if c.done {
		return
	}
	c.done = true
	if c.next == nil {
		return
	}
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.next.release(c.p.acq, c.p.log)
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
	for _, sc := range cfg.OPCUA.Clients {
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
	for _, sc := range old.OPCUA.Clients {
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
