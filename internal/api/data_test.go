package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// loadedServer returns a server over a fake store holding a few samples.
func loadedServer(t *testing.T, opts Options) (*fakeStore, http.Handler) {
	t.Helper()
	st := newFakeStore()
	h := NewServer(st, opts, nil).Handler()
	body := "a.x,1000,1\na.x,1500,3\na.x,3000,10,uncertain\nb.y,2000,-2.5\n"
	r := do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader(body), nil)
	wantJSON(t, r, http.StatusOK, `{"points":4}`)
	return st, h
}

func TestData(t *testing.T) {
	_, h := loadedServer(t, DefaultOptions())
	tests := []struct {
		target string
		want   string
	}{
		{"/api/v1/data?tag=a.x&from=1000&to=4000&points=3",
			`{"tag":"a.x","agg":"mean","points":[[1000,2],[2000,null],[3000,10]]}`},
		{"/api/v1/data?tag=a.x&from=1000&to=4000&points=3&agg=max",
			`{"tag":"a.x","agg":"max","points":[[1000,3],[2000,null],[3000,10]]}`},
		{"/api/v1/data?tag=a.x&from=1000&to=4000&points=1&agg=count",
			`{"tag":"a.x","agg":"count","points":[[1000,3]]}`},
		{"/api/v1/data?tag=a.x&from=0&to=3000&agg=raw",
			`{"tag":"a.x","agg":"raw","points":[[1000,1],[1500,3]]}`},
		{"/api/v1/data?tag=a.x&from=0&to=5000&agg=raw&points=1",
			`{"tag":"a.x","agg":"raw","points":[[1000,1]],"truncated":true,"next":1500}`},
		{"/api/v1/data?tag=a.x&from=0&to=5000&agg=raw&points=3",
			`{"tag":"a.x","agg":"raw","points":[[1000,1],[1500,3],[3000,10]]}`},
		{"/api/v1/data?tag=a.x&from=1500&to=5000&agg=raw&points=2",
			`{"tag":"a.x","agg":"raw","points":[[1500,3],[3000,10]]}`},
		{"/api/v1/data?tag=b.y&from=0&to=3000&points=2&agg=min",
			`{"tag":"b.y","agg":"min","points":[[0,null],[1500,-2.5]]}`},
	}
	for _, tt := range tests {
		r := do(t, h, http.MethodGet, tt.target, nil, nil)
		wantJSON(t, r, http.StatusOK, tt.want)
	}
}

func TestDataDefaultPoints(t *testing.T) {
	_, h := loadedServer(t, DefaultOptions())
	r := do(t, h, http.MethodGet, "/api/v1/data?tag=a.x&from=0&to=100000", nil, nil)
	wantJSON(t, r, http.StatusOK, "")
	var got struct {
		Agg    string          `json:"agg"`
		Points [][]json.Number `json:"points"`
	}
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Agg != "mean" || len(got.Points) != 1000 {
		t.Errorf("agg %q, %d points; want mean and 1000", got.Agg, len(got.Points))
	}
}

func TestDataErrors(t *testing.T) {
	_, h := loadedServer(t, DefaultOptions())
	tests := []struct {
		query   string
		status  int
		wantErr string
	}{
		{"from=0&to=10", 400, "parameter tag"},
		{"tag=a.x&to=10", 400, "parameter from"},
		{"tag=a.x&from=0", 400, "parameter to"},
		{"tag=a.x&from=x&to=10", 400, "parameter from"},
		{"tag=a.x&from=0&to=1.5", 400, "parameter to"},
		{"tag=a.x&from=10&to=10", 400, "parameter to must be greater than from"},
		{"tag=a.x&from=-9223372036854775808&to=9223372036854775807", 400, "parameters from and to"},
		{"tag=a.x&from=0&to=10&points=0", 400, "parameter points"},
		{"tag=a.x&from=0&to=10&points=100001", 400, "parameter points"},
		{"tag=a.x&from=0&to=10&points=abc", 400, "parameter points"},
		{"tag=a.x&from=0&to=10&agg=median", 400, "parameter agg"},
		{"tag=nope&from=0&to=10", 404, "unknown tag"},
		{"tag=nope&from=0&to=10&agg=raw", 404, "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			wantError(t, do(t, h, http.MethodGet, "/api/v1/data?"+tt.query, nil, nil), tt.status, tt.wantErr)
		})
	}
}

func TestMethods(t *testing.T) {
	_, h := loadedServer(t, DefaultOptions())
	for _, path := range []string{"/api/v1/data", "/api/v1/latest", "/api/v1/tags"} {
		r := do(t, h, http.MethodPost, path, nil, nil)
		wantError(t, r, http.StatusMethodNotAllowed, "POST")
		if got := r.header.Get("Allow"); got != "GET, HEAD" {
			t.Errorf("%s: Allow %q", path, got)
		}
	}
	wantError(t, do(t, h, http.MethodGet, "/api/v1/control", nil, nil), http.StatusMethodNotAllowed, "GET")
	wantError(t, do(t, h, http.MethodGet, "/api/v1/nothing", nil, nil), http.StatusNotFound, "/api/v1/nothing")
	if r := do(t, h, http.MethodHead, "/api/v1/tags", nil, nil); r.status != http.StatusOK {
		t.Errorf("HEAD status %d", r.status)
	}
}

func TestLatest(t *testing.T) {
	_, h := loadedServer(t, DefaultOptions())
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/latest", nil, nil), http.StatusOK,
		`{"values":[{"tag":"a.x","ts":3000,"value":10,"quality":"uncertain"},{"tag":"b.y","ts":2000,"value":-2.5,"quality":"good"}]}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/latest?tag=b.y", nil, nil), http.StatusOK,
		`{"values":[{"tag":"b.y","ts":2000,"value":-2.5,"quality":"good"}]}`)
	wantError(t, do(t, h, http.MethodGet, "/api/v1/latest?tag=b.y&tag=zz", nil, nil), http.StatusNotFound, "zz")
	wantError(t, do(t, h, http.MethodGet, "/api/v1/latest?tag=", nil, nil), http.StatusBadRequest, "parameter tag")
}

func TestTags(t *testing.T) {
	opts := DefaultOptions()
	opts.Meta = func(tag string) (TagMeta, bool) {
		if tag == "a.x" {
			return TagMeta{Unit: "degC", Description: `boiler "A" temperature`}, true
		}
		return TagMeta{}, false
	}
	_, h := loadedServer(t, opts)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/tags", nil, nil), http.StatusOK,
		`{"tags":[{"name":"a.x","first":1000,"last":3000,"unit":"degC","description":"boiler \"A\" temperature"},`+
			`{"name":"b.y","first":2000,"last":2000}]}`)
}

// TestTagsLabels checks that /api/v1/tags shows labels, the store's
// before the tag table's.
func TestTagsLabels(t *testing.T) {
	opts := DefaultOptions()
	opts.Meta = func(tag string) (TagMeta, bool) {
		return TagMeta{Source: "push", Labels: model.LabelsFrom("from", "table")}, true
	}
	st, h := loadedServer(t, opts)
	st.labels = map[string]model.Labels{"a.x": model.LabelsFrom("__name__", "up", "job", `pi "3"`)}
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/tags", nil, nil), http.StatusOK,
		`{"tags":[{"name":"a.x","first":1000,"last":3000,"source":"push","labels":{"__name__":"up","job":"pi \"3\""}},`+
			`{"name":"b.y","first":2000,"last":2000,"source":"push","labels":{"from":"table"}}]}`)
}

func TestEmptyStore(t *testing.T) {
	h := NewServer(newFakeStore(), DefaultOptions(), nil).Handler()
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/tags", nil, nil), http.StatusOK, `{"tags":[]}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/latest", nil, nil), http.StatusOK, `{"values":[]}`)
}

func TestAccessLog(t *testing.T) {
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h := NewServer(newFakeStore(), DefaultOptions(), log).Handler()
	do(t, h, http.MethodGet, "/api/v1/data?tag=q", nil, nil)
	got := logBuf.String()
	for _, want := range []string{"http request", "path=/api/v1/data", "status=400"} {
		if !strings.Contains(got, want) {
			t.Errorf("access log %q lacks %q", got, want)
		}
	}
}

// TestStoreClosed checks that queries on a closed store answer 503.
func TestStoreClosed(t *testing.T) {
	h := NewServer(closedStore{newFakeStore()}, DefaultOptions(), nil).Handler()
	wantError(t, do(t, h, http.MethodGet, "/api/v1/data?tag=a&from=0&to=1", nil, nil), http.StatusServiceUnavailable, "closed")
}

type closedStore struct{ *fakeStore }

func (closedStore) Aggregate(string, int64, int64, int, model.Agg) ([]store.Bucket, error) {
	return nil, store.ErrClosed
}
