package rule

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/store"
)

// Limit bounds the control writes of one tag.
type Limit struct {
	Min, Max float64 // -Inf and +Inf when unbounded
	MaxRate  float64 // largest change per second since the previous write; 0 is none
}

// Alarms is the part of the alarm engine the guard raises write alarms
// with; *alarm.Engine implements it. Set is safe for concurrent use.
type Alarms interface {
	Set(name string, active bool, message string)
}

// WriteAlarm is the name of the alarm a failed write of tag raises.
func WriteAlarm(tag string) string { return "write." + tag }

// Recorder is told of every control write before it is made (while the
// tag still holds its old value) and returns the func told how it ended
// (nil: the device acknowledged). The agent records writes in the audit
// journal with it. It must be safe for concurrent use.
type Recorder func(ctx context.Context, tag string, value float64, who string) (done func(error))

// Guard is the control path every write goes through (rules and POST
// /api/v1/control): it refuses values outside a tag's limits or changing
// faster than its rate, passes the rest to the plant's controller, and
// raises the alarm write.<tag> when a write fails (cleared by the next
// successful write of the tag). It is safe for concurrent use.
type Guard struct {
	next   api.Controller
	limits map[string]Limit
	alarms Alarms // nil: no alarms
	now    func() time.Time
	log    *slog.Logger

	mu     sync.Mutex
	last   map[string]lastWrite
	record Recorder // nil: none
}

// SetRecorder makes r the guard's recorder. Call it before writes begin.
func (g *Guard) SetRecorder(r Recorder) { g.record = r }

// SetLimits replaces the limits (on reload).
func (g *Guard) SetLimits(limits map[string]Limit) {
	g.mu.Lock()
	g.limits = limits
	g.mu.Unlock()
}

type lastWrite struct {
	v float64
	t time.Time
}

var _ api.Controller = (*Guard)(nil)

// NewGuard wraps next with limits; alarms may be nil, now nil is the
// wall clock.
func NewGuard(next api.Controller, limits map[string]Limit, alarms Alarms, now func() time.Time, log *slog.Logger) *Guard {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Guard{next: next, limits: limits, alarms: alarms, now: now, log: log, last: map[string]lastWrite{}}
}

// Limits turns the [[rules.limit]] entries into a map by tag.
func Limits(ls []config.WriteLimit) map[string]Limit {
	out := make(map[string]Limit, len(ls))
	for _, l := range ls {
		lim := Limit{Min: math.Inf(-1), Max: math.Inf(1), MaxRate: l.MaxRate}
		if l.Min != nil {
			lim.Min = *l.Min
		}
		if l.Max != nil {
			lim.Max = *l.Max
		}
		out[l.Tag] = lim
	}
	return out
}

// Control checks that whoever asked may write the tag (a person's role or
// a key, when the request carried one: api.PrincipalOf) and the write
// against the tag's limits, then writes it.
func (g *Guard) Control(ctx context.Context, name string, value float64, who string) (err error) {
	if g.record != nil {
		done := g.record(ctx, name, value, who)
		defer func() { done(err) }()
	}
	if p := api.PrincipalOf(ctx); p != nil && !p.MayWrite(name) {
		g.log.Warn("control write refused: not permitted", "who", p.Name, "role", p.Role, "tag", name, "value", value)
		return fmt.Errorf("write tag %q: %w: %s %q (%s) may not write this tag", name, api.ErrControlForbidden, p.Kind, p.Name, p.Role)
	}
	now := g.now()
	if err := g.check(name, value, now); err != nil {
		g.log.Warn("control write refused by limits", "who", who, "tag", name, "value", value, "err", err)
		g.raise(name, err)
		return err
	}
	if g.next == nil {
		err := fmt.Errorf("write tag %q: %w", name, api.ErrNoControlPath)
		return err
	}
	if err := g.next.Control(ctx, name, value, who); err != nil {
		if !errors.Is(err, store.ErrUnknownTag) {
			g.raise(name, err)
		}
		return err
	}
	g.mu.Lock()
	g.last[name] = lastWrite{v: value, t: now}
	g.mu.Unlock()
	if g.alarms != nil {
		g.alarms.Set(WriteAlarm(name), false, "")
	}
	return nil
}

func (g *Guard) raise(name string, err error) {
	if g.alarms != nil {
		g.alarms.Set(WriteAlarm(name), true, err.Error())
	}
}

// check applies the tag's limits.
func (g *Guard) check(name string, v float64, now time.Time) error {
	g.mu.Lock()
	lim, ok := g.limits[name]
	g.mu.Unlock()
	if !ok {
		return nil
	}
	if v < lim.Min || v > lim.Max {
		return fmt.Errorf("write tag %q: %w: %v outside the limits [%v, %v]", name, api.ErrControlValue, v, lim.Min, lim.Max)
	}
	if lim.MaxRate <= 0 {
		return nil
	}
	g.mu.Lock()
	prev, seen := g.last[name]
	g.mu.Unlock()
	if !seen {
		return nil
	}
	dt := now.Sub(prev.t).Seconds()
	if step := math.Abs(v - prev.v); step > lim.MaxRate*dt {
		return fmt.Errorf("write tag %q: %w: change %v in %.3gs exceeds max_rate %v/s", name, api.ErrControlValue, step, dt, lim.MaxRate)
	}
	return nil
}
