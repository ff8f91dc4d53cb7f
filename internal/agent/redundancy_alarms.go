package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pith-historian/pith/internal/alarm"
	"github.com/pith-historian/pith/internal/redundancy"
)

// The alarms of a redundant pair are judged by the active box only; the
// standby's engine follows it (alarm.Engine.Follow). Every transition a
// box makes itself (the active box's raises and clears, either box's
// acknowledgements) is published to the pair's alarm stream
// PITH_REDUNDANCY_ALARMS_<group>, subject
// pith.redundancy_alarm.<group>.state.<alarm, base64url>, the newest of
// each alarm kept; the other box applies it (alarm.Engine.Apply). Once
// the notifiers of the box that sent a transition delivered it, that box
// publishes it again under ...notified.<alarm>. A box that takes over
// sends again each alarm's newest transition that nobody marked
// delivered (the old box died or was cut off first), at least once: a
// receiver tells a repeat by its Idempotency-Key.

// alarmRenotifyWindow bounds how old a transition the new active box of a
// pair sends again: one the old box failed to deliver long before it
// stopped was given up by its notifiers, not lost in the takeover.
const alarmRenotifyWindow = 5 * time.Minute

// alarmStream is the pair's stream of alarm transitions.
func alarmStream(group string) string { return "PITH_REDUNDANCY_ALARMS_" + group }

// alarmRecord is a transition shared with the other box, or the mark
// that its sender delivered it.
type alarmRecord struct {
	Node  string      `json:"node"` // the box that published it
	Event alarm.Event `json:"event"`
}

// alarmShare hands this box's own alarm transitions to the other box of
// the pair (set by the redundancy part once it runs).
type alarmShare struct {
	publish atomic.Pointer[func(ev alarm.Event)]
}

var _ alarm.Notifier = (*alarmShare)(nil)

func (*alarmShare) Name() string { return "redundancy" }

// Unmuted: the standby shares its acknowledgements too.
func (*alarmShare) Unmuted() {}

// Notify shares ev unless it came from the other box.
func (s *alarmShare) Notify(_ context.Context, ev alarm.Event) error {
	if ev.Via != "" {
		return nil
	}
	if p := s.publish.Load(); p != nil {
		(*p)(ev)
	}
	return nil
}

// alarmRecords is what this box read of the alarm stream: each alarm's
// newest transition (and the box that made it) and the newest one marked
// delivered. Safe for concurrent use.
type alarmRecords struct {
	mu       sync.Mutex
	latest   map[string]alarmRecord
	notified map[string]string // alarm -> idempotency key
}

func (a *alarmRecords) note(kind string, rec alarmRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.latest == nil {
		a.latest, a.notified = map[string]alarmRecord{}, map[string]string{}
	}
	if kind == "notified" {
		a.notified[rec.Event.Alarm] = alarm.IdempotencyKey(rec.Event)
	} else {
		a.latest[rec.Event.Alarm] = rec
	}
}

// fromPeer returns the alarms whose newest transition in the stream was
// made by a box other than node.
func (a *alarmRecords) fromPeer(node string) []alarmRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []alarmRecord
	for _, rec := range a.latest {
		if rec.Node != node {
			out = append(out, rec)
		}
	}
	return out
}

// undelivered returns the newest transitions of the alarms that nobody
// marked delivered, of the last alarmRenotifyWindow before now.
func (a *alarmRecords) undelivered(now time.Time) []alarm.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []alarm.Event
	for name, rec := range a.latest {
		if ev := rec.Event; a.notified[name] != alarm.IdempotencyKey(ev) && ev.T >= now.Add(-alarmRenotifyWindow).UnixMilli() {
			out = append(out, ev)
		}
	}
	return out
}

// renotify sends again, on a box taking over, what the stream holds
// undelivered.
func (r *redundancyPart) renotify() {
	for _, ev := range r.alarms.undelivered(time.Now()) {
		r.au.alarms.Renotify(ev)
	}
}

// followPeer applies, on a box that has just started to follow, the
// other box's transitions it read while it still judged: a box that
// steps down hears the new active box's first transitions while it is
// still switching over, and the engine takes the other box's states only
// while it follows. The caller holds applyMu.
func (r *redundancyPart) followPeer() {
	for _, rec := range r.alarms.fromPeer(r.cfg.Redundancy.Node) {
		r.au.alarms.Apply(rec.Event, rec.Node)
	}
}

// shareAlarms publishes this box's alarm transitions and delivery marks
// to the pair's alarm stream, and reads it: the transitions kept while
// this box was down when it starts (or reconnects), then each as it
// comes, applied when they come from the other box.
func (r *redundancyPart) shareAlarms(ctx context.Context, nc *nats.Conn) {
	if r.au == nil || r.au.alarms == nil {
		r.alarmsRead.Store(true)
		return
	}
	rc := r.cfg.Redundancy
	prefix := "pith.redundancy_alarm." + rc.Group + "."
	js, err := jetstream.New(nc)
	if err != nil {
		r.log.Warn("alarms not shared with the other box", "err", err)
		return
	}
	out := newAlarmOutbox()
	go out.run(ctx, func(c context.Context, subject string, data []byte) error {
		_, err := js.Publish(c, subject, data)
		return err
	}, rc.TTL(), r.log)
	send := func(kind string, ev alarm.Event) {
		b, _ := json.Marshal(alarmRecord{Node: rc.Node, Event: ev})
		out.put(prefix+kind+"."+base64.RawURLEncoding.EncodeToString([]byte(ev.Alarm)), b)
	}
	pub := func(ev alarm.Event) { send("state", ev) }
	r.au.share.publish.Store(&pub)
	r.au.alarms.OnDelivered(func(ev alarm.Event) { send("notified", ev) })
	var readTo atomic.Uint64 // the stream's last sequence when subscribed
	apply := func(m jetstream.Msg) {
		var rec alarmRecord
		if json.Unmarshal(m.Data(), &rec) != nil {
			return
		}
		kind, _, _ := strings.Cut(strings.TrimPrefix(m.Subject(), prefix), ".")
		r.applyMu.Lock()
		defer r.applyMu.Unlock()
		r.alarms.note(kind, rec)
		if kind == "state" && rec.Node != rc.Node {
			r.au.alarms.Apply(rec.Event, rec.Node)
		}
		if md, err := m.Metadata(); err == nil && md.Sequence.Stream >= readTo.Load() {
			r.alarmsRead.Store(true)
		}
	}
	wait := rc.TTL() / redundancy.RenewShare
	for ctx.Err() == nil {
		err := func() error {
			c, cancel := context.WithTimeout(ctx, rc.TTL())
			s, err := js.CreateOrUpdateStream(c, jetstream.StreamConfig{Name: alarmStream(rc.Group), Subjects: []string{prefix + ">"},
				MaxMsgsPerSubject: 1, Storage: jetstream.FileStorage, Replicas: min(3, len(strings.Split(rc.NATS, ",")))})
			if err != nil {
				cancel()
				return err
			}
			// An ordered consumer reads the kept transitions, then the
			// new ones; it recreates itself after a disconnect. Until
			// it has read what the stream held now, this box may not
			// take over (see Eligible in Start).
			if info, err := s.Info(c); err == nil {
				readTo.Store(info.State.LastSeq)
				if info.State.Msgs == 0 {
					r.alarmsRead.Store(true)
				}
			}
			cons, err := s.OrderedConsumer(c, jetstream.OrderedConsumerConfig{})
			cancel()
			if err != nil {
				return err
			}
			cc, err := cons.Consume(apply)
			if err != nil {
				return err
			}
			<-ctx.Done()
			cc.Stop()
			return nil
		}()
		if err != nil {
			r.log.Debug("alarm stream; retrying", "in", wait, "err", err)
			sleepCtx(ctx, wait)
		}
	}
}

// alarmOutbox holds the records this box has still to store in the
// pair's alarm stream, the newest of each subject: a publish that fails
// (a slow, restarting or unreachable server) is tried again until the
// stream has it, and a newer record of a subject replaces one still
// waiting (the stream keeps only the newest anyway). put never blocks, so
// neither do the notifiers that call it.
type alarmOutbox struct {
	mu      sync.Mutex
	waiting map[string]outRecord
	order   []string // subjects in the order they first waited
	n       uint64   // records put so far
	wake    chan struct{}
}

// outRecord is a record waiting, numbered in the order put.
type outRecord struct {
	data []byte
	n    uint64
}

func newAlarmOutbox() *alarmOutbox {
	return &alarmOutbox{waiting: map[string]outRecord{}, wake: make(chan struct{}, 1)}
}

func (o *alarmOutbox) put(subject string, data []byte) {
	o.mu.Lock()
	if _, ok := o.waiting[subject]; !ok {
		o.order = append(o.order, subject)
	}
	o.n++
	o.waiting[subject] = outRecord{data, o.n}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// next returns the subject waiting longest and its newest record.
func (o *alarmOutbox) next() (string, outRecord, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.order) == 0 {
		return "", outRecord{}, false
	}
	return o.order[0], o.waiting[o.order[0]], true
}

// done drops subject's record once published, unless a newer one came
// meanwhile (it goes next).
func (o *alarmOutbox) done(subject string, rec outRecord) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur, ok := o.waiting[subject]; ok && cur.n == rec.n {
		delete(o.waiting, subject)
		o.order = o.order[1:]
	}
}

// run publishes what waits until ctx ends, each attempt given at least 5 s
// (a loaded server is slow, not gone), waiting ttl/RenewShare, doubling up
// to ttl, between failed attempts. At the end it gives what still waits
// one more ttl.
func (o *alarmOutbox) run(ctx context.Context, publish func(context.Context, string, []byte) error, ttl time.Duration, log *slog.Logger) {
	first := ttl / redundancy.RenewShare
	wait := first
	drain := func(ctx context.Context, each time.Duration) bool {
		for {
			subject, rec, ok := o.next()
			if !ok {
				return true
			}
			c, cancel := context.WithTimeout(ctx, each)
			err := publish(c, subject, rec.data)
			cancel()
			if err != nil {
				log.Warn("share alarm; retrying", "subject", subject, "in", wait, "err", err)
				return false
			}
			o.done(subject, rec)
			wait = first
		}
	}
	for ctx.Err() == nil {
		if drain(ctx, max(5*time.Second, ttl)) {
			select {
			case <-ctx.Done():
			case <-o.wake:
			}
			continue
		}
		sleepCtx(ctx, wait)
		wait = min(2*wait, ttl)
	}
	c, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
	defer cancel()
	drain(c, ttl)
}
