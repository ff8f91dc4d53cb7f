package alarm

import "sync/atomic"

// A redundant pair's two boxes run an engine each on the same values, but
// only one judges: the active box. The standby's engine follows it
// (Follow): it records values without judging them and takes the active
// box's transitions as they were published (Apply), so that both hold
// the same alarms with the same raise times. At a takeover the new
// active box's engine stops following and judges every alarm at once,
// and sends again what the old box may not have delivered (Renotify,
// told by OnDelivered on the old box what it did deliver).

// queued is an event waiting in a notifier's queue, with the delivery it
// counts towards (nil when none is tracked).
type queued struct {
	ev Event
	d  *delivery
}

// delivery counts the notifiers still to deliver one event; the last one
// calls the engine's OnDelivered func when every notifier succeeded.
type delivery struct {
	fn     func(Event)
	ev     Event
	left   atomic.Int32 // notifiers still to deliver, plus one until pushed
	failed atomic.Bool
}

// newDelivery returns the tracking of ev, nil when nobody asked for it.
func (e *Engine) newDelivery(ev Event) *delivery {
	fn := e.delivered.Load()
	if fn == nil {
		return nil
	}
	d := &delivery{fn: *fn, ev: ev}
	d.left.Store(1)
	return d
}

// add counts one more notifier; safe on nil.
func (d *delivery) add() {
	if d != nil {
		d.left.Add(1)
	}
}

// pushed ends the counting: the event is in every queue it goes to.
func (d *delivery) pushed() { d.done(true) }

// done records one notifier's result; safe on nil and for concurrent use.
func (d *delivery) done(ok bool) {
	if d == nil {
		return
	}
	if !ok {
		d.failed.Store(true)
	}
	if d.left.Add(-1) == 0 && !d.failed.Load() {
		d.fn(d.ev)
	}
}

// OnDelivered makes fn hear of every event that each notifier Mute
// silences has delivered (none failed or dropped it), or at once when
// there are none; events sent while muted are not told. fn is called from
// the notifiers' goroutines and must not block long.
func (e *Engine) OnDelivered(fn func(Event)) { e.delivered.Store(&fn) }

// Follow makes the engine follow the other box of a redundant pair (true):
// it keeps recording the values of its tags but judges none (nor raises
// external alarms by Set); its alarms change only by Apply, Ack and
// Reload. Follow(false) judges every alarm at once from the values it
// holds, as a takeover needs: what changed while no box judged is raised
// or cleared then, and notified unless muted.
func (e *Engine) Follow(f bool) {
	if e.following.Swap(f) == f || f {
		return
	}
	now := e.opts.Clock.Now()
	e.mu.Lock()
	for _, a := range e.alarms {
		switch {
		case a.def.Kind == KindExternal:
		case a.def.Kind == KindStale:
			e.judgeStale(a, now)
		case a.resolved:
			cond, ok := a.def.valueCond(a.v, a.q, a.has, a.d.active)
			if ok && a.d.step(now, cond, a.def.OnDelay, a.def.OffDelay) {
				e.transition(a, now)
			}
		}
	}
	e.flushLocked()
}

// viaPeer marks who acknowledged on the other box of a pair.
const viaPeer = " via redundancy peer "

// Apply takes a transition the other box of a redundant pair, named via,
// published (ev.State is the alarm's state after it). An acknowledgement
// of the raise this engine holds (same raise time) is applied whether or
// not the engine follows; while it follows, any other state is taken as
// it is, an external alarm defined if need be. The applied transition is
// logged with ev's time, marked Via, and sent to the notifiers (unless
// muted). It reports whether anything changed.
func (e *Engine) Apply(ev Event, via string) bool {
	st, ok := parseState(ev.State)
	if !ok || ev.Raised == 0 {
		return false
	}
	active := st == StateActive || st == StateAcknowledged
	acked := st == StateAcknowledged || st == StateNormal
	who := ev.Who
	if ev.Event == EventAcknowledged {
		who += viaPeer + via
	}
	following := e.following.Load()
	e.mu.Lock()
	a, known := e.byName[ev.Alarm]
	if !known {
		if ev.Kind != KindExternal.String() || !following {
			e.mu.Unlock()
			return false
		}
		a = e.add(Def{Name: ev.Alarm, Kind: KindExternal, Tag: ev.Tag, Severity: ev.Severity, Message: ev.Message})
	}
	switch {
	case ev.Event == EventAcknowledged && !a.acked && a.raised == ev.Raised:
		a.acked, a.ackedAt, a.ackedBy = true, ev.T, who
	case !following, a.d.active == active && a.acked == acked && a.raised == ev.Raised:
		e.mu.Unlock()
		return false
	default:
		a.d.active, a.d.pending, a.acked, a.raised = active, false, acked, ev.Raised
		switch ev.Event {
		case EventCleared:
			a.cleared = ev.T
		case EventAcknowledged:
			a.ackedAt, a.ackedBy = ev.T, who
		}
		if a.def.Kind == KindExternal && ev.Message != "" {
			a.def.Message = ev.Message
		}
	}
	e.seq++
	out := ev
	out.Seq, out.Via, out.Who, out.State = e.seq, via, who, stateOf(a.d.active, a.acked).String()
	if ev.Event != EventAcknowledged {
		out.Who = ""
	}
	e.pending = append(e.pending, out)
	e.flushLocked()
	return true
}

// Renotify sends ev again, without logging it, to the notifiers that Mute
// silences, unless muted: a new active box sends what the old one logged
// but may not have delivered. Receivers tell a repeat by its Idempotency-
// Key (see Webhook).
func (e *Engine) Renotify(ev Event) {
	if e.muted.Load() {
		return
	}
	e.log.Info("alarm "+ev.Event+" notified again", "alarm", ev.Alarm, "t", ev.T, "via", ev.Via)
	e.send(ev, false)
}
