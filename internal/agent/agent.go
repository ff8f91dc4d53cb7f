// Package agent assembles a running Pith from its configuration. It owns
// the parts (store, plant, automation, forwarders, central consumer,
// inputs, events, diagnostics, HTTP), starts them in dependency order,
// stops them in reverse (logging how long each took), and applies a
// config reload to every reloadable part or to none.
//
// Every part implements Part. A part whose settings a reload changes
// also implements Reloadable: a reload first reads and validates the new
// config, then Prepares every reloadable part, each building and checking
// its new pieces next to the running ones without letting users see them
// (new stations do not poll, new keys are not accepted, new forwarders are
// opened but not fed). Only when every Prepare succeeded is every Change
// committed; when one fails, the prepared ones are aborted and the running
// parts keep running unchanged. Commit cannot fail, so a reload is all or
// nothing by construction. README.md ("Use") and docs/install.md say
// what a reload applies.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/plant"
)

// Part is one piece of a running Pith.
//
// The agent calls Start once, after the parts it depends on started, and
// Stop once, after every part started later stopped, and only when Start
// succeeded. Neither is called concurrently with the other or with a
// reload.
type Part interface {
	// Name names the part in logs.
	Name() string
	// Start starts the part; ctx ends when the agent stops. On error,
	// Start releases what it started itself.
	Start(ctx context.Context) error
	// Stop stops the part and waits until it is stopped.
	Stop()
}

// Reloadable is a Part that a config reload changes.
type Reloadable interface {
	Part
	// Prepare builds and checks what cfg changes in the part, without any
	// effect users can see, and returns it as a Change; on error nothing
	// changed. The agent calls it only between Start and Stop, and for
	// one reload at a time.
	Prepare(cfg *config.Config) (Change, error)
}

// Change is one part's prepared reload. The agent calls exactly one of
// its methods, once.
type Change interface {
	// Commit makes the prepared change the running one. It cannot fail:
	// every check was done by Prepare.
	Commit()
	// Abort releases what Prepare built; the part runs as before.
	Abort()
}

// Options describe the Pith to run.
type Options struct {
	// Config is the validated configuration to run.
	Config *config.Config
	// Load reads the config file again for a reload; nil when there is
	// no file (the demo, tests), which makes a reload refused.
	Load func() (*config.Config, error)
	// Logger receives every part's logs; nil discards them.
	Logger *slog.Logger
	// Ready, when set, is told the HTTP address and the plant once every
	// part started.
	Ready func(addr string, p *plant.Plant)
}

// Agent is a running Pith. Build it with New, then Start and Stop it, or
// let Run do both.
type Agent struct {
	opts   Options
	log    *slog.Logger
	health *health

	started    []Part       // in start order
	reloadable []Reloadable // in start order
	http       *httpPart

	reloadMu sync.Mutex     // one reload at a time
	cur      *config.Config // the config in force; guarded by reloadMu
	stopping bool           // Stop began; guarded by reloadMu
	active   bool           // this box of a redundant pair is the active one; guarded by reloadMu
	late     bool           // and polls half a period late (roleConfig); guarded by reloadMu
	red      *redundancyPart
	sp       *sparkplugPart // set by start; guarded by reloadMu
}

// New returns an agent for opts; nothing runs until Start.
func New(opts Options) *Agent {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Agent{opts: opts, log: opts.Logger, health: &health{}, cur: opts.Config}
}

// Run starts a Pith, serves until ctx ends or the HTTP server fails,
// then stops every part in reverse order. It returns the HTTP server's
// error, or why a part could not start.
func Run(ctx context.Context, opts Options) error {
	a := New(opts)
	if err := a.Start(ctx); err != nil {
		return err
	}
	err := a.Wait(ctx)
	a.Stop()
	return err
}

// Start starts every part in dependency order: keys (they refuse an
// exposed listener without keys before anything opens), store, plant,
// automation, forwarders, central consumer, inputs, diagnostics, events,
// HTTP, the SIGHUP reload and the service manager's notifications. On
// error the parts already started are stopped again.
func (a *Agent) Start(ctx context.Context) error {
	// A reload, or a redundant pair's role change (setRole, from the
	// redundancy part's goroutine, which may decide before the parts
	// after it have started), walks the parts that start adds: it waits
	// until every part has started.
	a.reloadMu.Lock()
	err := a.start(ctx)
	a.reloadMu.Unlock()
	if err != nil {
		a.Stop()
		return err
	}
	if a.opts.Ready != nil {
		a.opts.Ready(a.http.addr, a.http.plant.p)
	}
	return nil
}

func (a *Agent) start(ctx context.Context) error {
	cfg, log := a.opts.Config, a.log
	us := &usersPart{cfg: cfg, log: log}
	if err := a.add(ctx, us); err != nil {
		return err
	}
	keys := &keysPart{cfg: cfg, users: us, log: log}
	if err := a.add(ctx, keys); err != nil {
		return err
	}
	st := &storePart{cfg: cfg.Store, log: log}
	if err := a.add(ctx, st); err != nil {
		return err
	}
	// A box of a redundant pair starts as the standby (see redundancy.go).
	pl := &plantPart{cfg: roleConfig(cfg, false, false), db: st.db, log: log}
	if err := a.add(ctx, pl); err != nil {
		return err
	}
	au := newAutomation(cfg, pl.p, a.health, log)
	au.users = us
	if err := a.add(ctx, au); err != nil {
		return err
	}
	fw := newForwarders(cfg, st.db, pl.p.Table(), log)
	if err := a.add(ctx, fw); err != nil {
		return err
	}
	reports := &reportsPart{cfg: cfg, db: st.db, plant: pl.p, log: log}
	if cfg.Redundancy.Enabled() {
		reports.pause(true) // a box of a pair starts as the standby
		a.red = &redundancyPart{agent: a, cfg: cfg, db: st.db, tab: pl.p.Table(), ctl: au.ctl, au: au, reports: reports, log: log}
		if err := a.add(ctx, a.red); err != nil {
			return err
		}
	}
	if cfg.Central.NATS != "" {
		if err := a.add(ctx, &centralPart{cfg: cfg.Central, db: st.db, log: log, name: cfg.Site.Name, dataDir: cfg.Store.Dir}); err != nil {
			return err
		}
	}
	if err := a.add(ctx, reports); err != nil {
		return err
	}
	in := &inputs{cfg: cfg, db: st.db, fw: fw, plant: pl.p, alarms: au, log: log}
	if a.red != nil {
		// Its MQTT subscriber runs on the active box only.
		in.leased = a.red.el.Active
		a.red.inputs.Store(in)
	}
	if err := a.add(ctx, in); err != nil {
		return err
	}
	a.sp = &sparkplugPart{in: in, au: au, log: log}
	if err := a.add(ctx, a.sp); err != nil {
		return err
	}
	// One memory budget for every body and answer in flight: the HTTP
	// server spends it, diagnostics report it.
	budget := api.NewBudget(cfg.HTTP.MaxInflightBytes)
	budget.KeepForSmall(budget.Max()/smallReserveShare, smallRequest)
	if err := a.add(ctx, newMemoryLimitPart(budget.Max(), budget.TakePeak, log)); err != nil {
		return err
	}
	dg := &diagPart{db: st.db, plant: pl.p, budget: budget, log: log}
	if err := a.add(ctx, dg); err != nil {
		return err
	}
	var ev *eventsPart
	if cfg.Events.Enabled {
		ev = &eventsPart{cfg: cfg, plant: pl.p, alarms: &au.events, audit: &us.events, log: log}
		if err := a.add(ctx, ev); err != nil {
			return err
		}
	}
	a.http = &httpPart{cfg: cfg, agent: a, users: us, keys: keys, store: st, plant: pl, automation: au, inputs: in,
		diag: dg, events: ev, budget: budget, log: log}
	if err := a.add(ctx, a.http); err != nil {
		return err
	}
	if err := a.add(ctx, &sighupPart{agent: a}); err != nil {
		return err
	}
	return a.add(ctx, &notifyPart{addr: a.http.addr, plant: pl.p, log: log})
}

// add starts p, logging how long it took, and remembers it for Stop and,
// when it is Reloadable, for reloads.
func (a *Agent) add(ctx context.Context, p Part) error {
	t := time.Now()
	if err := p.Start(ctx); err != nil {
		return fmt.Errorf("start %s: %w", p.Name(), err)
	}
	a.started = append(a.started, p)
	if r, ok := p.(Reloadable); ok {
		a.reloadable = append(a.reloadable, r)
	}
	a.log.Info("part started", "part", p.Name(), "took", time.Since(t).Round(time.Microsecond))
	return nil
}

// Wait returns when ctx ends (nil) or when the HTTP server failed (its
// error).
func (a *Agent) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.http.failed:
		return a.http.err
	}
}

// Stop stops the started parts in reverse start order, logging how long
// each took: the archive queue drains into an open store, which closes
// last. It waits for a reload in progress.
func (a *Agent) Stop() {
	a.reloadMu.Lock()
	a.stopping = true // later reloads are refused
	a.reloadMu.Unlock()
	for i := len(a.started) - 1; i >= 0; i-- {
		p := a.started[i]
		t := time.Now()
		p.Stop()
		a.log.Info("part stopped", "part", p.Name(), "took", time.Since(t).Round(time.Microsecond))
	}
	a.started, a.reloadable = nil, nil
}

// health collects the failures of parts that run on after starting (an
// alarm engine that stopped); /-/ready answers 503 with them.
type health struct {
	mu     sync.Mutex
	failed map[string]error // part -> why
}

// fail records that part stopped working.
func (h *health) fail(part string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failed == nil {
		h.failed = map[string]error{}
	}
	h.failed[part] = err
}

// err returns every recorded failure, nil when none.
func (h *health) err() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, err := range h.failed {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// NewLogger returns the text logger `pith serve` writes to stderr at the
// given level ("debug", "info", "warn", "error"; info when unknown).
func NewLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}
