package api

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestRateLimiterBucket(t *testing.T) {
	l := NewRateLimiter(RateOptions{Rate: 2, Burst: 3})
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for i := range 3 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Allow("a")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("4th request: ok=%v wait=%v, want refused, 500ms", ok, wait)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another client was limited by the first")
	}
	now = now.Add(500 * time.Millisecond) // one token back at 2/s
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("refused after refill")
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("allowed with an empty bucket")
	}
	now = now.Add(time.Hour) // refills to Burst, not beyond
	for range 3 {
		l.Allow("a")
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("bucket grew past Burst")
	}
}

func TestRateLimiterForgetsIdle(t *testing.T) {
	l := NewRateLimiter(RateOptions{Rate: 1, Burst: 1, IdleDrop: time.Minute, MaxKeys: 4})
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	for _, c := range []string{"a", "b", "c", "d", "e", "f"} {
		l.Allow(c)
	}
	if n := len(l.buckets); n > 4 {
		t.Fatalf("%d buckets kept, MaxKeys 4", n)
	}
	now = now.Add(2 * time.Minute)
	l.Allow("g")
	if n := len(l.buckets); n != 1 {
		t.Fatalf("%d buckets after idle sweep, want 1", n)
	}
}

func TestRateLimiterWrap(t *testing.T) {
	l := NewRateLimiter(RateOptions{Rate: 0.5, Burst: 1})
	h := l.Wrap(okHandler)
	wantError(t, do(t, h, "GET", "/api/v1/data", nil, nil), 200, "")
	r := do(t, h, "GET", "/api/v1/data", nil, nil)
	wantError(t, r, http.StatusTooManyRequests, "rate limit of 0.5 requests/s")
	if got := r.header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q, want 2", got)
	}
	// Authenticated requests count per key, not per address.
	wp, _ := GenerateKey()
	a, _ := NewAuth([]Key{{"k", HashKey(wp), ScopeWrite}}, nil)
	hk := a.Wrap(l.Wrap(okHandler))
	wantError(t, do(t, hk, "GET", "/x", nil, map[string]string{"Authorization": "Bearer " + wp}), 200, "key=k")
	wantError(t, do(t, hk, "GET", "/x", nil, map[string]string{"Authorization": "Bearer " + wp}), 429, "rate limit")
}

func TestRateLimiterOff(t *testing.T) {
	l := NewRateLimiter(RateOptions{Rate: 0})
	for range 1000 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatal("limited with Rate 0")
		}
	}
}

// TestServeWithHeaderTimeout checks that a client which never finishes
// its headers is cut off, over a real connection.
func TestServeWithHeaderTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	lim := DefaultServerLimits()
	lim.ReadHeaderTimeout = 200 * time.Millisecond
	go func() { done <- ServeWith(ctx, ln, okHandler, lim, nil, nil) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n")) // no blank line: headers never end
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("server kept a connection with unfinished headers open for 30 s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeWith: %v", err)
	}
}
