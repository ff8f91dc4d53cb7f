package tag

import (
	"context"
	"errors"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// TestWriteRoad checks the road of pushed values: durable first, then
// current values and changes, with the same subscriptions that see
// acquired values.
func TestWriteRoad(t *testing.T) {
	sink := &recSink{}
	tab := New(nil, Options{}, sink)
	acq, err := tab.Define(Def{Name: "plc.a"})
	if err != nil {
		t.Fatal(err)
	}
	changes := tab.Subscribe(SubOptions{Name: "alarms", Mode: Queue})

	// An acquired value and a pushed batch, then a late pushed point.
	tab.Update([]Sample{{ID: acq, T: 1000, V: 1}})
	if err := tab.Write(context.Background(), []model.Point{
		{Tag: "lp.x", T: 1000, V: 5}, {Tag: "lp.x", T: 2000, V: 5}, {Tag: "plc.a", T: 2000, V: 2},
	}, "lineproto"); err != nil {
		t.Fatal(err)
	}
	if err := tab.Write(context.Background(), []model.Point{{Tag: "lp.x", T: 500, V: 9}}, "lineproto"); err != nil {
		t.Fatal(err)
	}

	if got := len(sink.take()); got != 1 {
		t.Fatalf("queued for the archive: %d points, want the acquired one", got)
	}
	if got := len(sink.written); got != 4 {
		t.Fatalf("written durably: %d points, want 4", got)
	}
	cur, err := tab.Latest("lp.x", "plc.a")
	if err != nil {
		t.Fatal(err)
	}
	if cur[0].T != 2000 || cur[0].V != 5 || cur[1].T != 2000 || cur[1].V != 2 {
		t.Fatalf("current values: %+v", cur)
	}
	if d, _ := tab.Def(cur2id(t, tab, "lp.x")); d.Source != "lineproto" {
		t.Fatalf("source of a pushed tag: %q", d.Source)
	}
	// Changes: plc.a 1, lp.x 5 (the repeat at 2000 is no change), plc.a 2;
	// the late point changes nothing current.
	cs := changes.Take(nil)
	if len(cs) != 3 {
		t.Fatalf("changes: %+v", cs)
	}
}

func cur2id(t *testing.T, tab *Table, name string) ID {
	t.Helper()
	id, ok := tab.Lookup(name)
	if !ok {
		t.Fatalf("tag %s not defined", name)
	}
	return id
}

// TestWriteAtomic checks that a refused write applies nothing: no tag is
// defined, no current value moves, no subscriber hears of it.
func TestWriteAtomic(t *testing.T) {
	sink := &recSink{failWith: errors.New("disk full")}
	tab := New(nil, Options{}, sink)
	changes := tab.Subscribe(SubOptions{Name: "alarms", Mode: Queue})
	err := tab.Write(context.Background(), []model.Point{{Tag: "a", T: 1, V: 1}}, "lp")
	if err == nil || err.Error() != "disk full" {
		t.Fatalf("err = %v", err)
	}
	if _, ok := tab.Lookup("a"); ok {
		t.Fatal("a refused write defined its tag")
	}
	if n := len(changes.Take(nil)); n != 0 {
		t.Fatalf("a refused write reached %d subscribers", n)
	}
	// A bad name is refused before anything is written.
	sink.failWith = nil
	err = tab.Write(context.Background(), []model.Point{{Tag: "ok", T: 1, V: 1}, {Tag: "bad name", T: 1, V: 1}}, "lp")
	var pe *model.PointError
	if !errors.Is(err, ErrBadName) || !errors.As(err, &pe) || pe.Index != 1 || pe.Tag != "bad name" {
		t.Fatalf("err = %v, want a PointError for point 1 wrapping ErrBadName", err)
	}
	if len(sink.written) != 0 {
		t.Fatalf("a batch with a bad name wrote %d points", len(sink.written))
	}
	if err := New(nil, Options{}, nil).Write(context.Background(), []model.Point{{Tag: "a"}}, ""); !errors.Is(err, ErrNoArchive) {
		t.Fatalf("without an archive: %v", err)
	}
}
