package report

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/pith-historian/pith/internal/energy"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/testpeer"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// openStore returns a store holding 1 kW on house.power, one sample a
// minute from from to to.
func openStore(t *testing.T, from, to time.Time) *store.DB {
	t.Helper()
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var pts []model.Point
	for ts := from; ts.Before(to); ts = ts.Add(time.Minute) {
		pts = append(pts, model.Point{Tag: "house.power", T: ts.UnixMilli(), V: 1})
		pts = append(pts, model.Point{Tag: "room.temp", T: ts.UnixMilli(), V: 20})
	}
	for i := 0; i < len(pts); i += 50_000 {
		if err := db.Write(context.Background(), pts[i:min(i+50_000, len(pts))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	return db
}

// received is what the webhook receiver got, in order.
type received struct {
	Key  string
	Meta meta
	File string
	Name string
}

// receiver is a real HTTP server reading the multipart reports; fail
// makes it answer 503.
type receiver struct {
	mu   sync.Mutex
	got  []received
	fail bool
	srv  *httptest.Server
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.fail {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		_, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil {
			t.Errorf("content type: %v", err)
			return
		}
		mr := multipart.NewReader(r.Body, params["boundary"])
		var got received
		got.Key = r.Header.Get("Idempotency-Key")
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Errorf("part: %v", err)
				return
			}
			b, _ := io.ReadAll(p)
			switch p.FormName() {
			case "report":
				if err := json.Unmarshal(b, &got.Meta); err != nil {
					t.Errorf("report part: %v", err)
				}
			case "file":
				got.File, got.Name = string(b), p.FileName()
			}
		}
		rc.got = append(rc.got, got)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) take() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	g := rc.got
	rc.got = nil
	return g
}

func mustLoc(t *testing.T) *time.Location {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("Europe/Berlin: %v", err)
	}
	return loc
}

func at(loc *time.Location, s string) time.Time {
	t, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		panic(err)
	}
	return t
}

// TestScheduleMonthlyDST runs a monthly and a weekly report on a fake
// clock in Europe/Berlin across both DST changes of 2026 and a restart:
// periods are local (October has 745 hours, the week of 29 March 167), a
// period is sent once its local end passed and not a minute before, a
// restart sends nothing twice, periods missed while stopped are all sent,
// and a sink that fails keeps its period owed.
func TestScheduleMonthlyDST(t *testing.T) {
	loc := mustLoc(t)
	db := openStore(t, at(loc, "2026-03-01 00:00"), at(loc, "2026-12-01 00:00"))
	rc := newReceiver(t)
	dir := t.TempDir()
	clk := &fakeClock{}
	scheds := []Schedule{
		{Name: "house", Every: energy.Month, Energy: []energy.Source{{Tag: "house.power", Kind: energy.Power, Scale: 1}}, Tags: []string{"room.temp"}},
		{Name: "week", Every: energy.Week, Energy: []energy.Source{{Tag: "house.power", Kind: energy.Power, Scale: 1}}},
	}
	open := func() *Scheduler {
		s, err := New(Options{DataDir: dir, Site: "home", Location: loc, Queries: db, Clock: clk,
			Senders: []Sender{&Webhook{URL: rc.srv.URL}}, Link: "https://pith.example"}, scheds)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ctx := context.Background()
	check := func(s *Scheduler, now string) []received {
		t.Helper()
		clk.Set(at(loc, now))
		if err := s.Check(ctx); err != nil {
			t.Fatalf("check at %s: %v", now, err)
		}
		return rc.take()
	}
	s := open()
	// First start on Wed 25 March: the last ended week (16-23 March) and
	// month (February) are owed and sent.
	got := check(s, "2026-03-25 12:00")
	if len(got) != 2 || got[0].Meta.Period != "2026-02" || got[1].Meta.Period != "2026-W12" {
		t.Fatalf("first start sent %+v", got)
	}
	// One minute before the local Monday 30 March: nothing.
	if got := check(s, "2026-03-29 23:59"); len(got) != 0 {
		t.Fatalf("sent before the week ended: %+v", got)
	}
	got = check(s, "2026-03-30 00:00")
	if len(got) != 1 || got[0].Meta.Period != "2026-W13" {
		t.Fatalf("week 13: %+v", got)
	}
	w := got[0].Meta
	if w.From != at(loc, "2026-03-23 00:00").UnixMilli() || w.To-w.From != 167*3_600_000 {
		t.Fatalf("week of the spring change: from %d to %d (%d h)", w.From, w.To, (w.To-w.From)/3_600_000)
	}
	if rows := csvRows(t, got[0].File); rows["total"][1] != "167" {
		t.Fatalf("week 13 total %v, want 167 kWh of 1 kW", rows["total"])
	}
	if got[0].Key != "home-week-"+itoa(w.From) || got[0].Name != "pith-report-week-2026-W13.csv" {
		t.Fatalf("key %q name %q", got[0].Key, got[0].Name)
	}
	lu, err := url.Parse(w.Link)
	if err != nil || lu.Host != "pith.example" || lu.Path != "/dashboard" || !strings.HasPrefix(lu.Fragment, "report?") {
		t.Fatalf("link %q", w.Link)
	}
	// Restart: nothing is sent twice.
	s = open()
	if got := check(s, "2026-03-30 00:05"); len(got) != 0 {
		t.Fatalf("restart sent again: %+v", got)
	}
	// The sink is down at the end of March: April's check fails and keeps
	// March owed, then the sink comes back.
	rc.mu.Lock()
	rc.fail = true
	rc.mu.Unlock()
	clk.Set(at(loc, "2026-04-01 00:00"))
	if err := s.Check(ctx); err == nil {
		t.Fatal("check with the sink down returned nil")
	}
	rc.mu.Lock()
	rc.fail = false
	rc.mu.Unlock()
	got = check(s, "2026-04-01 00:01")
	if len(got) != 1 || got[0].Meta.Period != "2026-03" {
		t.Fatalf("March after the outage: %+v", got)
	}
	if rows := csvRows(t, got[0].File); rows["total"][1] != "743" {
		t.Fatalf("March total %v, want 743 kWh (a 743-hour month)", rows["total"])
	}
	// Stopped from 1 April to 3 November (a SIGKILL leaves the state as
	// it was after the last send): every month and week in between is
	// sent, once, October with its 745 hours.
	s = open()
	got = check(s, "2026-11-03 09:00")
	months, weeks := 0, 0
	seen := map[string]bool{}
	for _, g := range got {
		if seen[g.Key] {
			t.Fatalf("sent twice: %s", g.Key)
		}
		seen[g.Key] = true
		if strings.Contains(g.Meta.Period, "W") {
			weeks++
		} else {
			months++
		}
		if g.Meta.Period == "2026-10" {
			if g.Meta.To-g.Meta.From != 745*3_600_000 {
				t.Fatalf("October is %d h", (g.Meta.To-g.Meta.From)/3_600_000)
			}
			if rows := csvRows(t, g.File); rows["total"][1] != "745" {
				t.Fatalf("October total %v", rows["total"])
			}
		}
	}
	// Weeks 14 (30 March) to 44 (26 October - 2 November): 31; months April to October: 7.
	if months != 7 || weeks != 31 {
		t.Fatalf("after the stop: %d months and %d weeks sent, want 7 and 31", months, weeks)
	}
	if got := check(s, "2026-11-03 09:30"); len(got) != 0 {
		t.Fatalf("sent again: %d", len(got))
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// csvRows maps the first cell of each row to the row.
func csvRows(t *testing.T, s string) map[string][]string {
	t.Helper()
	cr := csv.NewReader(strings.NewReader(s))
	cr.FieldsPerRecord = -1
	rows, err := cr.ReadAll()
	if err != nil {
		t.Fatalf("csv: %v\n%s", err, s)
	}
	m := map[string][]string{}
	for _, r := range rows {
		if len(r) > 0 {
			m[r[0]] = r
		}
	}
	return m
}

// TestScheduleMQTT sends a monthly report to the Mosquitto broker in
// PITH_TEST_MQTT and reads the retained message back: its CSV and link.
func TestScheduleMQTT(t *testing.T) {
	broker := os.Getenv("PITH_TEST_MQTT")
	if broker == "" {
		testpeer.Missing(t, "PITH_TEST_MQTT not set (e.g. 127.0.0.1:1883)")
	}
	if !strings.Contains(broker, "://") {
		broker = "tcp://" + broker
	}
	loc := mustLoc(t)
	db := openStore(t, at(loc, "2026-10-01 00:00"), at(loc, "2026-11-01 00:00"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic := "dash-test/reports/" + time.Now().Format("150405.000000")
	m, err := NewMQTT(ctx, MQTTOptions{Broker: broker, ClientID: "dash-report-pub"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	clk := &fakeClock{t: at(loc, "2026-11-01 00:00")}
	s, err := New(Options{DataDir: t.TempDir(), Site: "home", Location: loc, Queries: db, Clock: clk, Senders: []Sender{m}},
		[]Schedule{{Name: "house", Every: energy.Month, Topic: topic, Energy: []energy.Source{{Tag: "house.power", Kind: energy.Power, Scale: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	if next, ok := s.Next("house", "month", m.Name()); !ok || next != at(loc, "2026-11-01 00:00").UnixMilli() {
		t.Fatalf("next %d %v", next, ok)
	}
	got := make(chan []byte, 1)
	bu, _ := url.Parse(broker)
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls: []*url.URL{bu}, KeepAlive: 30, CleanStartOnInitialConnection: true,
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			_, _ = cm.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}})
		},
		ClientConfig: paho.ClientConfig{ClientID: "dash-report-sub",
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
		var j meta
		if err := json.Unmarshal(b, &j); err != nil {
			t.Fatal(err)
		}
		if j.Period != "2026-10" || !strings.HasPrefix(j.Link, "/dashboard#report?") || j.Filename != "pith-report-house-2026-10.csv" {
			t.Fatalf("message %+v", j)
		}
		if rows := csvRows(t, j.CSV); rows["total"][1] != "745" {
			t.Fatalf("total %v", rows["total"])
		}
	case <-ctx.Done():
		t.Fatal(errors.New("no retained report message"))
	}
	_, _ = m.cm.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Retain: true})
}

// TestRunPaused: a paused scheduler (the standby of a redundant pair)
// sends nothing while paused and the owed period once resumed.
func TestRunPaused(t *testing.T) {
	loc := mustLoc(t)
	db := openStore(t, at(loc, "2026-03-01 00:00"), at(loc, "2026-04-01 00:00"))
	rc := newReceiver(t)
	clk := &fakeClock{}
	clk.Set(at(loc, "2026-03-25 12:00"))
	var paused atomic.Bool
	paused.Store(true)
	s, err := New(Options{DataDir: t.TempDir(), Site: "home", Location: loc, Queries: db, Clock: clk,
		Senders: []Sender{&Webhook{URL: rc.srv.URL}}, Poll: 10 * time.Millisecond, Paused: paused.Load},
		[]Schedule{{Name: "house", Every: energy.Month, Energy: []energy.Source{{Tag: "house.power", Kind: energy.Power, Scale: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(300 * time.Millisecond)
	if got := rc.take(); len(got) != 0 {
		t.Fatalf("a paused scheduler sent %+v", got)
	}
	paused.Store(false)
	var got []received
	for end := time.Now().Add(10 * time.Second); len(got) == 0 && time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		got = append(got, rc.take()...)
	}
	if len(got) != 1 || got[0].Meta.Period != "2026-02" {
		t.Fatalf("resumed scheduler sent %+v, want February once", got)
	}
}
