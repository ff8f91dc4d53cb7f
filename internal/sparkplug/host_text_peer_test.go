package sparkplug

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/model"
)

// textSink is a memSink that stores text as the agent's push road does
// (refusing what the store refuses) and keeps the units births declare.
type textSink struct {
	memSink
	tmu   sync.Mutex
	texts []model.TextPoint
	units map[string]string
}

func (s *textSink) WriteMixed(ctx context.Context, pts []model.Point, texts []model.TextPoint) error {
	for i, p := range texts {
		if err := model.CheckText(p.Text); err != nil {
			return &model.PointError{Index: len(pts) + i, Tag: p.Tag, Err: err}
		}
	}
	s.tmu.Lock()
	s.texts = append(s.texts, texts...)
	s.tmu.Unlock()
	return s.memSink.Write(ctx, pts)
}

func (s *textSink) SetUnit(tag, unit string) error {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	if s.units == nil {
		s.units = map[string]string{}
	}
	s.units[tag] = unit
	return nil
}

// text returns the newest text point of tag.
func (s *textSink) text(tag string) (model.TextPoint, bool) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	for i := len(s.texts) - 1; i >= 0; i-- {
		if s.texts[i].Tag == tag {
			return s.texts[i], true
		}
	}
	return model.TextPoint{}, false
}

func (s *textSink) unit(tag string) string {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	return s.units[tag]
}

// TestHostTextAndUnitsWithTahu has Eclipse Tahu's edge node publish
// String and Text metrics and a metric with an engUnit property: the
// host stores the strings as text tags (a two-line one as one line, a
// 1,500-byte one cut to 1,024 bytes with quality uncertain), keeps the
// unit as the tag's metadata, turns the text bad with its last value on
// the node's death, and refuses a control write of a text tag.
func TestHostTextAndUnitsWithTahu(t *testing.T) {
	broker := brokerURL(t)
	group, nodeID := uniqueID("drivers-txt"), "edge1"
	sink := &textSink{}
	opts := DefaultHostOptions()
	opts.Broker, opts.Groups, opts.BatchDelay = broker, []string{group}, 10*time.Millisecond
	opts.Writable = []string{"*"}
	h, err := NewHost(sink, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, 10*time.Second, "host subscribed", func() bool { return h.Stats().Subscribed.Load() > 0 })

	edge := startTahu(t, "edge.js", broker, group, nodeID)
	edge.await("connected", 10*time.Second)
	tag := func(path string) string { return group + "." + nodeID + "." + path }
	long := strings.Repeat("y", 1500)
	edge.send(map[string]any{"op": "nbirth", "metrics": []map[string]any{
		{"name": "Batch/State", "alias": 1, "type": "String", "value": "Idle"},
		{"name": "Batch/Note", "alias": 2, "type": "Text", "value": "line one\nline two"},
		{"name": "Batch/Log", "alias": 3, "type": "String", "value": long},
		{"name": "Tank/Temp", "alias": 4, "type": "Double", "value": 20.5,
			"properties": map[string]any{"engUnit": map[string]any{"type": "String", "value": "degC"}}},
	}})
	sink.waitValue(t, tag("Tank.Temp"), 20.5, model.QualityGood)
	eventually(t, 10*time.Second, "text values", func() bool {
		_, ok := sink.text(tag("Batch.Log"))
		return ok
	})
	for name, want := range map[string]model.TextPoint{
		"Batch.State": {Text: "Idle", Q: model.QualityGood},
		"Batch.Note":  {Text: "line one line two", Q: model.QualityGood},
		"Batch.Log":   {Text: strings.Repeat("y", model.MaxTextLen-3) + "…", Q: model.QualityUncertain},
	} {
		if got, ok := sink.text(tag(name)); !ok || got.Text != want.Text || got.Q != want.Q {
			t.Errorf("%s = %.40q %v (%v), want %.40q %v", name, got.Text, got.Q, ok, want.Text, want.Q)
		}
	}
	eventually(t, 5*time.Second, "the unit kept", func() bool { return sink.unit(tag("Tank.Temp")) == "degC" })
	if h.Stats().SkippedBy(SkipText) != 0 {
		t.Errorf("%d text values skipped", h.Stats().SkippedBy(SkipText))
	}

	// Data by alias.
	edge.send(map[string]any{"op": "ndata", "metrics": []map[string]any{{"alias": 1, "type": "String", "value": "Running"}}})
	eventually(t, 10*time.Second, "the new state", func() bool { p, _ := sink.text(tag("Batch.State")); return p.Text == "Running" })

	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := h.Control(wctx, tag("Batch.State"), 1, "test"); !errors.Is(err, api.ErrControlValue) {
		t.Errorf("control of a text tag: %v, want ErrControlValue", err)
	}

	// The node dies: its text turns bad, the last text kept.
	edge.send(map[string]any{"op": "kill"})
	eventually(t, 15*time.Second, "text bad after the death", func() bool {
		p, _ := sink.text(tag("Batch.State"))
		return p.Q == model.QualityBad && p.Text == "Running"
	})
}
