package ingest

import (
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// newParseMQTT returns an MQTT input for calling parse directly, with the
// clock fixed at 2023-11-14T22:13:20Z.
func newParseMQTT(t testing.TB) *MQTT {
	t.Helper()
	opts := DefaultMQTTOptions()
	opts.Prefix = "emon/"
	opts.Now = func() time.Time { return time.UnixMilli(1_700_000_000_000) }
	m, err := NewMQTT(&memSink{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMQTTPayloadTimes checks the payload's time as every input takes
// one: finite Unix seconds that fit int64 milliseconds, anything else a
// refusal naming the range, never a wrapped time.
func TestMQTTPayloadTimes(t *testing.T) {
	m := newParseMQTT(t)
	for _, tt := range []struct {
		payload string
		want    int64  // time of the point when accepted
		err     string // part of the refusal
	}{
		{`{"x": 1, "time": 1700000000.25}`, 1_700_000_000_250, ""},
		{`{"x": 1, "time": "1700000000"}`, 1_700_000_000_000, ""},
		{`{"x": 1}`, 1_700_000_000_000, ""},
		{`{"x": 1, "time": 1e300}`, 0, "out of range"},
		{`{"x": 1, "time": -1e300}`, 0, "out of range"},
		{`{"x": 1, "time": 9.3e15}`, 0, "out of range"},
		{`{"x": 1, "time": "1e19"}`, 0, "out of range"},
		{`{"x": 1, "time": 1e400}`, 0, "bad time"},
		{`{"x": 1, "time": "NaN"}`, 0, "bad time"},
		{`{"x": 1, "time": null}`, 0, "bad time"},
	} {
		pts, err := m.parse(nil, "emon/node", []byte(tt.payload))
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, %v, want an error containing %q", tt.payload, pts, err, tt.err)
		case tt.err == "" && (err != nil || len(pts) != 1 || pts[0] != model.Point{Tag: "node.x", T: tt.want, V: 1}):
			t.Errorf("%s: %v, %v, want node.x at %d", tt.payload, pts, err, tt.want)
		}
	}
}

// FuzzMQTTPayload feeds arbitrary topics and payloads to the MQTT parser:
// it must not panic, and what it accepts must be points named per the
// rule. Seeded with the payloads of the MQTT tests:
//
//	go test -run '^$' -fuzz FuzzMQTTPayload ./internal/ingest/
func FuzzMQTTPayload(f *testing.F) {
	for _, seed := range []struct{ topic, payload string }{
		{"emon/probe/x", "1"},
		{"emon/emontx/power1", " 230.5\n"},
		{"emon/emontx", `{"power2": 12, "temp": "21.5", "time": 1700000000.25}`},
		{"emon/emontx/bad", "abc"},
		{"emon/emon pi/vrms", "240"},
		{"emon/node", `{"x": 1, "time": 1e300}`},
		{"emon/node", `{"x": 1, "time": "1700000000"}`},
		{"emon/node", `{"x": null, "y": true, "time": -1.5}`},
	} {
		f.Add(seed.topic, []byte(seed.payload))
	}
	m := newParseMQTT(f)
	f.Fuzz(func(t *testing.T, topic string, payload []byte) {
		pts, err := m.parse(nil, topic, payload)
		if err != nil {
			return
		}
		for _, p := range pts {
			if err := checkRule(p.Tag); err != nil {
				t.Fatalf("name %q: %v", p.Tag, err)
			}
		}
	})
}
