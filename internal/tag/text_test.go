package tag

import (
	"context"
	"errors"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// textSink is a recSink that also stores text.
type textSink struct {
	recSink
	texts []model.TextPoint
	err   error
}

func (s *textSink) WriteMixed(_ context.Context, pts []model.Point, texts []model.TextPoint) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.written = append(s.written, pts...)
	s.texts = append(s.texts, texts...)
	return nil
}

// TestWriteText: text is stored durably first, then becomes the current
// value and a change marked IsText; numbers for a text tag are refused by
// Update before the archive queue; a refused batch applies nothing.
func TestWriteText(t *testing.T) {
	sink := &textSink{}
	tab := New(nil, Options{}, sink)
	sub := tab.Subscribe(SubOptions{Name: "live"})
	ctx := context.Background()
	if err := tab.WriteMixed(ctx, []model.Point{{Tag: "line.speed", T: 1, V: 3}},
		[]model.TextPoint{{Tag: "line.state", T: 1, Text: "RUN"}, {Tag: "line.state", T: 2, Text: "STOP", Q: model.QualityUncertain}}, "lineproto"); err != nil {
		t.Fatal(err)
	}
	if err := tab.WriteText(ctx, []model.TextPoint{{Tag: "line.state", T: 0, Text: "late"}}, "lineproto"); err != nil {
		t.Fatal(err)
	}
	if len(sink.texts) != 3 || len(sink.written) != 1 {
		t.Fatalf("stored %d texts, %d numbers", len(sink.texts), len(sink.written))
	}
	v, err := tab.Latest("line.state", "line.speed")
	if err != nil {
		t.Fatal(err)
	}
	if !v[0].IsText || v[0].Text != "STOP" || v[0].T != 2 || v[0].Q != model.QualityUncertain || v[1].IsText || v[1].V != 3 {
		t.Fatalf("current values %+v", v)
	}
	var texts int
	for _, c := range sub.Take(nil) {
		if c.IsText {
			texts++
		}
	}
	if texts != 1 { // coalesced: the newest change of line.state
		t.Fatalf("%d text changes", texts)
	}
	id, _ := tab.Lookup("line.state")
	tab.Update([]Sample{{ID: id, T: 5, V: 1}})
	if st := tab.Stats(); st.WrongKind != 1 || len(sink.take()) != 0 {
		t.Fatalf("a number for a text tag: %+v", st)
	}
	sink.err = &model.PointError{Index: 0, Tag: "line.speed", Err: errors.New("kind")}
	if err := tab.WriteText(ctx, []model.TextPoint{{Tag: "line.state", T: 9, Text: "X"}}, "p"); err == nil {
		t.Fatal("refusal lost")
	}
	if v, _ := tab.Latest("line.state"); v[0].Text != "STOP" {
		t.Fatalf("a refused write was applied: %+v", v)
	}
	if err := New(nil, Options{}, &recSink{}).WriteText(ctx, []model.TextPoint{{Tag: "a", Text: "x"}}, "p"); !errors.Is(err, ErrNoArchive) {
		t.Fatalf("a sink without text: %v", err)
	}
	var pe *model.PointError
	if err := tab.WriteMixed(ctx, []model.Point{{Tag: "ok", T: 1}}, []model.TextPoint{{Tag: "bad name!", T: 1, Text: "x"}}, "p"); !errors.As(err, &pe) || pe.Index != 1 {
		t.Fatalf("a bad text tag name: %v", err)
	}
}
