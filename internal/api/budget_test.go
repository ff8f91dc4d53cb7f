package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBudgetHostileConcurrent sends many large requests at once to an
// endpoint that buffers its body and holds it: only as many as fit in the
// budget are admitted, the rest are refused at once (while the admitted
// ones still hold their bytes) with 503 and Retry-After, the budget never
// exceeds its size, and it is whole again afterwards.
func TestBudgetHostileConcurrent(t *testing.T) {
	const (
		budget  = 1 << 20
		maxBody = 512 << 10
		size    = 300 << 10 // 3 fit in the budget, a 4th does not
		clients = 20
		fit     = budget / size
	)
	b := NewBudget(budget)
	hold := make(chan struct{})
	entered := make(chan struct{}, clients)
	var peakMu sync.Mutex
	var peak int64
	h := b.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || len(body) != size {
			t.Errorf("handler read %d bytes, %v", len(body), err)
		}
		peakMu.Lock()
		peak = max(peak, b.InUse())
		peakMu.Unlock()
		entered <- struct{}{}
		<-hold
		w.WriteHeader(http.StatusNoContent)
	}), maxBody)

	type result struct {
		status int
		retry  string
	}
	results := make(chan result, clients)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := httptest.NewRequest(http.MethodPost, "/write", strings.NewReader(strings.Repeat("x", size)))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			results <- result{rec.Code, rec.Header().Get("Retry-After")}
		}()
	}
	// The refusals come back while the admitted requests still hold.
	deadline := time.After(10 * time.Second)
	for i := 0; i < clients-fit; i++ {
		select {
		case r := <-results:
			if r.status != http.StatusServiceUnavailable || r.retry == "" {
				t.Fatalf("refused request: status %d, Retry-After %q; want 503 with Retry-After", r.status, r.retry)
			}
		case <-deadline:
			t.Fatalf("only %d of %d refusals came back while admitted requests were held", i, clients-fit)
		}
	}
	for i := 0; i < fit; i++ {
		<-entered
	}
	if got := b.InUse(); got != fit*size {
		t.Errorf("in use %d while %d requests are held, want %d", got, fit, fit*size)
	}
	close(hold)
	wg.Wait()
	close(results)
	for r := range results {
		if r.status != http.StatusNoContent {
			t.Errorf("admitted request: status %d", r.status)
		}
	}
	if peak > budget {
		t.Errorf("peak in use %d beyond the budget %d", peak, budget)
	}
	if got := b.InUse(); got != 0 {
		t.Errorf("in use %d after every request ended, want 0", got)
	}
	if got := b.Refused(); got != clients-fit {
		t.Errorf("refused %d, want %d", got, clients-fit)
	}
}

// TestBudgetCost checks what each kind of request reserves, by the answer
// it gets from a budget with room for exactly one maxBody.
func TestBudgetCost(t *testing.T) {
	const maxBody = 1000
	tests := []struct {
		name   string
		budget int64
		body   io.Reader
		length int64 // Content-Length; -1 for chunked
		gzip   bool
		want   int // status
	}{
		{"no body", 10, nil, 0, false, http.StatusOK},
		{"declared, fits", maxBody, strings.NewReader("abc"), 3, false, http.StatusOK},
		{"chunked reserves maxBody", maxBody, strings.NewReader("abc"), -1, false, http.StatusOK},
		{"chunked beyond a small budget", maxBody - 1, strings.NewReader("abc"), -1, false, http.StatusRequestEntityTooLarge},
		{"gzip reserves maxBody", maxBody - 1, strings.NewReader("abc"), 3, true, http.StatusRequestEntityTooLarge},
		{"declared beyond maxBody is capped for the handler to refuse", maxBody, strings.NewReader(strings.Repeat("y", 2*maxBody)), 2 * maxBody, false, http.StatusOK},
		{"declared beyond the budget", 10, strings.NewReader(strings.Repeat("y", 20)), 20, false, http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBudget(tt.budget)
			var inside int64
			h := b.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				inside = b.InUse()
			}), maxBody)
			req := httptest.NewRequest(http.MethodPost, "/x", tt.body)
			req.ContentLength = tt.length
			if tt.gzip {
				req.Header.Set("Content-Encoding", "gzip")
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Fatalf("status %d, want %d (%s)", rec.Code, tt.want, rec.Body)
			}
			if tt.want == http.StatusOK {
				want := min(max(tt.length, 0), maxBody)
				if tt.length < 0 || tt.gzip {
					want = maxBody
				}
				if inside != want {
					t.Errorf("reserved %d while serving, want %d", inside, want)
				}
			}
			if b.InUse() != 0 {
				t.Errorf("in use %d after the request", b.InUse())
			}
		})
	}
}

// TestBudgetCosts checks what each wrapper reserves: the declared length
// capped at the limit, scaled by the memory a body byte costs; the limit
// for a compressed or undeclared body; the fixed buffer of a stream;
// nothing without a body; 413 when it could never fit.
func TestBudgetCosts(t *testing.T) {
	const budget = 1 << 20
	for _, tt := range []struct {
		name     string
		wrap     func(b *Budget, h http.Handler) http.Handler
		body     string
		length   int64 // -1: not declared
		encoding string
		want     int64 // bytes reserved while the handler runs
		code     int
	}{
		{"declared", func(b *Budget, h http.Handler) http.Handler { return b.Wrap(h, 1000) }, "abc", 3, "", 3, 204},
		{"capped", func(b *Budget, h http.Handler) http.Handler { return b.Wrap(h, 1000) }, "abc", 5000, "", 1000, 204},
		{"undeclared", func(b *Budget, h http.Handler) http.Handler { return b.Wrap(h, 1000) }, "abc", -1, "", 1000, 204},
		{"gzip", func(b *Budget, h http.Handler) http.Handler { return b.Wrap(h, 1000) }, "abc", 3, "gzip", 1000, 204},
		{"scaled", func(b *Budget, h http.Handler) http.Handler { return b.WrapScaled(h, 1000, 3) }, "abc", 3, "", 9, 204},
		{"scaled never fits", func(b *Budget, h http.Handler) http.Handler { return b.WrapScaled(h, budget, 2) }, "abc", -1, "", 0, 413},
		{"scaled gzip", func(b *Budget, h http.Handler) http.Handler { return b.WrapScaled(h, 1<<20, 2) }, "abc", 3, "gzip", 3 * MaxInflation * 2, 204},
		{"scaled gzip capped", func(b *Budget, h http.Handler) http.Handler { return b.WrapScaled(h, 1000, 2) }, "abc", 3000, "gzip", 2000, 204},
		{"stream", func(b *Budget, h http.Handler) http.Handler { return b.WrapStream(h, 4096, 10000) }, "abc", 3, "", 4099, 204},
		{"stream capped", func(b *Budget, h http.Handler) http.Handler { return b.WrapStream(h, 4096, 5000) }, "abc", 3000, "", 5000, 204},
		{"stream gzip", func(b *Budget, h http.Handler) http.Handler { return b.WrapStream(h, 4096, 10000) }, "abc", 3, "gzip", 4096 + 3*MaxInflation, 204},
		{"stream undeclared", func(b *Budget, h http.Handler) http.Handler { return b.WrapStream(h, 4096, 10000) }, "abc", -1, "", 10000, 204},
		{"stream no body", func(b *Budget, h http.Handler) http.Handler { return b.WrapStream(h, 4096, 10000) }, "", 0, "", 0, 204},
		{"no body", func(b *Budget, h http.Handler) http.Handler { return b.Wrap(h, 1000) }, "", 0, "", 0, 204},
	} {
		b := NewBudget(budget)
		var held int64 = -1
		h := tt.wrap(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			held = b.InUse()
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		}))
		req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(tt.body))
		req.ContentLength = tt.length
		if tt.length == 0 {
			req.Body = http.NoBody
		}
		if tt.encoding != "" {
			req.Header.Set("Content-Encoding", tt.encoding)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.code {
			t.Errorf("%s: status %d, want %d", tt.name, rec.Code, tt.code)
		}
		if tt.code == 204 && held != tt.want {
			t.Errorf("%s: %d bytes reserved, want %d", tt.name, held, tt.want)
		}
		if b.InUse() != 0 {
			t.Errorf("%s: %d bytes still reserved after the request", tt.name, b.InUse())
		}
	}
}

// TestBudgetSlowBody checks that a body trickled slower than MinBodyRate
// loses its reservation: the read fails at the deadline and the budget is
// whole again, while a streamed (WrapFixed) body is not hurried.
func TestBudgetSlowBody(t *testing.T) {
	b := NewBudget(1 << 20)
	b.grace = 300 * time.Millisecond
	readErr := make(chan error, 1)
	h := b.WrapScaled(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
	}), 1<<20, 1)
	srv := httptest.NewServer(h)
	defer srv.Close()
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("ab"))
		time.Sleep(2 * time.Second)
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, pr)
	req.ContentLength = 1000
	start := time.Now()
	go http.DefaultClient.Do(req)
	select {
	case err := <-readErr:
		if err == nil {
			t.Error("a trickled body was read whole")
		}
		if el := time.Since(start); el > 1500*time.Millisecond {
			t.Errorf("the slow body was cut after %s, want about 300ms", el)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a trickled body kept its reservation")
	}
	for b.InUse() != 0 && time.Since(start) < 3*time.Second {
		time.Sleep(10 * time.Millisecond)
	}
	if b.InUse() != 0 {
		t.Errorf("%d bytes still reserved", b.InUse())
	}
}

// TestKeepForSmall checks that large reservations leave the kept part of
// the budget to small ones, and that a large request that could only fit
// in the kept part is refused with 413.
func TestKeepForSmall(t *testing.T) {
	b := NewBudget(1000)
	b.KeepForSmall(200, 50)
	for _, tt := range []struct {
		n  int64
		ok bool
	}{
		{700, true},  // large: up to 800
		{150, false}, // large: 850 > 800
		{50, true},   // small: 750 <= 1000
		{50, true},   // 800
		{100, false}, // large again
		{50, true},   // small: 850
	} {
		if got := b.TryAcquire(tt.n); got != tt.ok {
			t.Errorf("TryAcquire(%d) at %d in use = %v, want %v", tt.n, b.InUse(), got, tt.ok)
		}
	}
	if got := b.Largest(); got != 800 {
		t.Errorf("Largest = %d, want 800", got)
	}
	h := b.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), 900)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(strings.Repeat("x", 850))))
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("850-byte body with 800 for large requests: %d, want 413", rec.Code)
	}
}

// TestBudgetTakePeak: the peak covers every reservation since the last
// call, even one released before it, and the next span starts from what
// is reserved then.
func TestBudgetTakePeak(t *testing.T) {
	b := NewBudget(100)
	if got := b.TakePeak(); got != 0 {
		t.Fatalf("fresh budget: peak %d, want 0", got)
	}
	b.TryAcquire(30)
	b.TryAcquire(50)
	b.Release(50)
	b.TryAcquire(10)
	if got := b.TakePeak(); got != 80 {
		t.Errorf("peak %d, want 80 (30+50, released since)", got)
	}
	if got := b.TakePeak(); got != 40 {
		t.Errorf("next peak %d, want 40 (what is reserved)", got)
	}
	b.Release(40)
	b.TakePeak()
	if got := b.TakePeak(); got != 0 {
		t.Errorf("after release: peak %d, want 0", got)
	}
}
