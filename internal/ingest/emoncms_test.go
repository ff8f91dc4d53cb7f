package ingest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// memSink records every write.
type memSink struct {
	mu  sync.Mutex
	pts []model.Point
	n   int // writes
}

func (m *memSink) Write(_ context.Context, pts []model.Point) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pts = append(m.pts, pts...)
	m.n++
	return nil
}

func (m *memSink) take() []model.Point {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pts
	m.pts = nil
	sort.Slice(p, func(i, j int) bool {
		if p[i].T != p[j].T {
			return p[i].T < p[j].T
		}
		return p[i].Tag < p[j].Tag
	})
	return p
}

var emNow = time.UnixMilli(1_700_000_100_000)

func TestEmoncms(t *testing.T) {
	const now = 1_700_000_100_000
	tests := []struct {
		name       string
		method     string
		target     string
		form       string
		wantStatus int
		wantBody   string
		want       []model.Point
	}{
		{"json loose", "GET", "/input/post?node=emontx&json={power1:100,power2:200.5}", "", 200, "ok",
			[]model.Point{{Tag: "emontx.power1", T: now, V: 100}, {Tag: "emontx.power2", T: now, V: 200.5}}},
		{"json.json route", "GET", "/input/post.json?node=10&json=" + url.QueryEscape(`{"p1":1}`) + "&time=1700000000.5", "", 200, "ok",
			[]model.Point{{Tag: "10.p1", T: 1_700_000_000_500, V: 1}}},
		{"bare pairs", "GET", "/input/post?node=n&json=a:1,b:-2e1", "", 200, "ok",
			[]model.Point{{Tag: "n.a", T: now, V: 1}, {Tag: "n.b", T: now, V: -20}}},
		{"csv", "GET", "/input/post?node=5&csv=1,2,3", "", 200, "ok",
			[]model.Point{{Tag: "5.1", T: now, V: 1}, {Tag: "5.2", T: now, V: 2}, {Tag: "5.3", T: now, V: 3}}},
		{"data and node in path", "GET", "/input/post/emonpi?data=7", "", 200, "ok",
			[]model.Point{{Tag: "emonpi.1", T: now, V: 7}}},
		{"fulljson", "POST", "/input/post", "node=house&fulljson=" + url.QueryEscape(`{"power":350,"temp":"21.5","x":null}`), 200, `{"success": true}`,
			[]model.Point{{Tag: "house.power", T: now, V: 350}, {Tag: "house.temp", T: now, V: 21.5}}},
		{"default node", "GET", "/input/post?csv=4", "", 200, "ok", []model.Point{{Tag: "0.1", T: now, V: 4}}},
		{"no data", "GET", "/input/post?node=1", "", 200, `{"success": false, "message": "Request contains no data via csv, json or data tag"}`, nil},
		{"not numeric", "GET", "/input/post?node=1&json=a:x", "", 200, `{"success": false, "message": "Format error, json value is not numeric"}`, nil},
		{"csv not numeric", "GET", "/input/post?node=1&csv=1,x", "", 200, `{"success": false, "message": "Format error: csv value is not numeric"}`, nil},
		{"key missing", "GET", "/input/post?node=1&json=:1", "", 200, `{"success": false, "message": "Format error, json key missing or invalid character"}`, nil},
		{"bad fulljson", "GET", "/input/post?node=1&fulljson=" + url.QueryEscape("{bad"), "", 200, `{"success": false, "message": "Error decoding JSON string (invalid or too deeply nested)"}`, nil},
		{"bulk legacy", "POST", "/input/bulk.json", "data=" + url.QueryEscape("[[0,16,1137],[2,17,1437,3164],[4,19,1412,3077]]"), 200, "ok",
			[]model.Point{{Tag: "16.1", T: now - 4000, V: 1137}, {Tag: "17.1", T: now - 2000, V: 1437}, {Tag: "17.2", T: now - 2000, V: 3164},
				{Tag: "19.1", T: now, V: 1412}, {Tag: "19.2", T: now, V: 3077}}},
		{"bulk sentat", "POST", "/input/bulk", "data=" + url.QueryEscape(`[[520,16,1137],[535,"emontx","",{"t":2}]]`) + "&sentat=543", 200, "ok",
			[]model.Point{{Tag: "16.1", T: now - 23000, V: 1137}, {Tag: "emontx.t", T: now - 8000, V: 2}}},
		{"bulk offset", "GET", "/input/bulk?data=" + url.QueryEscape("[[-10,16,1],[-6,19,2]]") + "&offset=-10", "", 200, "ok",
			[]model.Point{{Tag: "16.1", T: now, V: 1}, {Tag: "19.1", T: now + 4000, V: 2}}},
		{"bulk time", "GET", "/input/bulk?data=" + url.QueryEscape("[[-10,16,1],[-6,19,2,3]]") + "&time=1387730127", "", 200, "ok",
			[]model.Point{{Tag: "16.1", T: 1387730117000, V: 1}, {Tag: "19.1", T: 1387730121000, V: 2}, {Tag: "19.2", T: 1387730121000, V: 3}}},
		{"time out of range", "GET", "/input/post?node=1&csv=1&time=1e300", "", 200, `{"success": false, "message": "Format error, time '1e300' is not a number"}`, nil},
		// Each offset alone is in range; their sum is not and must not wrap.
		{"bulk time plus offset out of range", "GET", "/input/bulk?data=" + url.QueryEscape("[[9.2e15,16,1]]") + "&time=9.2e15", "", 200,
			`{"success": false, "message": "Format error, item 1: timestamp 9200000000000000000 ms +9200000000000000000 ms out of range"}`, nil},
		{"bulk sentat out of range", "GET", "/input/bulk?data=" + url.QueryEscape("[[0,16,1]]") + "&sentat=-9.223372e15", "", 200,
			`{"success": false, "message": "Format error, sentat '-9.223372e15': timestamp 1700000100000 ms +9223372000000000000 ms out of range"}`, nil},
		{"bulk invalid", "GET", "/input/bulk?data=[", "", 200, `{"success": false, "message": "Format error, json string supplied is not valid"}`, nil},
		{"bulk node object", "GET", "/input/bulk?data=" + url.QueryEscape(`[[0,{"a":1},1]]`), "", 200, `{"success": false, "message": "Format error, item 1: node must not be an object"}`, nil},
		{"unknown action", "GET", "/input/list", "", 404, "404 page not found\n", nil},
	}
	sink := &memSink{}
	opts := DefaultEmoncmsOptions()
	opts.Now = func() time.Time { return emNow }
	h := NewEmoncms(sink, opts)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body *strings.Reader
			if tc.form != "" {
				body = strings.NewReader(tc.form)
			} else {
				body = strings.NewReader("")
			}
			req := httptest.NewRequest(tc.method, tc.target, body)
			if tc.form != "" {
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus || rec.Body.String() != tc.wantBody {
				t.Fatalf("got %d %q, want %d %q", rec.Code, rec.Body, tc.wantStatus, tc.wantBody)
			}
			got := sink.take()
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("point %d: got %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestEmoncmsTagCap(t *testing.T) {
	sink := &memSink{}
	clock := emNow
	opts := DefaultEmoncmsOptions()
	opts.Gate = NewTagGate(nil, 3, func() time.Time { return clock })
	h := NewEmoncms(sink, opts)
	do := func(q string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/input/post?node=n&"+q, nil))
		return rec
	}
	if rec := do("csv=1,2"); rec.Body.String() != "ok" {
		t.Fatalf("first: %d %s", rec.Code, rec.Body)
	}
	rec := do("csv=1,2,3,4")
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "'n.4'") || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("over the cap: got %d %s %v", rec.Code, rec.Body, rec.Header())
	}
	if rec := do("csv=5,6,7"); rec.Body.String() != "ok" {
		t.Fatalf("known and one new: %d %s", rec.Code, rec.Body)
	}
	clock = clock.Add(time.Minute)
	if rec := do("csv=1,2,3,4,5,6"); rec.Body.String() != "ok" {
		t.Fatalf("after a minute: %d %s", rec.Code, rec.Body)
	}
	if got := len(sink.take()); got != 2+3+6 {
		t.Errorf("stored %d points, want 11", got)
	}
}
