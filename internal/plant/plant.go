// Package plant assembles the acquisition side of a running Pith from its
// configuration: the tag table, the archive queue writing into the store,
// the Modbus stations and their scheduler, the Modbus servers publishing
// tags, and the control path that writes tags to their devices.
//
// Parts start in dependency order (archive queue, tag table, Modbus
// servers, stations) and stop in reverse, so that nothing produces values
// into a part that is already gone, and the archive queue is drained into
// the store last, before the caller closes the store.
package plant

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/acq"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/archive"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/process"
	"github.com/pith-historian/pith/internal/tag"
)

// Options tune a Plant. Start from DefaultOptions.
type Options struct {
	Table   tag.Options     // the current-value table
	Archive archive.Options // the queue between the table and the store
	// DrainTimeout bounds how long Stop waits for the archive queue to
	// write its backlog into the store; points still queued then are
	// counted and logged as lost.
	DrainTimeout time.Duration
	// Clock is the stations' time source; nil means the wall clock.
	Clock acq.Clock
}

// defaultDrainTimeout leaves a slow SD card time to take a full queue
// (10,000-point batches at a few thousand points per second) while still
// letting a service manager's stop timeout (90 s for systemd) win.
const defaultDrainTimeout = 60 * time.Second

// DefaultOptions returns the table's and the archive's defaults and a 60 s
// drain timeout.
func DefaultOptions() Options {
	return Options{
		Table:        tag.DefaultOptions(),
		Archive:      archive.DefaultOptions(),
		DrainTimeout: defaultDrainTimeout,
	}
}

// Plant is a running acquisition: build it with Start, end it with Stop.
// Its methods are safe for concurrent use.
type Plant struct {
	log    *slog.Logger
	opts   Options
	queue  *archive.Queue
	tab    *tag.Table
	ctl    liveController
	cancel context.CancelFunc
	ctx    context.Context // the plant's; a reload starts its acquisition under it
	stops  []stopStep      // in start order; Stop runs them backwards
	proc   *process.Engine // input chains and calculated tags; nil when none

	mu  sync.Mutex // guards acq and cfg; held for a whole reload
	acq *acquisition
	cfg *config.Config // the configuration acq runs
}

// stopStep is how one started part is stopped.
type stopStep struct {
	name string
	stop func() error
}

// Start builds and starts the plant described by cfg, archiving into db
// (a *store.DB, whose Write is atomic and durable). It returns once every
// Modbus server listens and every station is polling. On error, whatever
// was started is stopped again.
func Start(ctx context.Context, cfg *config.Config, db archive.Writer, log *slog.Logger) (*Plant, error) {
	return StartOptions(ctx, cfg, db, log, DefaultOptions())
}

// StartOptions is Start with explicit options.
func StartOptions(ctx context.Context, cfg *config.Config, db archive.Writer, log *slog.Logger, opts Options) (*Plant, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = defaultDrainTimeout
	}
	p := &Plant{log: log, opts: opts}
	ctx, p.cancel = context.WithCancel(ctx)
	if err := p.start(ctx, cfg, db); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// step runs one start step, logs how long it took and remembers its stop.
func (p *Plant) step(name string, start func() error, stop func() error) error {
	t := time.Now()
	if err := start(); err != nil {
		return err
	}
	if stop != nil {
		p.stops = append(p.stops, stopStep{name: name, stop: stop})
	}
	p.log.Info("plant part started", "part", name, "took", time.Since(t).Round(time.Microsecond))
	return nil
}

func (p *Plant) start(ctx context.Context, cfg *config.Config, db archive.Writer) error {
	err := p.step("archive queue", func() error {
		p.queue = archive.New(db, p.log.With("part", "archive"), p.opts.Archive)
		return nil
	}, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), p.opts.DrainTimeout)
		defer cancel()
		st := p.queue.Stats()
		p.log.Info("draining archive queue", "pending", st.Pending)
		return p.queue.Close(ctx)
	})
	if err != nil {
		return err
	}
	p.tab = tag.New(p.log.With("part", "tags"), p.opts.Table, p.queue)
	// Input chains and calculated tags subscribe before anything produces
	// values, and stop after the acquisition (stops run in reverse).
	if len(cfg.Input) > 0 || len(cfg.Calc) > 0 {
		var seed process.Seeder
		if l, ok := db.(process.Latester); ok {
			seed = process.SeedFrom(l)
		}
		err := p.step("process", func() error {
			var err error
			if p.proc, err = process.New(cfg.Input, cfg.Calc, p.tab, seed, p.log.With("part", "process")); err != nil {
				return err
			}
			// A box of a redundant pair starts as the standby: paused.
			p.proc.Pause(cfg.Redundancy.Enabled())
			p.proc.Start(ctx)
			return nil
		}, func() error { p.proc.Stop(); return nil })
		if err != nil {
			return err
		}
	}
	p.ctx = ctx
	a, err := prepareAcquisition(ctx, cfg, p.tab, p.opts.Clock, nil, p.log)
	if err != nil {
		return err
	}
	a.run(ctx, p.log)
	p.acq, p.cfg = a, cfg
	p.ctl.cur.Store(a.ctl)
	p.stops = append(p.stops, stopStep{name: "acquisition", stop: func() error {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.ctl.cur.Store(nil)
		if p.acq == nil {
			return nil
		}
		err := p.acq.stop(nil, p.log)
		p.acq = nil
		return err
	}})
	return nil
}

// Stop stops the parts in the reverse of their start order, logging how
// long each took; the archive queue goes last and drains its backlog into
// the store (bounded by Options.DrainTimeout). The caller closes the store
// afterwards. Stop is idempotent.
func (p *Plant) Stop() {
	p.cancel()
	var errs []error
	for i := len(p.stops) - 1; i >= 0; i-- {
		s := p.stops[i]
		t := time.Now()
		err := s.stop()
		took := time.Since(t).Round(time.Microsecond)
		if err != nil {
			p.log.Error("plant part stopped with an error", "part", s.name, "took", took, "err", err)
			errs = append(errs, err)
			continue
		}
		p.log.Info("plant part stopped", "part", s.name, "took", took)
	}
	p.stops = nil
	if err := errors.Join(errs...); err != nil {
		p.log.Error("plant stopped with errors", "err", err)
	}
}

// Table returns the tag table, for producers outside the configuration
// (ingest, the demo's simulator) and for readers of current values.
func (p *Plant) Table() *tag.Table { return p.tab }

// Process returns the engine of input chains and calculated tags, nil
// when the configuration has neither.
func (p *Plant) Process() *process.Engine { return p.proc }

// Archive returns the archive queue, for its statistics and FREEZE.
func (p *Plant) Archive() *archive.Queue { return p.queue }

// Scheduler returns the station scheduler running now, for its
// statistics; nil once the plant stopped.
func (p *Plant) Scheduler() *acq.Scheduler {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.acq == nil {
		return nil
	}
	return p.acq.sched
}

// ServerAddrs returns the bound address of every Modbus server, in
// configuration order (useful when a server listens on port 0).
func (p *Plant) ServerAddrs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.acq == nil {
		return nil
	}
	out := make([]string, len(p.acq.servers))
	for i, s := range p.acq.servers {
		out[i] = s.addr
	}
	return out
}

// Controller returns the control path for POST /api/v1/control.
func (p *Plant) Controller() api.Controller { return &p.ctl }

// Meta returns the tag metadata /api/v1/tags shows, from the tag table.
func (p *Plant) Meta() api.MetaFunc {
	return func(name string) (api.TagMeta, bool) {
		id, ok := p.tab.Lookup(name)
		if !ok {
			return api.TagMeta{}, false
		}
		d, ok := p.tab.Def(id)
		if !ok {
			return api.TagMeta{}, false
		}
		m := api.TagMeta{Unit: d.Unit, Description: d.Description, Source: d.Source, Archive: d.Archive.String(), Labels: d.Labels}
		if c := p.ctl.cur.Load(); c != nil {
			if st, ok := c.ua[name]; ok {
				m.Status, _ = st.Status(name)
			}
		}
		return m, true
	}
}
