package agent

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/model"
)

// leaseWriter counts what reaches the writer chain behind the fence.
type leaseWriter struct {
	api.Store
	values, units int
}

func (w *leaseWriter) Write(_ context.Context, pts []model.Point) error {
	w.values += len(pts)
	return nil
}

func (w *leaseWriter) WriteMixed(_ context.Context, pts []model.Point, texts []model.TextPoint) error {
	w.values += len(pts) + len(texts)
	return nil
}

func (w *leaseWriter) SetUnit(string, string) error {
	w.units++
	return nil
}

// TestSubscriberSinkFenced: on a box of a pair the subscribers' writes
// are refused while the box does not hold its lease, and go through while
// it does; outside a pair nothing is wrapped.
func TestSubscriberSinkFenced(t *testing.T) {
	w := &leaseWriter{}
	in := &inputs{wr: w}
	if _, ok := in.subscriberSink().(fencedWriter); ok {
		t.Fatal("outside a pair the subscribers' writes are fenced")
	}
	var leased atomic.Bool
	in.leased = leased.Load
	sink := in.subscriberSink().(fencedWriter)
	pts := []model.Point{{Tag: "a", T: 1000, V: 1, Q: model.QualityGood}}
	texts := []model.TextPoint{{Tag: "s", T: 1000, Text: "on", Q: model.QualityGood}}
	for _, err := range []error{
		sink.Write(context.Background(), pts),
		sink.WriteMixed(context.Background(), pts, texts),
		sink.SetUnit("a", "kW"),
	} {
		if !errors.Is(err, errFenced) {
			t.Fatalf("without the lease: %v, want errFenced", err)
		}
	}
	if w.values != 0 || w.units != 0 {
		t.Fatalf("without the lease %d values and %d units reached the chain", w.values, w.units)
	}
	leased.Store(true)
	if err := sink.WriteMixed(context.Background(), pts, texts); err != nil {
		t.Fatal(err)
	}
	if err := sink.SetUnit("a", "kW"); err != nil {
		t.Fatal(err)
	}
	if w.values != 2 || w.units != 1 {
		t.Fatalf("with the lease %d values and %d units reached the chain, want 2 and 1", w.values, w.units)
	}
}
