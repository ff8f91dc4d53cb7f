package alarm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/clock"
	"github.com/pith-historian/pith/internal/tag"
)

// Clock tells the engine the time; tests pass a fake one.
type Clock = clock.Clock

// Table is the part of the tag table the engine reads; *tag.Table
// implements it. All methods are safe for concurrent use.
type Table interface {
	Subscribe(opts tag.SubOptions) *tag.Subscription
	Unsubscribe(s *tag.Subscription)
	Lookup(name string) (tag.ID, bool)
	Get(id tag.ID) (tag.Value, bool)
	Define(d tag.Def) (tag.ID, error)
	Update(batch []tag.Sample) int
}

var _ Table = (*tag.Table)(nil)

// The engine's own tags, written when their value changes.
const (
	TagActive  = "pith.alarms.active"  // alarms active now
	TagUnacked = "pith.alarms.unacked" // alarms not acknowledged
)

// Notifier delivers alarm events somewhere (a webhook, an MQTT broker).
// Each notifier is called from one goroutine of its own, in event order;
// Notify may retry and block until ctx ends.
type Notifier interface {
	Name() string
	Notify(ctx context.Context, ev Event) error
}

// Options tune an Engine. Start from DefaultOptions.
type Options struct {
	// Scan is the longest time between two checks of delays and stale
	// values; a delay's expiry wakes the engine on time regardless.
	Scan time.Duration
	// Clock is the time source; nil is the wall clock.
	Clock Clock
	// Notifiers receive every event after it is logged.
	Notifiers []Notifier
	// NotifyQueue bounds the events waiting for one notifier; beyond it
	// events are dropped for that notifier (they stay in the log) and
	// counted.
	NotifyQueue int
	// SubscriberQueue bounds the tag changes waiting for the engine.
	SubscriberQueue int
}

// Default option values.
const (
	defaultScan        = 100 * time.Millisecond
	defaultNotifyQueue = 1024    // events per notifier
	defaultSubQueue    = 1 << 16 // tag changes
	// notifyGrace is how long notifiers may keep delivering queued events
	// after the engine stops.
	notifyGrace = 2 * time.Second
)

// DefaultOptions returns a 100 ms scan and the default queue bounds.
func DefaultOptions() Options {
	return Options{Scan: defaultScan, NotifyQueue: defaultNotifyQueue, SubscriberQueue: defaultSubQueue}
}

// Errors of Ack.
var (
	ErrUnknownAlarm = errors.New("unknown alarm")
	ErrNothingToAck = errors.New("nothing to acknowledge")
)

// Stats are the engine's counters.
type Stats struct {
	Alarms      int    // defined alarms
	Active      int    // active now
	Unacked     int    // active or cleared, not acknowledged
	Events      uint64 // transitions logged
	LogErrors   uint64 // events the log could not write
	NotifyDrops uint64 // events dropped by full notifier queues
	NotifyFails uint64 // events a notifier gave up on
	Overflow    uint64 // tag changes lost by the subscription
}

// Status is one alarm as GET /api/v1/alarms shows it.
type Status struct {
	Name     string   `json:"id"`
	Kind     string   `json:"type"`
	Tag      string   `json:"tag,omitempty"`
	State    string   `json:"state"`
	Severity string   `json:"severity"`
	Message  string   `json:"message"`
	Value    *float64 `json:"value,omitempty"`   // the tag's current value, when known
	Raised   int64    `json:"raised,omitempty"`  // ms of the last raise
	Cleared  int64    `json:"cleared,omitempty"` // ms of the last clear
	Acked    int64    `json:"acked,omitempty"`   // ms of the last acknowledgement
	AckedBy  string   `json:"acked_by,omitempty"`
}

// Engine evaluates alarms. Its methods are safe for concurrent use; Run
// is called once.
type Engine struct {
	log  *slog.Logger
	opts Options
	tab  Table
	hist *Log

	mu      sync.Mutex
	alarms  []*alarm
	byName  map[string]*alarm
	byTag   map[string][]*alarm
	seq     uint64
	start   time.Time
	queues  []*notifyQueue
	pending []Event // emitted under mu, sent to queues after

	events, logErrors, overflow atomic.Uint64
	muted                       atomic.Bool                 // see Mute
	following                   atomic.Bool                 // see Follow
	delivered                   atomic.Pointer[func(Event)] // see OnDelivered

	exited  chan struct{}         // closed when the Run that Start began returned
	exitErr atomic.Pointer[error] // what that Run returned, once exited is closed
}

type alarm struct {
	def      Def
	d        delayed
	acked    bool
	id       tag.ID
	resolved bool
	has      bool // a value was seen
	v        float64
	q        model.Quality
	t        int64 // ms of the newest sample seen
	raised   int64
	cleared  int64
	ackedAt  int64
	ackedBy  string
}

// New returns an engine for defs, logging to hist (nil for none) and
// reading tab. The log is replayed so that alarms active or unacknowledged
// before a restart are again.
func New(defs []Def, hist *Log, tab Table, opts Options, log *slog.Logger) (*Engine, error) {
	def := DefaultOptions()
	if opts.Scan <= 0 {
		opts.Scan = def.Scan
	}
	if opts.NotifyQueue <= 0 {
		opts.NotifyQueue = def.NotifyQueue
	}
	if opts.SubscriberQueue <= 0 {
		opts.SubscriberQueue = def.SubscriberQueue
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{log: log, opts: opts, tab: tab, hist: hist, byName: map[string]*alarm{},
		byTag: map[string][]*alarm{}, start: opts.Clock.Now(), exited: make(chan struct{})}
	for _, d := range defs {
		if d.Name == "" {
			return nil, errors.New("define alarm: empty name")
		}
		if _, dup := e.byName[d.Name]; dup {
			return nil, fmt.Errorf("define alarm %q: duplicate name", d.Name)
		}
		if d.Kind == 0 || d.Kind > KindExternal {
			return nil, fmt.Errorf("define alarm %q: no type", d.Name)
		}
		if d.Kind != KindExternal && d.Tag == "" {
			return nil, fmt.Errorf("define alarm %q: no tag", d.Name)
		}
		e.add(d)
	}
	for _, n := range opts.Notifiers {
		_, always := n.(Unmuted)
		q := &notifyQueue{n: n, always: always}
		if _, inline := n.(Inline); !inline {
			q.ch = make(chan queued, opts.NotifyQueue)
		}
		e.queues = append(e.queues, q)
	}
	if hist != nil {
		if err := e.replay(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Reload replaces the alarm definitions. An alarm whose name, type and
// tag are unchanged keeps its state (active, acknowledged, pending delay,
// last value); a changed or new one starts normal; a removed one is
// dropped (its history stays in the log). External alarms are kept.
func (e *Engine) Reload(defs []Def) error {
	seen := map[string]bool{}
	for _, d := range defs {
		if d.Name == "" || seen[d.Name] {
			return fmt.Errorf("reload alarms: empty or duplicate name %q", d.Name)
		}
		if d.Kind == 0 || d.Kind >= KindExternal || d.Tag == "" {
			return fmt.Errorf("reload alarms: alarm %q: no type or tag", d.Name)
		}
		seen[d.Name] = true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.byName
	e.alarms, e.byName, e.byTag = nil, map[string]*alarm{}, map[string][]*alarm{}
	for _, d := range defs {
		a := e.add(d)
		if o, ok := old[d.Name]; ok && o.def.Kind == a.def.Kind && o.def.Tag == a.def.Tag {
			def := a.def
			*a = *o
			a.def = def
		}
	}
	for name, o := range old {
		if o.def.Kind == KindExternal && !seen[name] {
			e.alarms = append(e.alarms, o)
			e.byName[name] = o
		}
	}
	return nil
}

func (e *Engine) add(d Def) *alarm {
	if d.Severity == "" {
		d.Severity = "warning"
	}
	a := &alarm{def: d, acked: true}
	e.alarms = append(e.alarms, a)
	e.byName[d.Name] = a
	if d.Tag != "" {
		e.byTag[d.Tag] = append(e.byTag[d.Tag], a)
	}
	return a
}

// replay restores states and the sequence number from the log.
func (e *Engine) replay() error {
	skipped, err := e.hist.Read(math.MinInt64, math.MaxInt64, func(ev Event) {
		e.seq = max(e.seq, ev.Seq)
		a, ok := e.byName[ev.Alarm]
		if !ok {
			if ev.Kind != KindExternal.String() {
				return // an alarm no longer configured
			}
			a = e.add(Def{Name: ev.Alarm, Kind: KindExternal, Tag: ev.Tag, Severity: ev.Severity, Message: ev.Message})
		}
		st, _ := parseState(ev.State)
		a.d.active = st == StateActive || st == StateAcknowledged
		a.acked = st == StateAcknowledged || st == StateNormal
		switch ev.Event {
		case EventRaised:
			a.raised = ev.T
		case EventCleared:
			a.cleared = ev.T
		case EventAcknowledged:
			a.ackedAt, a.ackedBy = ev.T, ev.Who
		}
		if a.def.Kind == KindExternal && ev.Message != "" {
			a.def.Message = ev.Message
		}
	})
	if err != nil {
		return fmt.Errorf("replay alarm log: %w", err)
	}
	if skipped > 0 {
		e.log.Warn("alarm log lines skipped", "lines", skipped)
	}
	return nil
}

// Unmuted marks a notifier that Mute does not silence: one that keeps a
// redundant pair's two boxes in step rather than telling the outside.
type Unmuted interface{ Unmuted() }

// Inline marks a notifier called in the goroutine that caused the event,
// before Ack (or the evaluation) returns, rather than from a queue of its
// own: one that must hold the event by the time the request behind it is
// answered, such as the audit journal. Notify must be quick and must not
// call back into the engine; an inline notifier is never dropped.
type Inline interface{ Inline() }

// Mute silences (true) or restores (false) the notifiers but the Unmuted
// ones. A muted engine still evaluates, logs and serves its alarms, so
// that their state (active, acknowledged) is current when it is restored:
// the standby box of a redundant pair runs muted, and the events raised
// while muted are not sent later.
func (e *Engine) Mute(m bool) { e.muted.Store(m) }

// Exited returns a channel closed when the engine that Start runs has
// stopped: at its stop, or because Run failed (see Err).
func (e *Engine) Exited() <-chan struct{} { return e.exited }

// Err returns the error the Run begun by Start failed with, nil while it
// runs or after a normal stop.
func (e *Engine) Err() error {
	if p := e.exitErr.Load(); p != nil {
		return *p
	}
	return nil
}

// exit records how the Run begun by Start ended.
func (e *Engine) exit(err error) {
	e.exitErr.Store(&err)
	close(e.exited)
}

// Run follows the table and checks delays until ctx ends. Notifiers get
// a short grace to deliver what is queued.
func (e *Engine) Run(ctx context.Context) error {
	nctx, ncancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, q := range e.queues {
		wg.Add(1)
		go func() { defer wg.Done(); q.run(nctx, e.log) }()
	}
	defer func() {
		for _, q := range e.queues {
			q.close()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(notifyGrace):
		}
		ncancel()
		wg.Wait()
	}()

	sub := e.tab.Subscribe(tag.SubOptions{Name: "alarms", Mode: tag.Queue, MaxPending: e.opts.SubscriberQueue})
	defer e.tab.Unsubscribe(sub)
	counts, err := e.countTags()
	if err != nil {
		return err
	}
	lastActive, lastUnacked := -1, -1
	var lastOverflow uint64
	timer := time.NewTimer(e.opts.Scan)
	defer timer.Stop()
	var buf []tag.Change
	for {
		now := e.opts.Clock.Now()
		next := e.Tick(now)
		wait := e.opts.Scan
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(now), 0))
		}
		if st := e.Stats(); st.Active != lastActive || st.Unacked != lastUnacked {
			lastActive, lastUnacked = st.Active, st.Unacked
			ms := e.opts.Clock.Now().UnixMilli()
			e.tab.Update([]tag.Sample{{ID: counts[0], T: ms, V: float64(st.Active)}, {ID: counts[1], T: ms, V: float64(st.Unacked)}})
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-sub.Ready():
			buf = sub.Take(buf[:0])
			e.Observe(buf, e.opts.Clock.Now())
			if st := sub.Stats(); st.Overflow != lastOverflow {
				e.overflow.Add(st.Overflow - lastOverflow)
				e.log.Warn("alarm engine fell behind: tag changes lost", "lost", st.Overflow-lastOverflow)
				lastOverflow = st.Overflow
			}
		case <-timer.C:
		}
	}
}

// countTags defines the engine's own tags.
func (e *Engine) countTags() ([2]tag.ID, error) {
	var ids [2]tag.ID
	for i, d := range []tag.Def{
		{Name: TagActive, Source: "pith", Description: "alarms active now"},
		{Name: TagUnacked, Source: "pith", Description: "alarms not acknowledged (active or cleared)"},
	} {
		id, err := e.tab.Define(d)
		if err != nil {
			return ids, fmt.Errorf("define alarm tags: %w", err)
		}
		ids[i] = id
	}
	return ids, nil
}

// Observe judges tag changes seen at now.
func (e *Engine) Observe(cs []tag.Change, now time.Time) {
	e.mu.Lock()
	for i := range cs {
		c := &cs[i]
		if c.IsText {
			continue // alarm conditions compare numbers
		}
		for _, a := range e.byTag[c.Tag] {
			a.id, a.resolved = c.ID, true
			e.observeLocked(a, c.V, c.Q, c.Has, c.T, now)
		}
	}
	e.flushLocked()
}

func (e *Engine) observeLocked(a *alarm, v float64, q model.Quality, has bool, t int64, now time.Time) {
	a.v, a.q, a.has = v, q, has
	a.t = max(a.t, t)
	if e.following.Load() {
		a.d.reset() // the other box judges (see Follow)
		return
	}
	if a.def.Kind == KindStale {
		e.judgeStale(a, now)
		return
	}
	cond, ok := a.def.valueCond(v, q, has, a.d.active)
	if !ok {
		a.d.reset()
		return
	}
	if a.d.step(now, cond, a.def.OnDelay, a.def.OffDelay) {
		e.transition(a, now)
	}
}

// staleRef is the time a stale alarm measures age from: the newest
// sample, or the engine's start for a tag never seen.
func (e *Engine) staleRef(a *alarm) int64 {
	if a.t > 0 {
		return a.t
	}
	return e.start.UnixMilli()
}

func (e *Engine) judgeStale(a *alarm, now time.Time) {
	if e.following.Load() {
		return
	}
	cond := now.UnixMilli()-e.staleRef(a) > a.def.MaxAge.Milliseconds()
	if a.d.step(now, cond, a.def.OnDelay, a.def.OffDelay) {
		e.transition(a, now)
	}
}

// Tick resolves tags defined since the last tick, re-judges pending
// delays and stale values at now, and returns the earliest time a pending
// change is due (zero when none).
func (e *Engine) Tick(now time.Time) time.Time {
	e.mu.Lock()
	var next time.Time
	due := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, a := range e.alarms {
		if a.def.Kind == KindExternal {
			continue
		}
		if !a.resolved {
			id, ok := e.tab.Lookup(a.def.Tag)
			if ok {
				a.id, a.resolved = id, true
				if v, ok := e.tab.Get(id); ok && (v.Has || v.T > 0) {
					e.observeLocked(a, v.V, v.Q, v.Has, v.T, now)
				}
			}
		}
		switch {
		case a.def.Kind == KindStale:
			if a.resolved {
				if v, ok := e.tab.Get(a.id); ok && v.T > a.t {
					a.t, a.v, a.q, a.has = v.T, v.V, v.Q, v.Has
				}
			}
			e.judgeStale(a, now)
			if !a.d.active && !a.d.pending {
				due(time.UnixMilli(e.staleRef(a) + a.def.MaxAge.Milliseconds() + 1))
			}
		case a.d.pending:
			if a.def.Kind == KindComm || a.has {
				cond, ok := a.def.valueCond(a.v, a.q, a.has, a.d.active)
				if ok && a.d.step(now, cond, a.def.OnDelay, a.def.OffDelay) {
					e.transition(a, now)
				}
			}
		}
		if t, ok := a.d.deadline(a.def.OnDelay, a.def.OffDelay); ok {
			due(t)
		}
	}
	e.flushLocked()
	return next
}

// Set raises (active) or clears an external alarm at once, defining it
// on first use. The rules raise write.<tag> this way when a control write
// fails.
//
// A following engine (see Follow) ignores Set: the box that judges raises
// its own.
func (e *Engine) Set(name string, active bool, message string) {
	if e.following.Load() {
		return
	}
	now := e.opts.Clock.Now()
	e.mu.Lock()
	a, ok := e.byName[name]
	if !ok {
		if !active {
			e.mu.Unlock()
			return
		}
		a = e.add(Def{Name: name, Kind: KindExternal, Severity: "major", Message: message})
	}
	if a.def.Kind == KindExternal {
		if active && message != "" {
			a.def.Message = message
		}
		if a.d.active != active {
			a.d.active, a.d.pending = active, false
			e.transition(a, now)
		}
	}
	e.flushLocked()
}

// Ack acknowledges the alarm named name on behalf of who.
func (e *Engine) Ack(name, who string) (Status, error) {
	now := e.opts.Clock.Now()
	e.mu.Lock()
	a, ok := e.byName[name]
	if !ok {
		e.mu.Unlock()
		return Status{}, fmt.Errorf("acknowledge alarm %q: %w", name, ErrUnknownAlarm)
	}
	if a.acked {
		st := a.status()
		e.mu.Unlock()
		return st, fmt.Errorf("acknowledge alarm %q (%s): %w", name, st.State, ErrNothingToAck)
	}
	a.acked, a.ackedAt, a.ackedBy = true, now.UnixMilli(), who
	e.emit(a, EventAcknowledged, now, who)
	st := a.status()
	err := e.flushLocked()
	return st, err
}

// transition records an active change of a; e.mu is held.
func (e *Engine) transition(a *alarm, now time.Time) {
	if a.d.active {
		a.acked, a.raised = false, now.UnixMilli()
		e.emit(a, EventRaised, now, "")
		return
	}
	a.cleared = now.UnixMilli()
	e.emit(a, EventCleared, now, "")
}

func (e *Engine) emit(a *alarm, what string, now time.Time, who string) {
	e.seq++
	ev := Event{Seq: e.seq, T: now.UnixMilli(), Alarm: a.def.Name, Event: what,
		State: stateOf(a.d.active, a.acked).String(), Kind: a.def.Kind.String(), Tag: a.def.Tag,
		Severity: a.def.Severity, Message: a.def.Message, Who: who, Raised: a.raised}
	if a.has {
		v := a.v
		ev.Value = &v
	}
	e.pending = append(e.pending, ev)
}

// flushLocked logs the pending events, hands them to the notifiers and
// unlocks e.mu. Logging under the lock keeps the log in sequence order.
func (e *Engine) flushLocked() error {
	evs := e.pending
	e.pending = nil
	var err error
	if len(evs) > 0 && e.hist != nil {
		if err = e.hist.Append(evs...); err != nil {
			e.logErrors.Add(uint64(len(evs)))
			e.log.Error("alarm log write failed", "events", len(evs), "err", err)
		}
	}
	e.mu.Unlock()
	for _, ev := range evs {
		e.events.Add(1)
		e.log.Info("alarm "+ev.Event, "alarm", ev.Alarm, "state", ev.State, "severity", ev.Severity, "tag", ev.Tag, "who", ev.Who, "via", ev.Via)
		e.send(ev, true)
	}
	return err
}

// send hands ev to the notifiers: the Unmuted ones when always, and the
// others unless the engine is muted, tracking their delivery for
// OnDelivered.
func (e *Engine) send(ev Event, always bool) {
	muted := e.muted.Load()
	var d *delivery
	if !muted {
		d = e.newDelivery(ev)
	}
	for _, q := range e.queues {
		switch {
		case q.always && always:
			q.push(queued{ev: ev}, e.log)
		case !q.always && !muted:
			d.add()
			q.push(queued{ev: ev, d: d}, e.log)
		}
	}
	d.pushed()
}

func (a *alarm) status() Status {
	st := Status{Name: a.def.Name, Kind: a.def.Kind.String(), Tag: a.def.Tag,
		State: stateOf(a.d.active, a.acked).String(), Severity: a.def.Severity, Message: a.def.Message,
		Raised: a.raised, Cleared: a.cleared, Acked: a.ackedAt, AckedBy: a.ackedBy}
	if a.has {
		v := a.v
		st.Value = &v
	}
	return st
}

// Current returns the alarms that are not normal (active, acknowledged
// or cleared awaiting acknowledgement), the most recently raised first.
func (e *Engine) Current() []Status {
	e.mu.Lock()
	out := make([]Status, 0, 8)
	for _, a := range e.alarms {
		if a.d.active || !a.acked {
			out = append(out, a.status())
		}
	}
	e.mu.Unlock()
	sort.SliceStable(out, func(i, j int) bool { return out[i].Raised > out[j].Raised })
	return out
}

// All returns every defined alarm, in definition order.
func (e *Engine) All() []Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Status, len(e.alarms))
	for i, a := range e.alarms {
		out[i] = a.status()
	}
	return out
}

// History returns the logged events with time in [from, to), oldest
// first, at most limit of them (the newest ones).
func (e *Engine) History(from, to int64, limit int) ([]Event, error) {
	if e.hist == nil {
		return nil, nil
	}
	var out []Event
	_, err := e.hist.Read(from, to, func(ev Event) {
		out = append(out, ev)
		if limit > 0 && len(out) > 2*limit {
			out = append(out[:0], out[len(out)-limit:]...)
		}
	})
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, err
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	s := Stats{Alarms: len(e.alarms)}
	for _, a := range e.alarms {
		if a.d.active {
			s.Active++
		}
		if !a.acked {
			s.Unacked++
		}
	}
	e.mu.Unlock()
	s.Events, s.LogErrors, s.Overflow = e.events.Load(), e.logErrors.Load(), e.overflow.Load()
	for _, q := range e.queues {
		s.NotifyDrops += q.dropped.Load()
		s.NotifyFails += q.failed.Load()
	}
	return s
}

// notifyQueue feeds one notifier from its own goroutine, or an Inline
// one from the caller's (ch is nil).
type notifyQueue struct {
	n       Notifier
	always  bool // never muted (see Mute)
	ch      chan queued
	mu      sync.Mutex // orders push against close
	closed  bool
	dropped atomic.Uint64
	failed  atomic.Uint64
}

func (q *notifyQueue) push(it queued, log *slog.Logger) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		it.d.done(false)
		return
	}
	if q.ch == nil {
		q.deliver(context.Background(), it, log)
		return
	}
	select {
	case q.ch <- it:
	default:
		q.dropped.Add(1)
		it.d.done(false)
		log.Warn("alarm notification dropped: queue full", "notifier", q.n.Name(), "alarm", it.ev.Alarm)
	}
}

func (q *notifyQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		if q.ch != nil {
			close(q.ch)
		}
	}
}

func (q *notifyQueue) run(ctx context.Context, log *slog.Logger) {
	if q.ch == nil {
		return
	}
	for it := range q.ch {
		q.deliver(ctx, it, log)
	}
}

func (q *notifyQueue) deliver(ctx context.Context, it queued, log *slog.Logger) {
	err := q.n.Notify(ctx, it.ev)
	if err != nil {
		q.failed.Add(1)
		log.Warn("alarm notification failed", "notifier", q.n.Name(), "alarm", it.ev.Alarm, "event", it.ev.Event, "err", err)
	}
	it.d.done(err == nil)
}
