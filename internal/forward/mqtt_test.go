package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pith-historian/pith/internal/testpeer"
	"math"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// mqttURL returns the test broker's URL, or skips. Run it with
//
//	PITH_TEST_MQTT=tcp://127.0.0.1:1883 go test -run MQTT ./internal/forward/
func mqttURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("PITH_TEST_MQTT")
	if u == "" {
		testpeer.Missing(tb, "PITH_TEST_MQTT is not set (e.g. 127.0.0.1:1883 with mosquitto)")
	}
	if !strings.Contains(u, "://") {
		u = "tcp://" + u // CI gives host:port
	}
	return u
}

func TestMQTTTopic(t *testing.T) {
	for _, tt := range []struct{ prefix, tag, want string }{
		{"pith", "hx.t_out", "pith/hx/t_out"},
		{"pith/edge1", "pith.sys.cpu", "pith/edge1/pith/sys/cpu"},
		{"p", "a/b.c", "p/a/b/c"},
		{"p", "odd+tag#1", "p/odd_tag_1"},
	} {
		if got := mqttTopic(tt.prefix, tt.tag); got != tt.want {
			t.Errorf("mqttTopic(%q, %q) = %q, want %q", tt.prefix, tt.tag, got, tt.want)
		}
	}
}

func TestMQTTPayload(t *testing.T) {
	for _, tt := range []struct {
		p    model.Point
		want string
	}{
		{model.Point{T: 1700000000000, V: 61.5}, `{"ts":1700000000000,"value":61.5,"quality":"good"}`},
		{model.Point{T: -5, V: -1e300, Q: model.QualityBad}, `{"ts":-5,"value":-1e+300,"quality":"bad"}`},
		{model.Point{T: 0, V: math.NaN(), Q: model.QualityUncertain}, `{"ts":0,"value":null,"quality":"uncertain"}`},
		{model.Point{T: 1, V: math.Inf(1)}, `{"ts":1,"value":null,"quality":"good"}`},
		{model.Point{T: 1, V: 0.30000000000000004}, `{"ts":1,"value":0.30000000000000004,"quality":"good"}`},
	} {
		got := string(AppendMQTTPayload(nil, tt.p))
		if got != tt.want {
			t.Errorf("payload of %+v = %s, want %s", tt.p, got, tt.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("payload %s is not JSON", got)
		}
	}
}

// mqttMsg is one message a test subscriber received.
type mqttMsg struct {
	topic   string
	batch   string
	payload []byte
}

// subscribe connects a subscriber to filter at QoS 1 and returns the
// channel of what it receives, once the subscription is confirmed.
func subscribe(tb testing.TB, broker, filter string) <-chan mqttMsg {
	tb.Helper()
	u, err := url.Parse(broker)
	if err != nil {
		tb.Fatal(err)
	}
	msgs := make(chan mqttMsg, 100_000)
	subscribed := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		KeepAlive:                     30,
		CleanStartOnInitialConnection: true,
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			_, err := cm.Subscribe(sctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1}}})
			select {
			case subscribed <- err:
			default:
			}
		},
		ClientConfig: paho.ClientConfig{
			ClientID: fmt.Sprintf("pith-test-sub-%d", time.Now().UnixNano()),
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				m := mqttMsg{topic: pr.Packet.Topic, payload: pr.Packet.Payload}
				if pr.Packet.Properties != nil {
					m.batch = pr.Packet.Properties.User.Get(MQTTEntryProperty) + "/" + pr.Packet.Properties.User.Get(MQTTIndexProperty)
				}
				msgs <- m
				return true, nil
			}},
		},
	}
	cm, err := autopaho.NewConnection(ctx, cfg)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer dcancel()
		cm.Disconnect(dctx)
		cancel()
	})
	select {
	case err := <-subscribed:
		if err != nil {
			tb.Fatalf("subscribe to %s: %v", filter, err)
		}
	case <-time.After(20 * time.Second):
		tb.Fatalf("no subscription to %s within 20 s", filter)
	}
	return msgs
}

func newMQTTSink(tb testing.TB, broker, prefix string) *MQTTSink {
	tb.Helper()
	s, err := NewMQTTSink(MQTTOptions{URL: broker, Prefix: prefix, ClientID: fmt.Sprintf("pith-test-pub-%d", time.Now().UnixNano())}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

func TestMQTTSinkRoundTrip(t *testing.T) {
	broker := mqttURL(t)
	prefix := fmt.Sprintf("pithtest/%d", time.Now().UnixNano())
	msgs := subscribe(t, broker, prefix+"/#")
	s := newMQTTSink(t, broker, prefix)

	var pts []model.Point
	for i := range 2000 {
		pts = append(pts, model.Point{
			Tag: fmt.Sprintf("plant.unit%d.signal", i%7),
			T:   1_700_000_000_000 + int64(i),
			V:   float64(i) / 4,
			Q:   model.Quality(i % 3),
		})
	}
	if err := send(t, s, "edge1-3-42", pts); err != nil {
		t.Fatal(err)
	}
	// Every PUBACK arrived, so the broker has every message; it delivers
	// them to the subscriber on its own time.
	type payload struct {
		TS      int64    `json:"ts"`
		Value   *float64 `json:"value"`
		Quality string   `json:"quality"`
	}
	lastTS := map[string]int64{}
	got := map[string]int{} // topic and ts -> index in pts
	timeout := time.After(30 * time.Second)
	for len(got) < len(pts) {
		select {
		case m := <-msgs:
			var p payload
			if err := json.Unmarshal(m.payload, &p); err != nil {
				t.Fatalf("payload %s on %s: %v", m.payload, m.topic, err)
			}
			i := int(p.TS - 1_700_000_000_000)
			if want := fmt.Sprintf("edge1-3-42/%d", i); m.batch != want {
				t.Fatalf("message on %s has entry and index %q, want %s", m.topic, m.batch, want)
			}
			key := fmt.Sprint(m.topic, " ", p.TS)
			if _, dup := got[key]; dup {
				continue // QoS 1 may deliver twice
			}
			if p.TS <= lastTS[m.topic] {
				t.Fatalf("message on %s with ts %d after ts %d: out of order", m.topic, p.TS, lastTS[m.topic])
			}
			lastTS[m.topic] = p.TS
			if i < 0 || i >= len(pts) {
				t.Fatalf("unexpected message %s on %s", m.payload, m.topic)
			}
			want := pts[i]
			if wantTopic := prefix + "/" + strings.ReplaceAll(want.Tag, ".", "/"); m.topic != wantTopic ||
				p.Value == nil || *p.Value != want.V || p.Quality != want.Q.String() {
				t.Fatalf("message %s on %s, want %+v on %s", m.payload, m.topic, want, wantTopic)
			}
			got[key] = i
		case <-timeout:
			t.Fatalf("received %d of %d messages within 30 s", len(got), len(pts))
		}
	}
}

func TestMQTTSinkRefusals(t *testing.T) {
	if _, err := NewMQTTSink(MQTTOptions{URL: "http://127.0.0.1:1883"}, nil); err == nil {
		t.Error("NewMQTTSink accepted an http:// url")
	}
	if _, err := NewMQTTSink(MQTTOptions{URL: "tcp://127.0.0.1:1883", Prefix: "a/#"}, nil); err == nil {
		t.Error("NewMQTTSink accepted a wildcard prefix")
	}
	down, err := NewMQTTSink(MQTTOptions{URL: "tcp://127.0.0.1:1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	pts := []model.Point{{Tag: "a", T: 1, V: 1}}
	err = down.Send(ctx, pointsBatch("x-1-0", pts))
	if err == nil || errors.Is(err, ErrPermanent) {
		t.Errorf("send to a closed port: %v, want a retryable error", err)
	}
	// A delete cannot be applied over MQTT: counted, and the batch is
	// confirmed without a connection.
	err = down.Send(context.Background(), Batch{ID: "x-1-1", Entries: []Entry{{ID: "x-1-1", Delete: &Delete{Tag: "a", From: 0, To: 10}}}})
	if err != nil || down.SkippedDeletes() != 1 {
		t.Errorf("send of a delete: %v, %d skipped; want nil, 1", err, down.SkippedDeletes())
	}
}

// TestMQTTSinkForwarder forwards from a store, as pith serve does, and
// sees each value arrive once with its entry id.
func TestMQTTSinkForwarder(t *testing.T) {
	broker := mqttURL(t)
	prefix := fmt.Sprintf("pithtest/%d", time.Now().UnixNano())
	msgs := subscribe(t, broker, prefix+"/#")
	s := newMQTTSink(t, broker, prefix)
	h := openForwarder(t, t.TempDir(), testOptions("edge5"), s)
	for i := range 5 {
		if err := h.db.Write(context.Background(), []model.Point{{Tag: "x.y", T: int64(i), V: float64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for len(seen) < 5 {
		select {
		case m := <-msgs:
			if m.topic != prefix+"/x/y" || !strings.HasPrefix(m.batch, "edge5-") || !strings.HasSuffix(m.batch, "/0") {
				t.Fatalf("message on %s of entry %q", m.topic, m.batch)
			}
			seen[string(m.payload)] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("received %d of 5 values within 30 s", len(seen))
		}
	}
}

// BenchmarkMQTTSink measures messages published per second (each
// acknowledged by the broker) by Send with batches of 10,000 points over
// 100 tags. Run it with
//
//	PITH_TEST_MQTT=tcp://127.0.0.1:1883 go test -run x -bench MQTTSink -benchtime 20x ./internal/forward/
func BenchmarkMQTTSink(b *testing.B) {
	broker := mqttURL(b)
	s := newMQTTSink(b, broker, fmt.Sprintf("pithbench/%d", time.Now().UnixNano()))
	pts := benchPoints()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		if err := s.Send(ctx, pointsBatch(fmt.Sprint(n), pts)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*10_000)/b.Elapsed().Seconds(), "msgs/s")
}
