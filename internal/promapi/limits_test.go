package promapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
)

// rangeForm asks for every boiler.temp value at a 1 s step over 1000 s:
// about 1000 samples.
var rangeForm = url.Values{"query": {`boiler_temp{tag="boiler.temp"}`}, "start": {"1000"}, "end": {"2000"}, "step": {"1"}}

// TestMaxSamplesPerQuery checks that a query holding more samples than
// MaxSamples gets 422 in Prometheus's error shape, and a smaller one passes.
func TestMaxSamplesPerQuery(t *testing.T) {
	for _, tt := range []struct {
		max  int
		code int
	}{{100, 422}, {5000, 200}} {
		opts := DefaultOptions()
		opts.MaxSamples = tt.max
		h := New(openStore(t, endpointPoints()), opts, nil)
		a := get(t, h, "/api/v1/query_range", rangeForm, false)
		if a.code != tt.code {
			t.Errorf("max_samples %d: status %d %s, want %d", tt.max, a.code, a.body, tt.code)
		}
		if tt.code == 422 && (a.Status != "error" || a.ErrorType != "execution" || !strings.Contains(a.Error, "too many samples")) {
			t.Errorf("max_samples %d: answer %s, want an execution error about too many samples", tt.max, a.body)
		}
	}
}

// TestAdmission checks the query queue: one query runs, one waits, the
// next is refused at once with 503 and Retry-After; the waiting one runs
// when the first leaves, and one that waits too long is refused too.
func TestAdmission(t *testing.T) {
	a := newAdmission(1, 1, 300*time.Millisecond)
	req := httptest.NewRequest(http.MethodGet, "/api/v1/query", nil)
	if !a.enter(httptest.NewRecorder(), req) {
		t.Fatal("first query refused")
	}
	waited := make(chan bool)
	go func() { waited <- a.enter(httptest.NewRecorder(), req) }()
	for a.queued.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	rec := httptest.NewRecorder()
	start := time.Now()
	if a.enter(rec, req) {
		t.Fatal("query beyond the queue admitted")
	}
	if rec.Code != 503 || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), `"errorType":"unavailable"`) {
		t.Errorf("refusal: %d Retry-After %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if el := time.Since(start); el > 100*time.Millisecond {
		t.Errorf("refusal took %s, want at once", el)
	}
	a.leave()
	if !<-waited {
		t.Fatal("queued query refused although a slot freed")
	}
	rec = httptest.NewRecorder()
	if a.enter(rec, req) || rec.Code != 503 || rec.Header().Get("Retry-After") == "" {
		t.Errorf("query waiting past QueueWait: %d %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	a.leave()
}

// TestAdmissionConcurrent runs many queries at once against a handler
// that admits two: every one is answered 200 or 503 with Retry-After.
func TestAdmissionConcurrent(t *testing.T) {
	opts := DefaultOptions()
	opts.MaxConcurrent, opts.MaxQueued, opts.QueueWait = 2, 2, 50*time.Millisecond
	h := New(openStore(t, endpointPoints()), opts, nil)
	var wg sync.WaitGroup
	codes := make(chan int, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/query_range?"+rangeForm.Encode(), nil))
			if rec.Code == 503 && rec.Header().Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
			codes <- rec.Code
		}()
	}
	wg.Wait()
	close(codes)
	ok := 0
	for c := range codes {
		switch c {
		case 200:
			ok++
		case 503:
		default:
			t.Errorf("status %d", c)
		}
	}
	if ok == 0 {
		t.Error("no query succeeded")
	}
}

// fakeBudget is a Reserver of max bytes.
type fakeBudget struct {
	mu        sync.Mutex
	max, used int64
}

func (b *fakeBudget) TryAcquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

func (b *fakeBudget) Release(n int64) { b.mu.Lock(); b.used -= n; b.mu.Unlock() }
func (b *fakeBudget) Largest() int64  { return b.max }

// TestAnswerBudget checks that a large answer is reserved from the
// budget while it is built (and returned after), refused with 503 and
// Retry-After when the budget is full now and with 422 when it never fits.
func TestAnswerBudget(t *testing.T) {
	for _, tt := range []struct {
		name      string
		max, used int64
		code      int
	}{
		{"fits", 1 << 20, 0, 200},
		{"full now", 1 << 20, 1<<20 - 1000, 503},
		{"never fits", 20 << 10, 0, 422},
	} {
		b := &fakeBudget{max: tt.max, used: tt.used}
		opts := DefaultOptions()
		opts.Budget = b
		h := New(openStore(t, endpointPoints()), opts, nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/query_range?"+rangeForm.Encode(), nil))
		if rec.Code != tt.code {
			t.Errorf("%s: status %d, want %d", tt.name, rec.Code, tt.code)
		}
		if tt.code == 503 && rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s: 503 without Retry-After", tt.name)
		}
		if b.used != tt.used {
			t.Errorf("%s: %d bytes still reserved after the answer, want %d", tt.name, b.used, tt.used)
		}
	}
}

// TestWorkBudget checks the memory reserved to evaluate a query before it
// runs: the series its selectors match times its steps, refused with 422
// when it could never fit the budget, returned after the answer.
func TestWorkBudget(t *testing.T) {
	b := &fakeBudget{max: 1 << 20}
	opts := DefaultOptions()
	opts.Budget = b
	h := NewHandler(openStore(t, endpointPoints()), opts, nil)
	expr, err := parser.ParseExpr(`boiler_temp{tag="boiler.temp"} + on() pump_flow`)
	if err != nil {
		t.Fatal(err)
	}
	// Two selectors, one series each, 1000 steps.
	if got, want := h.workSize(expr, 0, 10_000_000, 1000), int64(2*1000*querySampleBytes); got != want {
		t.Errorf("workSize = %d, want %d", got, want)
	}
	wide := url.Values{"query": {`{__name__=~".+"}`}, "start": {"1000"}, "end": {"10000"}, "step": {"1"}}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/query_range?"+wide.Encode(), nil))
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), "memory budget") {
		t.Errorf("query beyond the budget: %d %s, want 422 naming the memory budget", rec.Code, rec.Body)
	}
	if b.used != 0 {
		t.Errorf("%d bytes still reserved", b.used)
	}
}
