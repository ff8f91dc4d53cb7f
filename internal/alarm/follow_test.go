package alarm

import (
	"context"
	"sync"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// recordNotifier records the events it is given.
type recordNotifier struct {
	mu  sync.Mutex
	evs []Event
}

func (r *recordNotifier) Name() string { return "record" }
func (r *recordNotifier) Notify(_ context.Context, ev Event) error {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
	return nil
}

// TestFollow: a following engine judges nothing (nor raises external
// alarms) but takes the other box's transitions with their raise time;
// an acknowledgement applies only to the raise it names; Follow(false)
// judges the values held at once.
func TestFollow(t *testing.T) {
	r := newRig(t, t.TempDir(), Def{Name: "hi", Kind: KindHi, Tag: "x", Limit: 10})
	r.e.Follow(true)
	r.set("x", 0, 20, model.QualityGood)
	if got := r.state("hi"); got != "normal" {
		t.Fatalf("following, a value over the limit made the alarm %s", got)
	}
	r.e.Set("write.x", true, "refused")
	for _, s := range r.e.All() {
		if s.Name == "write.x" {
			t.Fatal("a following engine raised an external alarm by Set")
		}
	}
	raise := Event{T: 5, Alarm: "hi", Event: EventRaised, State: "active", Kind: "hi", Raised: 5}
	if !r.e.Apply(raise, "a") || r.state("hi") != "active" {
		t.Fatalf("the other box's raise not applied: %s", r.state("hi"))
	}
	if r.e.Apply(raise, "a") {
		t.Fatal("the same raise applied twice")
	}
	// Following, an acknowledged state is taken as it is, even of another
	// raise (a box that comes back catches up so); the raise time moves.
	ack := Event{T: 6, Alarm: "hi", Event: EventAcknowledged, State: "acknowledged", Raised: 4, Who: "op"}
	if !r.e.Apply(ack, "a") || r.state("hi") != "acknowledged" || r.e.All()[0].Raised != 4 {
		t.Fatalf("following, an acknowledged state not taken: %+v", r.e.All()[0])
	}
	h, err := r.e.History(0, 1<<62, 0)
	if err != nil || len(h) != 2 || h[0].Via != "a" || h[1].Who != "op via redundancy peer a" || h[0].T != 5 {
		t.Fatalf("log %+v (%v), want the raise at 5 and the acknowledgement via a", h, err)
	}
	// Judging again: the value under the limit clears the alarm now.
	r.set("x", 10, 1, model.QualityGood)
	if got := r.state("hi"); got != "acknowledged" {
		t.Fatalf("following, a value under the limit made the alarm %s", got)
	}
	r.e.Follow(false)
	if got := r.state("hi"); got != "normal" {
		t.Fatalf("after Follow(false) the alarm is %s, want normal (cleared, acknowledged)", got)
	}
}

// TestApplyAck: an engine that judges takes only acknowledgements from
// the other box, and only of the raise it holds.
func TestApplyAck(t *testing.T) {
	r := newRig(t, "", Def{Name: "hi", Kind: KindHi, Tag: "x", Limit: 10})
	r.set("x", 0, 20, model.QualityGood)
	raised := r.e.All()[0].Raised
	if r.e.Apply(Event{T: 1, Alarm: "hi", Event: EventCleared, State: "cleared", Raised: raised}, "b") {
		t.Fatal("a judging engine took the other box's clear")
	}
	if r.e.Apply(Event{T: 2, Alarm: "hi", Event: EventAcknowledged, State: "acknowledged", Raised: raised - 1, Who: "op"}, "b") {
		t.Fatal("an acknowledgement of an earlier raise applied")
	}
	if !r.e.Apply(Event{T: 3, Alarm: "hi", Event: EventAcknowledged, State: "acknowledged", Raised: raised, Who: "op"}, "b") || r.state("hi") != "acknowledged" {
		t.Fatalf("the acknowledgement of this raise not applied: %s", r.state("hi"))
	}
}

// TestOnDelivered: an event is told delivered once every muteable
// notifier took it, not while muted; Renotify sends to those notifiers
// only, unless muted.
func TestOnDelivered(t *testing.T) {
	r := newRig(t, "", Def{Name: "hi", Kind: KindHi, Tag: "x", Limit: 10})
	out, pair := &recordNotifier{}, &unmutedNotifier{}
	for _, n := range []Notifier{out, pair} {
		q := &notifyQueue{n: n, ch: make(chan queued, 8)}
		_, q.always = n.(Unmuted)
		r.e.queues = append(r.e.queues, q)
	}
	var told []Event
	r.e.OnDelivered(func(ev Event) { told = append(told, ev) })
	drain := func() {
		for _, q := range r.e.queues {
			for len(q.ch) > 0 {
				it := <-q.ch
				it.d.done(q.n.Notify(context.Background(), it.ev) == nil)
			}
		}
	}
	r.e.Mute(true)
	r.set("x", 0, 20, model.QualityGood)
	drain()
	if len(told) != 0 || len(out.evs) != 0 {
		t.Fatalf("muted: told %v, notified %v", told, out.evs)
	}
	r.e.Mute(false)
	r.set("x", 10, 1, model.QualityGood)
	drain()
	if len(told) != 1 || told[0].Event != EventCleared {
		t.Fatalf("told %+v, want the clear", told)
	}
	r.e.Renotify(Event{T: 1, Alarm: "hi", Event: EventRaised, Raised: 1})
	drain()
	if len(out.evs) != 2 || out.evs[1].Event != EventRaised || pair.n.Load() != 2 || len(told) != 2 {
		t.Fatalf("after Renotify: notified %v, the pair's notifier %d, told %d", out.evs, pair.n.Load(), len(told))
	}
}
