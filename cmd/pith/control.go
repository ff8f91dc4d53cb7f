package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/alarm"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/events"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/rule"
	"github.com/pith-historian/pith/internal/schedule"
	"github.com/pith-historian/pith/internal/store"
)

// controlParts are the alarm engine, the schedules and the rules, and the
// guarded control path every write goes through.
type controlParts struct {
	log    *slog.Logger
	alarms *alarm.Engine    // nil when [alarms] is off
	sched  *schedule.Engine // nil when [schedules] is off
	rules  *rule.Engine     // nil when [rules] is off
	guard  *rule.Guard      // always: the write limits apply to API writes too
	stops  []func()         // in start order
	mu     sync.Mutex       // serializes reloads
	events alarmEvents      // alarm transitions into the event collector, once it runs
}

// alarmEvents is the alarm notifier writing every transition into the
// event collector as an event named pith.alarm.<raised|cleared|
// acknowledged>, so that the alarm history is also in the events store
// (its files and uploads). The collector starts after the alarms: until
// it is bound, and after it is unbound at stop, transitions are only in
// the alarm log.
type alarmEvents struct {
	col atomic.Pointer[events.Collector]
}

func (a *alarmEvents) Name() string { return "events" }

func (a *alarmEvents) Notify(ctx context.Context, ev alarm.Event) error {
	col := a.col.Load()
	if col == nil {
		return nil
	}
	e := events.Event{
		ID: fmt.Sprintf("alarm-%d-%d", ev.T, ev.Seq), Time: ev.T, Name: "pith.alarm." + ev.Event,
		Source: events.Source{Device: "pith"},
		Str: map[string]string{"alarm": ev.Alarm, "state": ev.State, "type": ev.Kind, "severity": ev.Severity,
			"message": ev.Message},
	}
	for k, v := range map[string]string{"tag": ev.Tag, "who": ev.Who} {
		if v != "" {
			e.Str[k] = v
		}
	}
	if ev.Value != nil {
		e.Num = map[string]float64{"value": *ev.Value}
	}
	_, _, err := col.Accept(ctx, []events.Event{e}, time.Now().UnixMilli())
	return err
}

// startControl starts, in dependency order, the alarm engine (it reads
// the tag table), the schedules (they write their tags) and the rules
// (they read both and write through the guard). Stop them with stop.
func startControl(ctx context.Context, cfg *config.Config, p *plant.Plant, log *slog.Logger) (*controlParts, error) {
	c := &controlParts{log: log}
	ok := false
	defer func() {
		if !ok {
			c.stop()
		}
	}()
	run := func(name string, fn func(context.Context) error) {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := fn(ctx); err != nil {
				log.Error(name+" stopped", "err", err)
			}
		}()
		c.stops = append(c.stops, func() {
			t := time.Now()
			cancel()
			<-done
			log.Info("control part stopped", "part", name, "took", time.Since(t).Round(time.Microsecond))
		})
	}
	if cfg.Alarms.Enabled {
		t := time.Now()
		var extra []alarm.Notifier
		if cfg.Events.Enabled {
			extra = append(extra, &c.events)
		}
		e, stop, err := alarm.Start(ctx, cfg, p.Table(), log.With("part", "alarms"), extra...)
		if err != nil {
			return nil, fmt.Errorf("start alarms: %w", err)
		}
		c.alarms = e
		c.stops = append(c.stops, stop)
		log.Info("control part started", "part", "alarms", "alarms", e.Stats().Alarms, "took", time.Since(t).Round(time.Microsecond))
	}
	var alarms rule.Alarms
	if c.alarms != nil {
		alarms = c.alarms
	}
	c.guard = rule.NewGuard(p.Controller(), rule.Limits(cfg.Rules.Limit), alarms, nil, log.With("part", "control"))
	var sched rule.Schedules
	if cfg.Schedules.Enabled {
		s, err := schedule.New(cfg.Schedules, filepath.Join(cfg.Store.Dir, "schedules"), p.Table(), nil, log.With("part", "schedules"))
		if err != nil {
			return nil, fmt.Errorf("start schedules: %w", err)
		}
		c.sched, sched = s, s
		run("schedules", s.Run)
	}
	if cfg.Rules.Enabled {
		o := rule.Options{Scan: cfg.Rules.Scan.Std(), DryRun: cfg.Rules.DryRun}
		r, err := rule.New(cfg.Rules, p.Table(), sched, c.guard, o, log.With("part", "rules"))
		if err != nil {
			return nil, fmt.Errorf("start rules: %w", err)
		}
		c.rules = r
		run("rules", r.Run)
	}
	ok = true
	return c, nil
}

// stop stops the parts in reverse start order.
func (c *controlParts) stop() {
	for i := len(c.stops) - 1; i >= 0; i-- {
		c.stops[i]()
	}
	c.stops = nil
}

// mount adds the endpoints of the running parts, and routes POST
// /api/v1/control through the guard.
func (c *controlParts) mount(mux *http.ServeMux, db *store.DB, p *plant.Plant, log *slog.Logger) {
	opts := api.DefaultOptions()
	opts.Controller, opts.Meta = c.guard, p.Meta()
	mux.Handle("/api/v1/control", api.NewServer(api.WrapDB(db), opts, log).Handler())
	if c.alarms != nil {
		h := c.alarms.Handler()
		mux.Handle("/api/v1/alarms", h)
		mux.Handle("/api/v1/alarms/", h)
	} else {
		mux.Handle("/api/v1/alarms", alarm.OffHandler())
	}
	if c.sched != nil {
		h := c.sched.Handler()
		mux.Handle("/api/v1/schedules", h)
		mux.Handle("/api/v1/schedules/", h)
	}
	if c.rules != nil {
		h := c.rules.Handler()
		mux.Handle("/api/v1/rules", h)
		mux.Handle("/api/v1/rules/", h)
	}
}

// check reports whether cfg's [alarms], [schedules] and [rules] would
// load, changing nothing: the main reload checks every part before it
// applies any.
func (c *controlParts) check(cfg *config.Config) error {
	if c.alarms != nil {
		if _, err := alarm.Defs(cfg.Alarms, stationNames(cfg)); err != nil {
			return err
		}
	}
	if c.rules != nil {
		if _, err := rule.New(cfg.Rules, nil, nil, nil, rule.Options{}, nil); err != nil {
			return err
		}
	}
	if c.sched != nil {
		if _, err := schedule.NewCalendar(cfg.Schedules); err != nil {
			return err
		}
	}
	return nil
}

// apply makes cfg's [alarms] definitions, [schedules] and [rules] (with
// the write limits) the running ones; call check first. Notifier
// settings and the enabled switches need a restart.
func (c *controlParts) apply(cfg *config.Config) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var defs []alarm.Def
	if c.alarms != nil {
		var err error
		if defs, err = alarm.Defs(cfg.Alarms, stationNames(cfg)); err != nil {
			return err
		}
	}
	if c.sched != nil {
		if err := c.sched.Reload(cfg.Schedules); err != nil {
			return fmt.Errorf("reload schedules: %w", err)
		}
	}
	if c.alarms != nil {
		if err := c.alarms.Reload(defs); err != nil {
			return fmt.Errorf("reload alarms: %w", err)
		}
	}
	c.guard.SetLimits(rule.Limits(cfg.Rules.Limit))
	if c.rules != nil {
		if err := c.rules.Reload(cfg.Rules); err != nil {
			return fmt.Errorf("reload rules: %w", err)
		}
	}
	c.log.Info("alarms, schedules and rules reloaded", "alarms", len(defs),
		"schedules", len(cfg.Schedules.Schedule), "rules", len(cfg.Rules.Rule), "limits", len(cfg.Rules.Limit))
	return nil
}

func stationNames(cfg *config.Config) []string {
	out := make([]string, len(cfg.Modbus.Clients))
	for i, s := range cfg.Modbus.Clients {
		out[i] = s.Name
	}
	return out
}

// wrapWriter lets the alarm engine see the points the push inputs write
// (they reach the store without the tag table). Imports are backfill and
// are not watched.
func (c *controlParts) wrapWriter(w writer) writer {
	if c.alarms == nil {
		return w
	}
	return alarmWriter{writer: w, alarms: c.alarms}
}

// alarmWriter passes written points to the alarm engine.
type alarmWriter struct {
	writer
	alarms *alarm.Engine
}

// Write stores pts, then lets the alarms judge them.
func (a alarmWriter) Write(ctx context.Context, pts []model.Point) error {
	if err := a.writer.Write(ctx, pts); err != nil {
		return err
	}
	a.alarms.ObservePoints(pts)
	return nil
}
