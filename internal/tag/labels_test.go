package tag

import (
	"context"
	"errors"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// labelSink is a recSink that keeps labels.
type labelSink struct {
	recSink
	calls int
	got   []model.Series
	fail  error
}

func (s *labelSink) SetLabels(_ context.Context, series []model.Series) error {
	s.calls++
	if s.fail != nil {
		return s.fail
	}
	s.got = append(s.got, series...)
	return nil
}

var _ LabelSink = (*labelSink)(nil)

func TestLabel(t *testing.T) {
	ctx := context.Background()
	sink := &labelSink{}
	tab := New(nil, Options{}, sink)
	acq, err := tab.Define(Def{Name: "plc.a", Unit: "bar"})
	if err != nil {
		t.Fatal(err)
	}
	ls := model.LabelsFrom("_measurement", "cpu", "_field", "idle", "host", "pi3")
	series := []model.Series{{Tag: "cpu.pi3.idle", Labels: ls}, {Tag: "plc.a", Labels: model.LabelsFrom("line", "2")}}
	if err := tab.Label(ctx, series); err != nil {
		t.Fatal(err)
	}
	// A tag not defined yet is defined by its first stored value, with
	// the labels waiting for it.
	if _, ok := tab.Lookup("cpu.pi3.idle"); ok {
		t.Fatal("Label defined a tag before any value")
	}
	if err := tab.Write(ctx, []model.Point{{Tag: "cpu.pi3.idle", T: 1, V: 97}}, "lineproto"); err != nil {
		t.Fatal(err)
	}
	d, ok := tab.Def(cur2id(t, tab, "cpu.pi3.idle"))
	if !ok || !d.Labels.Equal(ls) || d.Source != "lineproto" {
		t.Fatalf("def of a labelled new tag: %+v", d)
	}
	if len(sink.got) != 2 {
		t.Fatalf("labels handed to the sink: %+v", sink.got)
	}
	// The same labels again do not reach the sink.
	if err := tab.Label(ctx, series); err != nil || sink.calls != 1 {
		t.Fatalf("unchanged labels: err %v, sink calls %d", err, sink.calls)
	}
	// A redefinition from the configuration keeps the pushed labels.
	if _, err := tab.Define(Def{Name: "plc.a", Unit: "mbar"}); err != nil {
		t.Fatal(err)
	}
	if d, _ := tab.Def(acq); d.Unit != "mbar" || d.Labels.Get("line") != "2" {
		t.Fatalf("redefined tag: %+v", d)
	}
	// A bad label set or name is refused whole, naming the tag.
	bad := model.Labels{{Name: "", Value: "x"}}
	err = tab.Label(ctx, []model.Series{{Tag: "ok.tag", Labels: ls}, {Tag: "bad.tag", Labels: bad}})
	var pe *model.PointError
	if !errors.As(err, &pe) || pe.Tag != "bad.tag" || !errors.Is(err, model.ErrLabels) {
		t.Fatalf("bad labels: %v", err)
	}
	err = tab.Label(ctx, []model.Series{{Tag: "bad name", Labels: ls}})
	if !errors.Is(err, ErrBadName) {
		t.Fatalf("bad name: %v", err)
	}
	if _, ok := tab.Lookup("ok.tag"); ok {
		t.Fatal("a refused call defined a tag")
	}
	// A sink failure leaves the table unchanged.
	sink.fail = errors.New("disk full")
	if err := tab.Label(ctx, []model.Series{{Tag: "new.tag", Labels: ls}}); !errors.Is(err, sink.fail) {
		t.Fatalf("sink failure: %v", err)
	}
	sink.fail = nil
	if err := tab.Write(ctx, []model.Point{{Tag: "new.tag", T: 1, V: 1}}, "x"); err != nil {
		t.Fatal(err)
	}
	if d, _ := tab.Def(cur2id(t, tab, "new.tag")); d.Labels != nil {
		t.Fatalf("labels a failed call kept: %v", d.Labels)
	}
}
