package ingest

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/golang/snappy"
)

// labelSink is a memSink that keeps labels, as the tag table does.
type labelSink struct {
	memSink
	lmu    sync.Mutex
	labels map[string]model.Labels
	calls  int
	fail   error
}

func (s *labelSink) SetLabels(_ context.Context, series []model.Series) error {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	s.calls++
	if s.fail != nil {
		return s.fail
	}
	if s.labels == nil {
		s.labels = map[string]model.Labels{}
	}
	for _, x := range series {
		if err := x.Labels.Check(); err != nil {
			return &model.PointError{Tag: x.Tag, Err: err}
		}
		s.labels[x.Tag] = x.Labels
	}
	return nil
}

var _ Labeler = (*labelSink)(nil)

func postLP(t *testing.T, h http.Handler, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/write?precision=ms", strings.NewReader(body)))
	return rec
}

func postRW(t *testing.T, h http.Handler, series []testSeries) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(snappy.Encode(nil, encodeWriteRequest(series))))
	req.Header.Set("Content-Encoding", "snappy")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestLineProtocolLabels checks the labels of line-protocol points:
// measurement, field and tag keys, unescaped, sent once per series.
func TestLineProtocolLabels(t *testing.T) {
	sink := &labelSink{}
	h := NewLineProtocol(sink, DefaultLineProtocolOptions())
	body := "cpu,host=pi3,cpu=cpu0 usage_idle=97,usage_user=2 1000\n" +
		`boiler\ room,site=hall\ A,id=a\,b temp=61.5 1000` + "\n"
	if rec := postLP(t, h, body); rec.Code != http.StatusNoContent {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	want := map[string]model.Labels{
		"cpu.cpu0.pi3.usage_idle":     model.LabelsFrom("_measurement", "cpu", "_field", "usage_idle", "host", "pi3", "cpu", "cpu0"),
		"cpu.cpu0.pi3.usage_user":     model.LabelsFrom("_measurement", "cpu", "_field", "usage_user", "host", "pi3", "cpu", "cpu0"),
		"boiler_room.a_b.hall_A.temp": model.LabelsFrom("_measurement", "boiler room", "_field", "temp", "site", "hall A", "id", "a,b"),
	}
	if len(sink.labels) != len(want) {
		t.Fatalf("labels %v, want %v", sink.labels, want)
	}
	for tag, w := range want {
		if got := sink.labels[tag]; !got.Equal(w) {
			t.Errorf("labels of %s = %v, want %v", tag, got, w)
		}
	}
	// A series met before does not send its labels again.
	calls := sink.calls
	if rec := postLP(t, h, "cpu,host=pi3,cpu=cpu0 usage_idle=96 2000\n"); rec.Code != http.StatusNoContent {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if sink.calls != calls {
		t.Errorf("a known series sent its labels again")
	}
}

// TestLabelsRefused checks the clear errors: a reserved tag key, labels
// over the limits, and a sink failure that stores nothing and is retried.
func TestLabelsRefused(t *testing.T) {
	sink := &labelSink{}
	lp := NewLineProtocol(sink, DefaultLineProtocolOptions())
	rec := postLP(t, lp, "ok v=1 1\nm,_field=x v=1 1000\n")
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `tag key \"_field\" is reserved`) ||
		!strings.Contains(rec.Body.String(), `"line":2`) {
		t.Errorf("reserved key: %d %s", rec.Code, rec.Body)
	}
	// Label values are bounded by the tag name they form; long label
	// names are not, and meet the bytes-per-tag limit.
	big := []string{"__name__", "m"}
	for i := 0; i < 9; i++ {
		big = append(big, string(rune('a'+i))+strings.Repeat("k", 1000), "v")
	}
	rw := NewRemoteWrite(sink, DefaultRemoteWriteOptions())
	rec = postRW(t, rw, []testSeries{{big, []RWSample{{1, 1}}}})
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "bytes of labels, more than 8192") {
		t.Errorf("long label value: %d %s", rec.Code, rec.Body)
	}
	if got := sink.take(); len(got) != 0 {
		t.Fatalf("refused writes stored %v", got)
	}
	sink.fail = errors.New("disk on fire")
	series := []testSeries{{[]string{"__name__", "up", "job", "x"}, []RWSample{{1, 1}}}}
	if rec := postRW(t, rw, series); rec.Code != http.StatusInternalServerError {
		t.Errorf("sink failure: %d %s", rec.Code, rec.Body)
	}
	if got := sink.take(); len(got) != 0 {
		t.Fatalf("a failed label write stored points %v", got)
	}
	sink.fail = nil
	if rec := postRW(t, rw, series); rec.Code != http.StatusNoContent {
		t.Fatalf("retry: %d %s", rec.Code, rec.Body)
	}
	if got := sink.labels["up.x"]; !got.Equal(model.LabelsFrom("__name__", "up", "job", "x")) {
		t.Errorf("labels after the retry: %v", got)
	}
}

// TestRemoteWriteNames checks the remote_write naming rule: a label
// value's dots stay in one segment, and the labels are kept whole.
func TestRemoteWriteNames(t *testing.T) {
	sink := &labelSink{}
	h := NewRemoteWrite(sink, DefaultRemoteWriteOptions())
	series := []testSeries{
		{[]string{"__name__", "up", "instance", "127.0.0.1:18997", "job", "pith"}, []RWSample{{1, 1000}}},
		{[]string{"__name__", "http_request_duration_seconds_bucket", "le", "0.5", "job", "api"}, []RWSample{{3, 1000}}},
		{[]string{"__name__", "http_request_duration_seconds_bucket", "le", "+Inf", "job", "api"}, []RWSample{{4, 1000}}},
		{[]string{"__name__", "node_uname_info", "nodename", "pi.local", "empty", ""}, []RWSample{{1, 1000}}},
	}
	if rec := postRW(t, h, series); rec.Code != http.StatusNoContent {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	want := map[string]model.Labels{
		"up.127_0_0_1:18997.pith":                       model.LabelsFrom("__name__", "up", "instance", "127.0.0.1:18997", "job", "pith"),
		"http_request_duration_seconds_bucket.api.0_5":  model.LabelsFrom("__name__", "http_request_duration_seconds_bucket", "le", "0.5", "job", "api"),
		"http_request_duration_seconds_bucket.api._Inf": model.LabelsFrom("__name__", "http_request_duration_seconds_bucket", "le", "+Inf", "job", "api"),
		"node_uname_info.pi_local":                      model.LabelsFrom("__name__", "node_uname_info", "nodename", "pi.local"),
	}
	for tag, w := range want {
		if got, ok := sink.labels[tag]; !ok || !got.Equal(w) {
			t.Errorf("labels of %s = %v (%v), want %v", tag, got, ok, w)
		}
	}
	if len(sink.labels) != len(want) {
		t.Errorf("tags %v", sink.labels)
	}
}

func TestUnescapeLP(t *testing.T) {
	for in, want := range map[string]string{
		`plain`: "plain", `a\ b`: "a b", `a\,b\=c`: "a,b=c", `a\\b`: `a\b`, `a\nb`: `a\nb`, `end\`: `end\`,
	} {
		if got := unescapeLP([]byte(in)); got != want {
			t.Errorf("unescapeLP(%q) = %q, want %q", in, got, want)
		}
	}
}
