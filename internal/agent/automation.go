package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/alarm"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/events"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/rule"
	"github.com/pith-historian/pith/internal/schedule"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// TagAlarmsRunning is the system tag telling whether the alarm engine
// runs: 1 while it does, 0 once it failed. It exists when [alarms] is on.
const TagAlarmsRunning = "pith.sys.alarms.running"

// automation is the alarm engine, the schedules and the rules, and the
// guarded path every device write goes through ("control" is the device
// write itself, POST /api/v1/control). It is a Reloadable part: alarm
// definitions, schedules, rules and write limits reload; whether each
// engine runs, and how often, needs a restart.
type automation struct {
	cfg    *config.Config
	plant  *plant.Plant
	tab    alarm.Table // the plant's tag table but in tests
	health *health
	users  *usersPart // the audit journal; nil in tests
	log    *slog.Logger

	alarms *alarm.Engine    // nil when [alarms] is off
	sched  *schedule.Engine // nil when [schedules] is off
	rules  *rule.Engine     // nil when [rules] is off
	guard  *rule.Guard      // always: the write limits apply to API writes too
	ctl    *controlRouter   // behind the guard: Sparkplug hosts' tags, then the plant's
	stops  []func()         // in start order
	events alarmEvents      // alarm transitions into the event collector, once it runs
	share  alarmShare       // alarm transitions to the other box of a redundant pair
}

var _ Reloadable = (*automation)(nil)

func newAutomation(cfg *config.Config, p *plant.Plant, h *health, log *slog.Logger) *automation {
	return &automation{cfg: cfg, plant: p, tab: p.Table(), health: h, log: log,
		ctl: &controlRouter{next: p.Controller(), log: log.With("part", "control")}}
}

func (a *automation) Name() string { return "automation" }

// Start starts, in dependency order, the alarm engine (it reads the tag
// table), the schedules (they write their tags) and the rules (they read
// both and write through the guard). On error what started is stopped.
func (a *automation) Start(ctx context.Context) error {
	if err := a.start(ctx); err != nil {
		a.Stop()
		return err
	}
	return nil
}

func (a *automation) start(ctx context.Context) error {
	cfg, log := a.cfg, a.log
	run := func(name string, fn func(context.Context) error) {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := fn(ctx); err != nil {
				log.Error(name+" stopped", "err", err)
			}
		}()
		a.stops = append(a.stops, func() {
			t := time.Now()
			cancel()
			<-done
			log.Info("automation part stopped", "part", name, "took", time.Since(t).Round(time.Microsecond))
		})
	}
	if cfg.Alarms.Enabled {
		t := time.Now()
		var extra []alarm.Notifier
		if cfg.Events.Enabled {
			extra = append(extra, &a.events)
		}
		if a.users != nil {
			extra = append(extra, alarmAudit{a.users})
		}
		if cfg.Redundancy.Enabled() {
			extra = append(extra, &a.share)
		}
		e, stop, err := alarm.Start(ctx, cfg, a.tab, log.With("part", "alarms"), extra...)
		if err != nil {
			return fmt.Errorf("start alarms: %w", err)
		}
		a.alarms = e
		a.stops = append(a.stops, stop)
		if err := a.watchAlarms(ctx, e); err != nil {
			return err
		}
		log.Info("automation part started", "part", "alarms", "alarms", e.Stats().Alarms, "took", time.Since(t).Round(time.Microsecond))
	}
	var alarms rule.Alarms
	if a.alarms != nil {
		alarms = a.alarms
	}
	a.guard = rule.NewGuard(a.ctl, rule.Limits(cfg.Rules.Limit), alarms, nil, log.With("part", "control"))
	if a.users != nil {
		a.guard.SetRecorder(a.users.controlRecorder(a.plant.Table()))
	}
	var sched rule.Schedules
	if cfg.Schedules.Enabled {
		s, err := schedule.New(cfg.Schedules, filepath.Join(cfg.Store.Dir, "schedules"), a.plant.Table(), nil, log.With("part", "schedules"))
		if err != nil {
			return fmt.Errorf("start schedules: %w", err)
		}
		a.sched, sched = s, s
		s.Pause(cfg.Redundancy.Enabled()) // a box of a pair starts as the standby
		run("schedules", s.Run)
	}
	if cfg.Rules.Enabled {
		o := rule.Options{Scan: cfg.Rules.Scan.Std(), DryRun: cfg.Rules.DryRun}
		r, err := rule.New(cfg.Rules, a.plant.Table(), sched, a.guard, o, log.With("part", "rules"))
		if err != nil {
			return fmt.Errorf("start rules: %w", err)
		}
		a.rules = r
		r.Pause(cfg.Redundancy.Enabled())
		run("rules", r.Run)
	}
	return nil
}

// watchAlarms writes TagAlarmsRunning as 1 now, and as 0 when the engine
// fails, which also makes /-/ready answer 503 with the reason: a Pith
// whose alarms do not run must not look healthy.
func (a *automation) watchAlarms(ctx context.Context, e *alarm.Engine) error {
	id, err := a.tab.Define(tag.Def{Name: TagAlarmsRunning, Source: "pith", Unit: "bool",
		Description: "1 while the alarm engine runs, 0 once it failed"})
	if err != nil {
		return fmt.Errorf("define %s: %w", TagAlarmsRunning, err)
	}
	set := func(v float64) {
		a.tab.Update([]tag.Sample{{ID: id, T: time.Now().UnixMilli(), V: v, Q: model.QualityGood}})
	}
	set(1)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-ctx.Done():
		case <-e.Exited():
			if err := e.Err(); err != nil {
				set(0)
				a.health.fail("alarms", fmt.Errorf("alarm engine stopped: %w", err))
			}
		}
	}()
	a.stops = append(a.stops, func() { cancel(); <-done })
	return nil
}

// Stop stops the parts in reverse start order.
func (a *automation) Stop() {
	for i := len(a.stops) - 1; i >= 0; i-- {
		a.stops[i]()
	}
	a.stops = nil
}

// mount adds the endpoints of the running parts, and routes POST
// /api/v1/control through the guard.
func (a *automation) mount(mux *routeMux, db *store.DB, log *slog.Logger) {
	opts := api.DefaultOptions()
	opts.Controller, opts.Meta = a.guard, a.plant.Meta()
	mux.Handle("/api/v1/control", api.NewServer(api.WrapDB(db), opts, log).Handler())
	if a.alarms != nil {
		h := a.alarms.Handler()
		mux.Handle("/api/v1/alarms", h)
		mux.Handle("/api/v1/alarms/", h)
	} else {
		mux.Handle("/api/v1/alarms", alarm.OffHandler())
	}
	if a.sched != nil {
		h := a.sched.Handler()
		mux.Handle("/api/v1/schedules", h)
		mux.Handle("/api/v1/schedules/", h)
	}
	if a.rules != nil {
		h := a.rules.Handler()
		mux.Handle("/api/v1/rules", h)
		mux.Handle("/api/v1/rules/", h)
	}
}

// Prepare checks cfg's [alarms] definitions, [schedules] and [rules] and
// builds them, changing nothing that runs.
func (a *automation) Prepare(cfg *config.Config) (Change, error) {
	c := &automationChange{a: a, cfg: cfg, limits: rule.Limits(cfg.Rules.Limit)}
	if a.alarms != nil {
		var err error
		if c.defs, err = alarm.Defs(cfg.Alarms, stationNames(cfg)); err != nil {
			return nil, fmt.Errorf("prepare alarms: %w", err)
		}
	}
	if a.sched != nil {
		var err error
		if c.applySched, err = a.sched.PrepareReload(cfg.Schedules); err != nil {
			return nil, fmt.Errorf("prepare schedules: %w", err)
		}
	}
	if a.rules != nil {
		var err error
		if c.applyRules, err = a.rules.PrepareReload(cfg.Rules); err != nil {
			return nil, fmt.Errorf("prepare rules: %w", err)
		}
	}
	return c, nil
}

// automationChange is a prepared reload of the automation.
type automationChange struct {
	a          *automation
	cfg        *config.Config
	defs       []alarm.Def
	limits     map[string]rule.Limit
	applySched func() // nil when no schedules run
	applyRules func() // nil when no rules run
}

// Commit makes the prepared definitions the running ones: schedules
// first, then alarms, limits and rules, which read the schedules.
func (c *automationChange) Commit() {
	a := c.a
	if c.applySched != nil {
		c.applySched()
	}
	if a.alarms != nil {
		// Defs built these definitions, which Reload only checks again.
		if err := a.alarms.Reload(c.defs); err != nil {
			a.log.Error("reload alarms", "err", err)
		}
	}
	a.guard.SetLimits(c.limits)
	if c.applyRules != nil {
		c.applyRules()
	}
	a.log.Info("alarms, schedules and rules reloaded", "alarms", len(c.defs),
		"schedules", len(c.cfg.Schedules.Schedule), "rules", len(c.cfg.Rules.Rule), "limits", len(c.cfg.Rules.Limit))
}

// Abort drops the prepared definitions; nothing ran them.
func (c *automationChange) Abort() {}

func stationNames(cfg *config.Config) []string { return cfg.StationNames() }

// alarmEvents is the alarm notifier writing every transition into the
// event collector as an event named pith.alarm.<raised|cleared|
// acknowledged>, so that the alarm history is also in the events store
// (its files and uploads). The collector starts after the alarms: until
// it is bound, and after it is unbound at stop, transitions are only in
// the alarm log.
type alarmEvents struct {
	col atomic.Pointer[events.Collector]
}

var _ alarm.Notifier = (*alarmEvents)(nil)

func (a *alarmEvents) Name() string { return "events" }

// standby pauses (true) or resumes (false) the schedules and the rules,
// mutes or restores the alarm notifications, and makes the alarm engine
// follow the other box or judge again (alarm.Engine.Follow): the standby
// box of a redundant pair runs none of them.
func (a *automation) standby(s bool) {
	if a.alarms != nil {
		a.alarms.Mute(s)
		a.alarms.Follow(s)
	}
	if a.sched != nil {
		a.sched.Pause(s)
	}
	if a.rules != nil {
		a.rules.Pause(s)
	}
}

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
