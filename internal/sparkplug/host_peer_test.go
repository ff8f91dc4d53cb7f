package sparkplug

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/model"
)

// TestHostWithTahuEdgeNode runs Eclipse Tahu's edge node (npm
// sparkplug-client) through Mosquitto against Pith's host: births, data
// by alias, a device, a sequence gap answered with a rebirth request the
// Tahu client receives, a device death, the node's death (its will,
// sent by the broker when the process dies), and the host's STATE
// birth and will.
func TestHostWithTahuEdgeNode(t *testing.T) {
	broker := brokerURL(t)
	group, nodeID, hostID := uniqueID("grp"), "edge1", uniqueID("pith")
	sink := &memSink{}
	opts := DefaultHostOptions()
	opts.Broker, opts.Groups, opts.HostID, opts.RebirthWait = broker, []string{group}, hostID, 100*time.Millisecond
	opts.BatchDelay = 10 * time.Millisecond
	opts.Writable = []string{"*.Count", "*.Flow"}
	h, err := NewHost(sink, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	stopHost := func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	defer func() {
		if ctx.Err() == nil {
			stopHost()
		}
		clearRetained(t, broker, "spBv1.0/STATE/"+hostID)
	}()
	eventually(t, 10*time.Second, "host subscribed", func() bool { return h.Stats().Subscribed.Load() > 0 })
	var state struct {
		Online    bool  `json:"online"`
		Timestamp int64 `json:"timestamp"`
	}
	eventually(t, 5*time.Second, "STATE online", func() bool {
		return json.Unmarshal([]byte(retained(t, broker, "spBv1.0/STATE/"+hostID)), &state) == nil && state.Online
	})
	if state.Timestamp <= 0 {
		t.Errorf("STATE timestamp %d", state.Timestamp)
	}
	// A late will of an earlier session says offline: the host says
	// online again.
	publishRetained(t, broker, "spBv1.0/STATE/"+hostID, StatePayload(false, state.Timestamp-1000))
	eventually(t, 5*time.Second, "STATE online again", func() bool {
		var st struct {
			Online bool `json:"online"`
		}
		return json.Unmarshal([]byte(retained(t, broker, "spBv1.0/STATE/"+hostID)), &st) == nil && st.Online
	})

	edge := startTahu(t, "edge.js", broker, group, nodeID)
	edge.await("connected", 10*time.Second)
	tag := func(path string) string { return group + "." + nodeID + "." + path }
	birth := []map[string]any{
		{"name": "Inputs/Temp", "alias": 1, "type": "Double", "value": 20.5},
		{"name": "Inputs/Count", "alias": 2, "type": "Int32", "value": -3},
		{"name": "Inputs/Small", "alias": 3, "type": "Int8", "value": -5},
		{"name": "Inputs/Label", "alias": 4, "type": "String", "value": "text"},
		{"name": "Node Control/Rebirth", "type": "Boolean", "value": false},
	}
	edge.send(map[string]any{"op": "nbirth", "metrics": birth})
	sink.waitValue(t, tag("Inputs.Temp"), 20.5, model.QualityGood)
	sink.waitValue(t, tag("Inputs.Count"), -3, model.QualityGood)
	sink.waitValue(t, tag("Inputs.Small"), -5, model.QualityGood)
	if _, ok := sink.latest(tag("Inputs.Label")); ok {
		t.Error("a String metric was stored")
	}
	if h.Stats().SkippedBy(SkipText) == 0 {
		t.Error("the String metric was not counted")
	}

	// Data by alias only, with a metric timestamp kept (an older one: a
	// late value, stored but not current).
	ts := time.Now().Add(-time.Minute).UnixMilli()
	edge.send(map[string]any{"op": "ndata", "metrics": []map[string]any{{"alias": 1, "type": "Double", "value": 21.25, "timestamp": ts}}})
	eventually(t, 10*time.Second, "the value with its own timestamp", func() bool {
		p, ok := sink.find(tag("Inputs.Temp"), 21.25)
		return ok && p.T == ts
	})

	// A device.
	edge.send(map[string]any{"op": "dbirth", "device": "pump", "metrics": []map[string]any{{"name": "Flow", "alias": 10, "type": "Float", "value": 1.5}}})
	sink.waitValue(t, tag("pump.Flow"), 1.5, model.QualityGood)
	edge.send(map[string]any{"op": "ddata", "device": "pump", "metrics": []map[string]any{{"alias": 10, "type": "Float", "value": 2.5}}})
	sink.waitValue(t, tag("pump.Flow"), 2.5, model.QualityGood)

	// A sequence gap: the host asks for a rebirth, which Tahu's client
	// receives as an NCMD; the value of the message is still stored.
	edge.send(map[string]any{"op": "skip", "n": 3})
	edge.send(map[string]any{"op": "ndata", "metrics": []map[string]any{{"alias": 1, "type": "Double", "value": 22}}})
	ncmd := edge.await("ncmd", 10*time.Second)
	ms, _ := ncmd["metrics"].([]any)
	if len(ms) != 1 || ms[0].(map[string]any)["name"] != MetricRebirth || ms[0].(map[string]any)["value"] != true {
		t.Fatalf("ncmd %v, want %s = true", ncmd, MetricRebirth)
	}
	if h.Stats().Gaps.Load() != 1 || h.Stats().Rebirths.Load() != 1 {
		t.Errorf("gaps %d rebirths %d", h.Stats().Gaps.Load(), h.Stats().Rebirths.Load())
	}
	sink.waitValue(t, tag("Inputs.Temp"), 22, model.QualityGood)
	// The edge node answers with its births.
	birth[0]["value"] = 23.0
	edge.send(map[string]any{"op": "nbirth", "metrics": birth})
	sink.waitValue(t, tag("Inputs.Temp"), 23, model.QualityGood)
	edge.send(map[string]any{"op": "dbirth", "device": "pump", "metrics": []map[string]any{{"name": "Flow", "alias": 10, "type": "Float", "value": 3.5}}})
	sink.waitValue(t, tag("pump.Flow"), 3.5, model.QualityGood)

	// Control: an NCMD in the metric's type, answered once the node
	// reports the value (Tahu's client is a library: the test answers for
	// the device, as an application on it would).
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	werr := make(chan error, 1)
	go func() { werr <- h.Control(wctx, tag("Inputs.Count"), 12, "test") }()
	cmd := edge.await("ncmd", 10*time.Second)
	cm, _ := cmd["metrics"].([]any)
	if len(cm) != 1 || cm[0].(map[string]any)["name"] != "Inputs/Count" || cm[0].(map[string]any)["type"] != "Int32" || cm[0].(map[string]any)["value"] != 12.0 {
		t.Fatalf("ncmd %v", cmd)
	}
	select {
	case err := <-werr:
		t.Fatalf("control returned before the node reported the value: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	edge.send(map[string]any{"op": "ndata", "metrics": []map[string]any{{"alias": 2, "type": "Int32", "value": 12}}})
	if err := <-werr; err != nil {
		t.Fatalf("control: %v", err)
	}
	// A device metric: a DCMD.
	go func() { werr <- h.Control(wctx, tag("pump.Flow"), 4.5, "test") }()
	dcmd := edge.await("dcmd", 10*time.Second)
	if dm, _ := dcmd["metrics"].([]any); dcmd["device"] != "pump" || len(dm) != 1 || dm[0].(map[string]any)["value"] != 4.5 {
		t.Fatalf("dcmd %v", dcmd)
	}
	edge.send(map[string]any{"op": "ddata", "device": "pump", "metrics": []map[string]any{{"alias": 10, "type": "Float", "value": 4.5}}})
	if err := <-werr; err != nil {
		t.Fatalf("control of a device metric: %v", err)
	}
	for _, c := range []struct {
		tag  string
		v    float64
		want error
	}{
		{tag("Inputs.Temp"), 1, api.ErrControlForbidden},
		{tag("Inputs.Count"), 1.5, api.ErrControlValue},
		{"other.tag", 1, ErrNotHostTag},
	} {
		if err := h.Control(wctx, c.tag, c.v, "test"); !errors.Is(err, c.want) {
			t.Errorf("control %s = %v: %v, want %v", c.tag, c.v, err, c.want)
		}
	}

	// A device death turns the device's metrics bad.
	edge.send(map[string]any{"op": "ddeath", "device": "pump"})
	sink.waitValue(t, tag("pump.Flow"), 4.5, model.QualityBad)
	if p, _ := sink.latest(tag("Inputs.Temp")); p.Q != model.QualityGood {
		t.Errorf("a device death turned the node bad: %+v", p)
	}

	// The process dies: the broker sends its NDEATH will, and every
	// metric of the node turns bad at once.
	edge.send(map[string]any{"op": "kill"})
	sink.waitValue(t, tag("Inputs.Temp"), 23, model.QualityBad)
	sink.waitValue(t, tag("Inputs.Count"), 12, model.QualityBad)
	sink.waitValue(t, tag("Inputs.Small"), -5, model.QualityBad)
	if h.Stats().Bad.Load() != 0 {
		t.Errorf("%d messages could not be read: %v", h.Stats().Bad.Load(), h.Stats().LastError.Load())
	}

	// A clean stop says offline with the birth's timestamp.
	stopHost()
	var off struct {
		Online    bool  `json:"online"`
		Timestamp int64 `json:"timestamp"`
	}
	msg := retained(t, broker, "spBv1.0/STATE/"+hostID)
	if err := json.Unmarshal([]byte(msg), &off); err != nil || off.Online || off.Timestamp != state.Timestamp {
		t.Errorf("STATE after stop %q, want offline with timestamp %d", msg, state.Timestamp)
	}
	if strings.Contains(msg, "true") {
		t.Errorf("STATE %q", msg)
	}
}
