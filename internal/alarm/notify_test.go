package alarm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/pith-historian/pith/internal/testpeer"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/tag"
)

func TestWebhookRetries(t *testing.T) {
	var calls atomic.Int32
	got := make(chan Event, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		if r.Header.Get("Authorization") != "Bearer x" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "headers", http.StatusBadRequest)
			return
		}
		var ev Event
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		got <- ev
	}))
	defer srv.Close()
	h, err := ParseHeaders([]string{"Authorization: Bearer x"})
	if err != nil {
		t.Fatal(err)
	}
	w := &Webhook{URL: srv.URL, Header: h, RetryWait: time.Millisecond}
	if err := w.Notify(context.Background(), Event{Alarm: "a", Event: EventRaised, State: "active"}); err != nil {
		t.Fatal(err)
	}
	if ev := <-got; ev.Alarm != "a" || calls.Load() != 3 {
		t.Fatalf("event %+v after %d calls", ev, calls.Load())
	}

	// A 4xx other than 429 is not retried.
	calls.Store(100)
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer bad.Close()
	w = &Webhook{URL: bad.URL, RetryWait: time.Millisecond}
	if err := w.Notify(context.Background(), Event{Alarm: "a"}); err == nil || calls.Load() != 101 {
		t.Fatalf("403: err %v after %d calls", err, calls.Load()-100)
	}
}

// TestEngineRunNotifiesAndServes runs the engine on the wall clock with a
// webhook and checks the HTTP API end to end.
func TestEngineRunNotifiesAndServes(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev Event
		_ = json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		seen = append(seen, ev.Alarm+":"+ev.Event)
		mu.Unlock()
	}))
	defer hook.Close()
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	id, _ := tab.Define(tag.Def{Name: "boiler.temp"})
	hist, err := OpenLog(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer hist.Close()
	opts := DefaultOptions()
	opts.Scan = 10 * time.Millisecond
	opts.Notifiers = []Notifier{&Webhook{URL: hook.URL, RetryWait: time.Millisecond}}
	e, err := New([]Def{{Name: "boiler.hot", Kind: KindHi, Tag: "boiler.temp", Limit: 90, OnDelay: 20 * time.Millisecond}}, hist, tab, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	defer func() { cancel(); <-done }()

	tab.Update([]tag.Sample{{ID: id, T: time.Now().UnixMilli(), V: 95}})
	waitFor(t, "alarm raised", func() bool { return len(e.Current()) == 1 })
	waitFor(t, "count tags", func() bool {
		v, err := tab.Latest(TagActive, TagUnacked)
		return err == nil && v[0].V == 1 && v[1].V == 1
	})

	const key = "pith_test_key_operator1"
	sum := sha256.Sum256([]byte(key))
	auth, err := api.NewAuth([]api.Key{{Name: "operator1", Hash: "sha256:" + hex.EncodeToString(sum[:]), Scope: api.ScopeAdmin}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := auth.Wrap(e.Handler())
	do := func(method, url, body string, _ context.Context) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, url, strings.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := do(http.MethodGet, "/api/v1/alarms", "", context.Background())
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"id":"boiler.hot"`) || !strings.Contains(w.Body.String(), `"state":"active"`) {
		t.Fatalf("GET alarms: %d %s", w.Code, w.Body)
	}
	keyed := context.Background()
	if w := do(http.MethodPost, "/api/v1/alarms/ack", `{"id":"boiler.hot"}`, keyed); w.Code != 200 || !strings.Contains(w.Body.String(), `"acked_by":"operator1"`) {
		t.Fatalf("ack: %d %s", w.Code, w.Body)
	}
	for body, want := range map[string]int{`{"id":"boiler.hot"}`: 409, `{"id":"nope"}`: 404, `{}`: 400, `{"id":1}`: 400} {
		if w := do(http.MethodPost, "/api/v1/alarms/ack", body, keyed); w.Code != want {
			t.Errorf("ack %s: %d, want %d", body, w.Code, want)
		}
	}
	if w := do(http.MethodGet, "/api/v1/alarms/ack", "", keyed); w.Code != 405 {
		t.Errorf("GET ack: %d", w.Code)
	}
	tab.Update([]tag.Sample{{ID: id, T: time.Now().UnixMilli(), V: 20}})
	waitFor(t, "alarm normal", func() bool { return len(e.Current()) == 0 })
	w = do(http.MethodGet, "/api/v1/alarms?history=1&from=0", "", context.Background())
	var hresp struct{ Events []Event }
	if err := json.Unmarshal(w.Body.Bytes(), &hresp); err != nil || len(hresp.Events) != 3 || hresp.Events[1].Who != "operator1" {
		t.Fatalf("history: %s (%v)", w.Body, err)
	}
	if w := do(http.MethodGet, "/api/v1/alarms?history=1&from=x", "", context.Background()); w.Code != 400 {
		t.Errorf("bad from: %d", w.Code)
	}
	waitFor(t, "webhook got 3 events", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 3 })
	mu.Lock()
	if strings.Join(seen, ",") != "boiler.hot:raised,boiler.hot:acknowledged,boiler.hot:cleared" {
		t.Errorf("webhook saw %v", seen)
	}
	mu.Unlock()
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(giveUp) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestMQTTNotifier publishes to the broker in PITH_TEST_MQTT and reads the
// retained message back.
func TestMQTTNotifier(t *testing.T) {
	broker := os.Getenv("PITH_TEST_MQTT")
	if broker == "" {
		testpeer.Missing(t, "PITH_TEST_MQTT not set (e.g. 127.0.0.1:1883)")
	}
	if !strings.Contains(broker, "://") {
		broker = "tcp://" + broker // CI gives host:port
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topic := "pith-test/alarms/" + strings.ReplaceAll(t.Name(), "/", "_") + time.Now().Format("150405.000000")
	m, err := NewMQTT(ctx, MQTTOptions{Broker: broker, Topic: topic, ClientID: "pith-alarm-test-pub"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	v := 93.5
	if err := m.Notify(ctx, Event{Seq: 7, Alarm: "boiler.hot", Event: EventRaised, State: "active", Value: &v}); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	bu, err := url.Parse(broker)
	if err != nil {
		t.Fatal(err)
	}
	u := []*url.URL{bu}
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls: u, KeepAlive: 30, CleanStartOnInitialConnection: true,
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			_, _ = cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic + "/#", QoS: 1}}})
		},
		ClientConfig: paho.ClientConfig{ClientID: "pith-alarm-test-sub",
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				select {
				case got <- pr.Packet.Payload:
				default:
				}
				return true, nil
			}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Disconnect(context.Background())
	select {
	case b := <-got:
		var ev Event
		if err := json.Unmarshal(b, &ev); err != nil || ev.Seq != 7 || ev.Value == nil || *ev.Value != 93.5 {
			t.Fatalf("retained message %s: %v", b, err)
		}
	case <-ctx.Done():
		t.Fatal("no retained alarm message")
	}
	// Clear the retained message.
	_, _ = m.cm.Publish(ctx, &paho.Publish{Topic: m.Topic("boiler.hot"), QoS: 1, Retain: true})
}

// BenchmarkAlarmLateness measures, on the wall clock, how late an alarm
// with a 20 ms on-delay is raised after its delay expires: "engine" without
// a log, "fsync-log" with every event fsynced to the alarm log first (as
// served). Run: go test -run x -bench Lateness ./internal/alarm
func BenchmarkAlarmLateness(b *testing.B) {
	b.Run("engine", func(b *testing.B) { benchLateness(b, false) })
	b.Run("fsync-log", func(b *testing.B) { benchLateness(b, true) })
}

func benchLateness(b *testing.B, withLog bool) {
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	id, _ := tab.Define(tag.Def{Name: "x.v"})
	var hist *Log
	if withLog {
		var err error
		if hist, err = OpenLog(b.TempDir(), 1<<30); err != nil {
			b.Fatal(err)
		}
		defer hist.Close()
	}
	raised := make(chan time.Time, 1)
	opts := DefaultOptions()
	opts.Notifiers = []Notifier{notifyFunc(func(ev Event) {
		if ev.Event == EventRaised {
			raised <- time.Now()
		}
	})}
	const delay = 20 * time.Millisecond
	e, err := New([]Def{{Name: "a", Kind: KindHi, Tag: "x.v", Limit: 1, OnDelay: delay}}, hist, tab, opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = e.Run(ctx) }()
	lates := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		tab.Update([]tag.Sample{{ID: id, T: start.UnixMilli(), V: 5}})
		at := <-raised
		lates = append(lates, at.Sub(start)-delay)
		tab.Update([]tag.Sample{{ID: id, T: time.Now().UnixMilli(), V: 0}})
		for len(e.Current()) != 0 {
			if _, err := e.Ack("a", "bench"); err != nil {
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	slices.Sort(lates)
	b.ReportMetric(float64(lates[len(lates)/2].Microseconds())/1000, "ms-late-p50")
	b.ReportMetric(float64(lates[len(lates)*99/100].Microseconds())/1000, "ms-late-p99")
	b.ReportMetric(float64(lates[len(lates)-1].Microseconds())/1000, "ms-late-max")
}

type notifyFunc func(Event)

func (notifyFunc) Name() string { return "func" }

func (f notifyFunc) Notify(_ context.Context, ev Event) error { f(ev); return nil }
