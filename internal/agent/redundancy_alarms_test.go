package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/tag"
	"github.com/pith-historian/pith/internal/testpeer"
)

// alarmHook is a webhook receiver recording "<alarm>:<event>" lines and
// the requests' Idempotency-Key; while fail is set it answers 500.
type alarmHook struct {
	mu   sync.Mutex
	evs  []string
	keys []string
	fail atomic.Bool
	url  string
}

func newAlarmHook(t *testing.T) *alarmHook {
	h := &alarmHook{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct{ Alarm, Event string }
		_ = json.NewDecoder(r.Body).Decode(&ev)
		h.mu.Lock()
		h.evs = append(h.evs, ev.Alarm+":"+ev.Event)
		h.keys = append(h.keys, r.Header.Get("Idempotency-Key"))
		h.mu.Unlock()
		if h.fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

func (h *alarmHook) events() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.evs...)
}

// key returns the Idempotency-Key of the first request for "<alarm>:<event>".
func (h *alarmHook) key(ev string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, e := range h.evs {
		if e == ev {
			return h.keys[i]
		}
	}
	return ""
}

// alarmStateOf returns the state of alarm id on in ("" when unknown) and
// who acknowledged it.
func alarmStateOf(t *testing.T, in *instance, id string) (state, by string) {
	t.Helper()
	resp, err := httpc.Get(in.base + "/api/v1/alarms")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Alarms []struct {
			ID, State string
			AckedBy   string `json:"acked_by"`
		} `json:"alarms"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return "", ""
	}
	for _, a := range r.Alarms {
		if a.ID == id {
			return a.State, a.AckedBy
		}
	}
	return "", ""
}

// TestRedundancyAckWhileDown: an acknowledgement made on the active box
// while the standby is stopped reaches the standby when it comes back
// (the pair's alarm stream keeps it), and the alarm is still acknowledged
// once that box has taken over. So is an alarm first raised and
// acknowledged while the standby was down: the standby takes its state
// from the stream, and does not raise it again when it mirrors the values
// it missed.
func TestRedundancyAckWhileDown(t *testing.T) {
	url := testpeer.Env(t, "PITH_TEST_NATS", "nats://127.0.0.1:4222")
	site := fmt.Sprintf("redundancyack%d", time.Now().UnixNano()%1_000_000_000)
	t.Cleanup(func() { dropRedundancy(url, site, "pith-redundancy-"+site+"-a", "pith-redundancy-"+site+"-b") })
	cfgs := map[string]*config.Config{}
	var ins []*instance
	for _, node := range []string{"a", "b"} {
		cfg := fwdConfig(t, site, t.TempDir())
		cfg.Redundancy = config.Redundancy{Group: site, Node: node, NATS: url, LeaseTTL: config.Duration(time.Second)}
		cfg.Alarms.Enabled = true
		cfg.Alarms.Alarm = []config.AlarmDef{{Name: "plant.hi", Type: "hi", Tag: "plant.v", Limit: 40}, {Name: "plant.lo", Type: "lo", Tag: "plant.v", Limit: 10}}
		cfgs[node] = cfg
		ins = append(ins, startInstance(t, cfg))
	}
	a := activeOf(t, ins)
	act, sb, sbNode := ins[a], ins[1-a], []string{"a", "b"}[1-a]
	act.update(t, []model.Point{{Tag: "plant.v", T: time.Now().UnixMilli(), V: 50, Q: model.QualityGood}})
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s1, _ := alarmStateOf(t, act, "plant.hi")
		s2, _ := alarmStateOf(t, sb, "plant.hi")
		if s1 == "active" && s2 == "active" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("alarm states %q (active box) %q (standby), want both active", s1, s2)
		}
	}
	sb.stop(t)
	if code, body := post(t, act.base+"/api/v1/alarms/ack", `{"id":"plant.hi"}`); code != http.StatusOK {
		t.Fatalf("ack on the active box: %d %s", code, body)
	}
	// plant.lo is raised and acknowledged while the standby is down.
	act.update(t, []model.Point{{Tag: "plant.v", T: time.Now().UnixMilli(), V: 5, Q: model.QualityGood}})
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st, _ := alarmStateOf(t, act, "plant.lo"); st == "active" {
			break
		}
		if time.Now().After(end) {
			t.Fatal("plant.lo not raised on the active box")
		}
	}
	if code, body := post(t, act.base+"/api/v1/alarms/ack", `{"id":"plant.lo"}`); code != http.StatusOK {
		t.Fatalf("ack of plant.lo on the active box: %d %s", code, body)
	}
	sb = startInstance(t, cfgs[sbNode])
	// Once the standby mirrored the value that raised plant.lo, plant.lo
	// is acknowledged there too, not raised again.
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		v, _ := sb.latest(t, "plant.v")
		st, by := alarmStateOf(t, sb, "plant.lo")
		if v == 5 && st == "acknowledged" && strings.Contains(by, "via redundancy peer") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("15 s after the standby came back: plant.v %v, plant.lo %q (by %q), want 5 and acknowledged by the other box", v, st, by)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if st, _ := alarmStateOf(t, sb, "plant.lo"); st != "acknowledged" {
		t.Fatalf("the standby's plant.lo went %q after it mirrored the values", st)
	}
	if st, _ := alarmStateOf(t, sb, "plant.hi"); st != "" {
		t.Fatalf("the standby's plant.hi is %q, want normal (acknowledged and cleared on the active box)", st)
	}
	// It takes over: the alarm stays acknowledged.
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		code, _ := post(t, act.base+"/api/v1/admin/redundancy/step-down", "")
		if code == http.StatusOK {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("step-down of the active box: %d", code)
		}
	}
	for end := time.Now().Add(15 * time.Second); roleOf(t, sb) != 1; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the box that came back did not take over after the step-down")
		}
	}
	if st, _ := alarmStateOf(t, sb, "plant.lo"); st != "acknowledged" {
		t.Fatalf("after the takeover plant.lo is %q, want acknowledged", st)
	}
}

// TestRedundancyAlarmTakeover: a box taking over notifies, once, what no
// box notified: the newest transition the old box logged but did not
// deliver (its webhook failed), with the Idempotency-Key the old box
// used, and what changed while no box judged (a value only the standby
// held, raised when it starts judging). What the old box did deliver is
// not sent again.
func TestRedundancyAlarmTakeover(t *testing.T) {
	url := testpeer.Env(t, "PITH_TEST_NATS", "nats://127.0.0.1:4222")
	site := fmt.Sprintf("redundancytake%d", time.Now().UnixNano()%1_000_000_000)
	t.Cleanup(func() { dropRedundancy(url, site, "pith-redundancy-"+site+"-a", "pith-redundancy-"+site+"-b") })
	var ins []*instance
	hooks := map[*instance]*alarmHook{}
	for _, node := range []string{"a", "b"} {
		cfg := fwdConfig(t, site, t.TempDir())
		cfg.Redundancy = config.Redundancy{Group: site, Node: node, NATS: url, LeaseTTL: config.Duration(time.Second)}
		cfg.Alarms.Enabled = true
		cfg.Alarms.Alarm = []config.AlarmDef{
			{Name: "plant.hi", Type: "hi", Tag: "plant.v", Limit: 40},
			{Name: "plant.lo", Type: "lo", Tag: "plant.v", Limit: 10},
			// local.v is given a value on the standby only.
			{Name: "local.hi", Type: "hi", Tag: "local.v", Limit: 40},
		}
		hook := newAlarmHook(t)
		cfg.Alarms.Webhook = []config.AlarmWebhook{{URL: hook.url, Attempts: 1}}
		in := startInstance(t, cfg)
		ins = append(ins, in)
		hooks[in] = hook
	}
	a := activeOf(t, ins)
	act, sb := ins[a], ins[1-a]
	// plant.lo is raised and delivered; then plant.hi is raised and
	// plant.lo cleared, and those notifications fail.
	act.update(t, []model.Point{{Tag: "plant.v", T: time.Now().UnixMilli(), V: 5, Q: model.QualityGood}})
	for end := time.Now().Add(15 * time.Second); !slices.Contains(hooks[act].events(), "plant.lo:raised"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("plant.lo not notified by the active box")
		}
	}
	hooks[act].fail.Store(true)
	act.update(t, []model.Point{{Tag: "plant.v", T: time.Now().UnixMilli(), V: 50, Q: model.QualityGood}})
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s1, _ := alarmStateOf(t, act, "plant.hi")
		s2, _ := alarmStateOf(t, sb, "plant.hi")
		if s1 == "active" && s2 == "active" && slices.Contains(hooks[act].events(), "plant.hi:raised") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("plant.hi: %q on the active box, %q on the standby, notifications %v", s1, s2, hooks[act].events())
		}
	}
	// The standby follows: a value only it holds (not archived, so not
	// mirrored) raises nothing there.
	id, err := sb.p.Table().Define(tag.Def{Name: "local.v"})
	if err != nil {
		t.Fatal(err)
	}
	sb.p.Table().Update([]tag.Sample{{ID: id, T: time.Now().UnixMilli(), V: 50, Q: model.QualityGood, NoArchive: true}})
	time.Sleep(500 * time.Millisecond)
	if st, _ := alarmStateOf(t, sb, "local.hi"); st != "" {
		t.Fatalf("the standby judged local.hi itself: %q", st)
	}
	if len(hooks[sb].events()) != 0 {
		t.Fatalf("the standby notified %v", hooks[sb].events())
	}
	oldSent := len(hooks[act].events())
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, _ := post(t, act.base+"/api/v1/admin/redundancy/step-down", ""); code == http.StatusOK {
			break
		}
		if time.Now().After(end) {
			t.Fatal("step-down of the active box refused for 20 s")
		}
	}
	want := []string{"local.hi:raised", "plant.hi:raised", "plant.lo:cleared"}
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := hooks[sb].events()
		slices.Sort(got)
		if slices.Equal(got, want) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the new active box notified %v, want %v", got, want)
		}
	}
	time.Sleep(1500 * time.Millisecond)
	got := hooks[sb].events()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("the new active box notified %v, want %v once each", got, want)
	}
	if k1, k2 := hooks[act].key("plant.hi:raised"), hooks[sb].key("plant.hi:raised"); k1 == "" || k1 != k2 {
		t.Fatalf("plant.hi's raise sent with Idempotency-Key %q by the old box, %q by the new one; want the same", k1, k2)
	}
	if got := hooks[act].events(); len(got) != oldSent {
		t.Fatalf("the old active box notified %v after it stood down", got[oldSent:])
	}
	// The old box, standing by, follows the new active box's raise.
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if st, by := alarmStateOf(t, act, "local.hi"); st == "active" {
			break
		} else if time.Now().After(end) {
			t.Fatalf("the old box's local.hi is %q (%q), want active as on the new active box", st, by)
		}
	}
}

// TestAlarmOutbox: a record whose publish fails is published once the
// server answers again, in the order the subjects first waited; a newer
// record of a subject replaces the one waiting; what waits when the part
// stops is still tried.
func TestAlarmOutbox(t *testing.T) {
	o := newAlarmOutbox()
	var mu sync.Mutex
	var got []string
	var down atomic.Bool
	down.Store(true)
	publish := func(_ context.Context, subject string, data []byte) error {
		if down.Load() {
			return errors.New("no server")
		}
		mu.Lock()
		got = append(got, subject+"="+string(data))
		mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.run(ctx, publish, 40*time.Millisecond, slog.New(slog.DiscardHandler))
	}()
	o.put("s.a", []byte("raised"))
	o.put("s.b", []byte("raised"))
	time.Sleep(100 * time.Millisecond)
	o.put("s.a", []byte("acknowledged"))
	down.Store(false)
	want := []string{"s.a=acknowledged", "s.b=raised"}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= len(want) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("published %q 10 s after the server came back, want %q", got, want)
		}
	}
	down.Store(true)
	o.put("s.c", []byte("cleared"))
	time.Sleep(50 * time.Millisecond)
	down.Store(false)
	cancel()
	<-done
	want = append(want, "s.c=cleared")
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Fatalf("published %q, want %q", got, want)
	}
}
