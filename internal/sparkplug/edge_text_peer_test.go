package sparkplug

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/tag"
)

// nullSink is an archive that stores nothing, text included, so that a
// table's WriteText works.
type nullSink struct{}

func (nullSink) Enqueue([]model.Point) bool                                         { return true }
func (nullSink) Write(context.Context, []model.Point) error                         { return nil }
func (nullSink) WriteMixed(context.Context, []model.Point, []model.TextPoint) error { return nil }

// TestEdgeTextReadByTahu publishes a text tag through Pith's edge node
// and reads it back with Eclipse Tahu's payload codec: a String metric in
// the birth, its changes as String data by alias, null when it turns bad;
// a command writing it is refused (the control path writes numbers).
func TestEdgeTextReadByTahu(t *testing.T) {
	broker := brokerURL(t)
	group := uniqueID("drivers-etxt")
	reader := startTahu(t, "host.js", broker, group)
	reader.await("subscribed", 10*time.Second)

	ctx := context.Background()
	tab := tag.New(nil, tag.DefaultOptions(), nullSink{})
	writeText := func(text string, q model.Quality) {
		t.Helper()
		if err := tab.WriteText(ctx, []model.TextPoint{{Tag: "plant.state", T: time.Now().UnixMilli(), Text: text, Q: q}}, "test"); err != nil {
			t.Fatal(err)
		}
	}
	writeText("Idle", model.QualityGood)
	if _, err := tab.Define(tag.Def{Name: "plant.level", Unit: "m"}); err != nil {
		t.Fatal(err)
	}
	setTag(t, tab, "plant.level", 2.5)
	ctl := &tableCtl{tab: tab}
	opts := DefaultEdgeOptions()
	opts.Broker, opts.Group, opts.Node, opts.Name = broker, group, "pith1", "etxt"
	opts.BdSeqFile = filepath.Join(t.TempDir(), "etxt.bdseq")
	opts.Tags, opts.Writable, opts.Interval = []string{"plant.*"}, []string{"plant.*"}, 20*time.Millisecond
	e, err := NewEdge(tab, ctl, opts)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(rctx) }()
	defer func() { cancel(); <-done }()
	base := "spBv1.0/" + group + "/"
	ms := metricsOf(reader.awaitMsg(base+"NBIRTH/pith1", 10*time.Second))
	if m := ms["plant/state"]; m == nil || m["type"] != "String" || m["value"] != "Idle" {
		t.Fatalf("birth metric plant/state: %v", m)
	}
	if m := ms["plant/level"]; m == nil || m["type"] != "Double" || m["value"] != 2.5 {
		t.Fatalf("birth metric plant/level: %v", m)
	}
	// The unit, as Tahu's codec decodes the property set.
	if p, _ := ms["plant/level"]["properties"].(map[string]any); p == nil || fmt.Sprint(p["engUnit"]) != "map[type:String value:m]" {
		t.Errorf("plant/level properties: %v, want engUnit m", ms["plant/level"]["properties"])
	}
	alias := ms["plant/state"]["alias"]

	writeText("Running", model.QualityGood)
	data := reader.awaitMsg(base+"NDATA/pith1", 5*time.Second)
	dm, _ := data["metrics"].([]any)
	if len(dm) != 1 || dm[0].(map[string]any)["alias"] != alias || dm[0].(map[string]any)["type"] != "String" || dm[0].(map[string]any)["value"] != "Running" {
		t.Fatalf("ndata %v", data)
	}
	writeText("Running", model.QualityBad)
	data = reader.awaitMsg(base+"NDATA/pith1", 5*time.Second)
	dm, _ = data["metrics"].([]any)
	if len(dm) != 1 {
		t.Fatalf("ndata of a bad text %v", data)
	}
	if v, has := dm[0].(map[string]any)["value"]; !has || v != nil {
		t.Fatalf("ndata of a bad text %v", data)
	}

	reader.send(map[string]any{"op": "publish", "topic": base + "NCMD/pith1", "metrics": []map[string]any{{"name": "plant/state", "type": "String", "value": "Stopped"}}})
	eventually(t, 5*time.Second, "refused write", func() bool { return e.Stats().Refused.Load() == 1 })
	if v, _ := tab.Latest("plant.state"); v[0].Text != "Running" {
		t.Errorf("plant.state written: %+v", v[0])
	}
}
