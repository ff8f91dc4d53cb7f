package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/testpeer"
)

func init() {
	scopeTable["/api/v1/admin/redundancy/step-down"] = struct{ get, post string }{"admin", "admin"}
	roleTable["/api/v1/admin/redundancy/step-down"] = struct{ get, post string }{"admin", "admin"}
	scopeTable["/api/v1/redundancy"] = struct{ get, post string }{"read", "admin"}
	roleTable["/api/v1/redundancy"] = struct{ get, post string }{"viewer", "admin"}
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := httpc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestRedundancyPair runs two agents as a pair on a real NATS server:
// exactly one is active; the standby mirrors the active's values into its
// tag table and archive without publishing them again (the stream holds
// each once); control requests to the standby get 503 naming the active;
// a step-down hands the lease over; a step-down on the standby is 409.
// Calculated tags and alarm notifications come from the active box only,
// before and after the step-down, and the alarm keeps its state across it.
// roleOf returns a pair box's pith.sys.redundancy.role: 1 active, 0 standby.
func roleOf(t testing.TB, in *instance) float64 {
	v, _ := in.latest(t, "pith.sys.redundancy.role")
	return v
}

// activeOf waits up to 15 s for one of a pair's two boxes to be active and
// returns its index in ins.
func activeOf(t testing.TB, ins []*instance) int {
	t.Helper()
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		for i, in := range ins {
			if roleOf(t, in) == 1 {
				return i
			}
		}
		if time.Now().After(end) {
			t.Fatal("no box active 15 s after start")
		}
	}
}

func TestRedundancyPair(t *testing.T) {
	url := testpeer.Env(t, "PITH_TEST_NATS", "nats://127.0.0.1:4222")
	site := fmt.Sprintf("redundancy%d", time.Now().UnixNano()%1_000_000_000)
	t.Cleanup(func() { dropRedundancy(url, site, "pith-redundancy-"+site+"-a", "pith-redundancy-"+site+"-b") })
	var ins []*instance
	nodes := []string{"a", "b"}
	hooks := map[*instance]*alarmHook{}
	nodeOf := map[*instance]string{}
	for _, node := range nodes {
		cfg := fwdConfig(t, site, t.TempDir())
		cfg.Redundancy = config.Redundancy{Group: site, Node: node, NATS: url, LeaseTTL: config.Duration(time.Second), URL: "http://box-" + node + ".example:8080"}
		cfg.Alarms.Enabled = true
		cfg.Alarms.Alarm = []config.AlarmDef{{Name: "plant.hi", Type: "hi", Tag: "plant.v", Limit: 40}}
		hook := newAlarmHook(t)
		cfg.Alarms.Webhook = []config.AlarmWebhook{{URL: hook.url}}
		cfg.Calc = []config.Calc{{Tag: "plant.double", Expr: "plant.v * 2"}}
		in := startInstance(t, cfg)
		ins = append(ins, in)
		hooks[in], nodeOf[in] = hook, node
	}
	a := activeOf(t, ins)
	act, sb := ins[a], ins[1-a]
	if roleOf(t, sb) != 0 {
		t.Fatal("both boxes report role 1")
	}
	base := time.Now().UnixMilli() - 10_000
	const n = 50
	for i := range n {
		act.update(t, []model.Point{{Tag: "plant.v", T: base + int64(i)*100, V: float64(i), Q: model.QualityGood}})
	}
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if sb.count(t, "plant.v", base, base+n*100) == n && act.count(t, "plant.v", base, base+n*100) == n {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("standby holds %d of %d mirrored samples", sb.count(t, "plant.v", base, base+n*100), n)
		}
	}
	// A text value reaches the standby, and the stream holds it once.
	resp, err := httpc.Post(act.base+"/write?precision=ms", "text/plain", strings.NewReader(fmt.Sprintf("plant state=\"RUNNING\" %d\n", base)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("line protocol on the active box: %d", resp.StatusCode)
	}
	textAt := func(in *instance) string {
		resp, err := httpc.Get(fmt.Sprintf("%s/api/v1/data?agg=raw&tag=plant.state&from=%d&to=%d", in.base, base, base+1))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	for end := time.Now().Add(15 * time.Second); !strings.Contains(textAt(sb), `"RUNNING"`); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the standby's plant.state: %s", textAt(sb))
		}
	}
	// Labels too: the standby's tag has them, and only the active box
	// published them (the standby's copy is a replica, not sent back).
	resp, err = httpc.Post(act.base+"/write?precision=ms", "text/plain", strings.NewReader(fmt.Sprintf("boiler,room=hall temp=61.5 %d\n", time.Now().UnixMilli())))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("labelled line protocol on the active box: %d %s", resp.StatusCode, b)
	}
	resp.Body.Close()
	labelsOn := func(in *instance) map[string]string {
		r, err := httpc.Get(in.base + "/api/v1/tags")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		var got struct {
			Tags []struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"tags"`
		}
		_ = json.NewDecoder(r.Body).Decode(&got)
		for _, tg := range got.Tags {
			if tg.Name == "boiler.hall.temp" {
				return tg.Labels
			}
		}
		return nil
	}
	for end := time.Now().Add(15 * time.Second); labelsOn(sb)["room"] != "hall"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the standby's labels of boiler.hall.temp: %v (the active box's: %v)", labelsOn(sb), labelsOn(act))
		}
	}
	if v, ok := sb.latest(t, "plant.v"); !ok || v != n-1 {
		t.Fatalf("standby's current plant.v = %v, %v; want %d", v, ok, n-1)
	}
	// The stream holds each value once: the standby did not publish what
	// it mirrored.
	time.Sleep(1500 * time.Millisecond)
	if got := streamPoints(t, url, "pith."+site+".samples", "plant.v"); got != n {
		t.Fatalf("the stream holds %d points of plant.v, want %d", got, n)
	}
	// (Two labelled writes, plant.state and boiler.hall.temp.)
	if by := streamLabelsBy(t, url, "pith."+site+".samples"); len(by) != 1 || by[nodeOf[act]] != 2 {
		t.Fatalf("labels messages in the stream by box: %v; want 2 from the active box %s only", by, nodeOf[act])
	}
	if by := streamPointsBy(t, url, "pith."+site+".samples", "plant.state"); len(by) != 1 || by[nodeOf[act]] != 1 {
		t.Fatalf("text values of plant.state in the stream by box: %v; want 1 from the active box %s", by, nodeOf[act])
	}
	// The calculated tag is computed by the active box only; the standby
	// holds the active's results.
	for end := time.Now().Add(15 * time.Second); sb.count(t, "plant.double", base, base+n*100) != n; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("standby holds %d of %d mirrored plant.double samples", sb.count(t, "plant.double", base, base+n*100), n)
		}
	}
	if by := streamPointsBy(t, url, "pith."+site+".samples", "plant.double"); len(by) != 1 || by[nodeOf[act]] != n {
		t.Fatalf("plant.double in the stream by box: %v; want %d from the active box %s only", by, n, nodeOf[act])
	}
	// Both boxes raised the alarm from the same values; an acknowledgement
	// on the standby reaches the active box.
	alarmState := func(in *instance) string {
		resp, err := httpc.Get(in.base + "/api/v1/alarms")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Alarms []struct{ ID, State string } `json:"alarms"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
			return ""
		}
		for _, a := range r.Alarms {
			if a.ID == "plant.hi" {
				return a.State
			}
		}
		return ""
	}
	for end := time.Now().Add(15 * time.Second); alarmState(act) != "active" || alarmState(sb) != "active"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("alarm states %q (active box) %q (standby), want both active", alarmState(act), alarmState(sb))
		}
	}
	for end := time.Now().Add(15 * time.Second); len(hooks[act].events()) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the active box sent no alarm notification")
		}
	}
	if code, body := post(t, sb.base+"/api/v1/alarms/ack", `{"id":"plant.hi"}`); code != http.StatusOK {
		t.Fatalf("ack on the standby: %d %s", code, body)
	}
	for end := time.Now().Add(15 * time.Second); alarmState(act) != "acknowledged"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after an ack on the standby the active box's alarm is %q", alarmState(act))
		}
	}
	for end := time.Now().Add(15 * time.Second); len(hooks[act].events()) < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("active box's notifications %v, want the raise and the acknowledgement", hooks[act].events())
		}
	}
	if got := hooks[act].events(); strings.Join(got, " ") != "plant.hi:raised plant.hi:acknowledged" {
		t.Fatalf("active box's notifications %v", got)
	}
	// A delete on the active box reaches the standby, and is not echoed
	// back and forth.
	req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("%s/api/v1/data?tag=plant.v&from=%d&to=%d", act.base, base, base+10*100), nil)
	resp, err = httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	for end := time.Now().Add(15 * time.Second); sb.count(t, "plant.v", base, base+n*100) != n-10; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after a delete of 10 samples the standby holds %d of %d", sb.count(t, "plant.v", base, base+n*100), n)
		}
	}
	time.Sleep(2 * time.Second)
	if d := streamDeletes(t, url, "pith."+site+".samples"); d > 2 {
		t.Fatalf("the stream holds %d delete messages for one delete: an echo", d)
	}
	code, body := post(t, sb.base+"/api/v1/control", `{"tag":"plant.v","value":1}`)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "active box") || !strings.Contains(body, "http://box-"+nodeOf[act]+".example:8080") {
		t.Fatalf("control on the standby: %d %s", code, body)
	}
	// The refusal is no device failure: no write alarm on the standby.
	if st, _ := alarmStateOf(t, sb, "write.plant.v"); st != "" {
		t.Fatalf("a control request refused by the standby raised write.plant.v there: %q", st)
	}
	// Pushed writes to the standby are refused (503 naming the active box
	// and its URL, Retry-After): none is stored on either box. The same
	// line protocol to the active box is stored there and mirrored.
	pushAt := time.Now().UnixMilli()
	for _, p := range []struct{ path, ctype, body string }{
		{"/write?precision=ms", "text/plain", fmt.Sprintf("pushed v=1 %d\n", pushAt)},
		{"/api/v2/write?precision=ms", "text/plain", fmt.Sprintf("pushed v=1 %d\n", pushAt)},
		{"/api/v1/import", "text/csv", fmt.Sprintf("pushed.v,%d,1\n", pushAt)},
		{"/input/post?node=pushed&fulljson=%7B%22v%22%3A1%7D&time=" + fmt.Sprint(pushAt/1000), "text/plain", ""},
		{"/api/v1/write", "application/x-protobuf", ""},
	} {
		resp, err := httpc.Post(sb.base+p.path, p.ctype, strings.NewReader(p.body))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Error     string `json:"error"`
			Active    string `json:"active"`
			ActiveURL string `json:"active_url"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || err != nil || r.Active != nodeOf[act] ||
			r.ActiveURL != "http://box-"+nodeOf[act]+".example:8080" || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("POST %s on the standby: %d %+v (Retry-After %q), want 503 naming the active box %s and its URL",
				p.path, resp.StatusCode, r, resp.Header.Get("Retry-After"), nodeOf[act])
		}
	}
	if code, body := post(t, act.base+"/write?precision=ms", fmt.Sprintf("pushed v=2 %d\n", pushAt+1)); code != http.StatusNoContent {
		t.Fatalf("line protocol on the active box: %d %s", code, body)
	}
	for end := time.Now().Add(15 * time.Second); sb.count(t, "pushed.v", pushAt, pushAt+2) != 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the standby holds %d pushed.v samples, want the active's one", sb.count(t, "pushed.v", pushAt, pushAt+2))
		}
	}
	if n := act.count(t, "pushed.v", pushAt, pushAt+2); n != 1 {
		t.Fatalf("the active box holds %d pushed.v samples, want 1: a refused push was stored", n)
	}
	if v, ok := sb.latest(t, "pushed.v"); !ok || v != 2 {
		t.Fatalf("the standby's pushed.v = %v, %v; want the active's 2", v, ok)
	}
	for _, b := range []struct{ base, want string }{{act.base, `"role":"active"`}, {sb.base, `"role":"standby"`}} {
		resp, err := httpc.Get(b.base + "/api/v1/redundancy")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), b.want) || !strings.Contains(string(body), `"pair":true`) {
			t.Fatalf("GET /api/v1/redundancy: %d %s, want %s", resp.StatusCode, body, b.want)
		}
	}
	if code, body := post(t, sb.base+"/api/v1/admin/redundancy/step-down", ""); code != http.StatusConflict {
		t.Fatalf("step-down on the standby: %d %s", code, body)
	}
	if code, body := post(t, act.base+"/api/v1/admin/redundancy/step-down", ""); code != http.StatusOK {
		t.Fatalf("step-down on the active: %d %s", code, body)
	}
	start := time.Now()
	for roleOf(t, sb) != 1 || roleOf(t, act) != 0 {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("after a step-down: roles %v (old active) %v (old standby)", roleOf(t, act), roleOf(t, sb))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("step-down handed over, seen in the system tags after %s", time.Since(start).Round(time.Millisecond))

	// The new active box kept the alarm's state and sends the
	// notifications now; the old one computes nothing and sends nothing.
	if st := alarmState(sb); st != "acknowledged" {
		t.Fatalf("after the takeover the new active box's alarm is %q, want acknowledged", st)
	}
	oldSent := len(hooks[act].events())
	base2 := time.Now().UnixMilli()
	for i := range 10 {
		sb.update(t, []model.Point{{Tag: "plant.v", T: base2 + int64(i)*100, V: float64(i), Q: model.QualityGood}})
	}
	for end := time.Now().Add(15 * time.Second); act.count(t, "plant.double", base2, base2+1000) != 10; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the old active box holds %d of 10 mirrored plant.double samples", act.count(t, "plant.double", base2, base2+1000))
		}
	}
	for end := time.Now().Add(15 * time.Second); len(hooks[sb].events()) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("the new active box sent no notification of the clear")
		}
	}
	time.Sleep(1500 * time.Millisecond)
	if by := streamPointsBy(t, url, "pith."+site+".samples", "plant.double"); len(by) != 2 || by[nodeOf[act]] != n || by[nodeOf[sb]] != 10 {
		t.Fatalf("plant.double in the stream by box: %v; want %d from %s and 10 from %s", by, n, nodeOf[act], nodeOf[sb])
	}
	if got := hooks[sb].events(); strings.Join(got, " ") != "plant.hi:cleared" {
		t.Fatalf("new active box's notifications %v, want the clear only", got)
	}
	if got := hooks[act].events(); len(got) != oldSent {
		t.Fatalf("the old active box notified %v after it stood down", got[oldSent:])
	}
}

// streamPoints counts the points of tag in the stream's messages of subject.
func streamPoints(t *testing.T, url, subject, tag string) int {
	t.Helper()
	n := 0
	for _, c := range streamPointsBy(t, url, subject, tag) {
		n += c
	}
	return n
}

// streamPointsBy counts the points of tag in the stream's messages of
// subject by the box that published them (header Pith-Node).
func streamPointsBy(t *testing.T, url, subject, tag string) map[string]int {
	t.Helper()
	got := map[string]int{}
	eachStreamPoint(t, url, subject, tag, func(node string, _ int64) { got[node]++ })
	return got
}

// eachStreamMsg calls fn with each message of subject in the site's
// stream, in stream order: every message stored when it is called.
func eachStreamMsg(t *testing.T, url, subject string, fn func(m jetstream.Msg)) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name, err := js.StreamNameBySubject(ctx, subject)
	if err != nil {
		t.Fatal(err)
	}
	c, err := js.OrderedConsumer(ctx, name, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range info.NumPending {
		m, err := c.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatal(err)
		}
		fn(m)
	}
}

// eachStreamPoint calls fn with the box that published it (header
// Pith-Node) and the time of each value of tag (number or text) in the
// stream's messages of subject, in stream order.
func eachStreamPoint(t *testing.T, url, subject, tag string, fn func(node string, ts int64)) {
	t.Helper()
	eachStreamMsg(t, url, subject, func(m jetstream.Msg) {
		node := m.Headers().Get("Pith-Node")
		if m.Headers().Get("Pith-Kind") == "text" {
			_, tps, err := forward.DecodeTextBatch(nil, m.Data())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tps {
				if p.Tag == tag {
					fn(node, p.T)
				}
			}
			return
		}
		_, pts, err := forward.DecodeBatch(nil, m.Data())
		if err != nil {
			return // delete or labels
		}
		for _, p := range pts {
			if p.Tag == tag {
				fn(node, p.T)
			}
		}
	})
}

// streamLabelsBy counts the labels messages of subject in the stream by
// the box that published them.
func streamLabelsBy(t *testing.T, url, subject string) map[string]int {
	t.Helper()
	got := map[string]int{}
	eachStreamMsg(t, url, subject, func(m jetstream.Msg) {
		if m.Headers().Get("Pith-Op") == "labels" {
			got[m.Headers().Get("Pith-Node")]++
		}
	})
	return got
}

// streamDeletes counts the delete messages of subject in the stream.
func streamDeletes(t *testing.T, url, subject string) int {
	t.Helper()
	n := 0
	eachStreamMsg(t, url, subject, func(m jetstream.Msg) {
		if m.Headers().Get("Pith-Op") == "delete" {
			n++
		}
	})
	return n
}

// dropRedundancy removes what a pair left on the shared NATS server: its
// lease stream and its consumers of the site's stream.
func dropRedundancy(url, group string, durables ...string) {
	nc, err := nats.Connect(url)
	if err != nil {
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = js.DeleteStream(ctx, "PITH_REDUNDANCY_"+group)
	_ = js.DeleteStream(ctx, alarmStream(group))
	for _, d := range durables {
		_ = js.DeleteConsumer(ctx, forward.DefaultNATSStream, d)
	}
}

// TestRedundancyStatusSingle: a Pith outside a pair says so, so the
// dashboard hides its badge without asking for a tag it does not have.
func TestRedundancyStatusSingle(t *testing.T) {
	rec := httptest.NewRecorder()
	redundancyStatus{}.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/redundancy", nil))
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"pair":false}` {
		t.Fatalf("GET /api/v1/redundancy on a single Pith: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	redundancyStatus{}.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/redundancy", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /api/v1/redundancy: %d, want 405", rec.Code)
	}
}
