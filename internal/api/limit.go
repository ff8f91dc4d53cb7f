package api

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RateOptions tune a RateLimiter. Start from DefaultRateOptions.
type RateOptions struct {
	Rate     float64       // requests per second each client may keep up; <= 0 turns limiting off
	Burst    int           // requests a client may send at once after being idle
	IdleDrop time.Duration // a client's bucket is forgotten after this long unused (it would be full again anyway)
	MaxKeys  int           // clients tracked at once; beyond it idle buckets are swept, then the oldest-looking are dropped
}

// DefaultRateOptions returns limits that a dashboard, Telegraf and a few
// dozen emonTx nodes never meet, while a runaway script is slowed.
func DefaultRateOptions() RateOptions {
	return RateOptions{
		Rate:     200,
		Burst:    400,
		IdleDrop: 5 * time.Minute,
		MaxKeys:  10_000,
	}
}

// RateLimiter is a token bucket per client: per API key name when the
// request was authenticated (Auth.Wrap ran first), else per client IP
// taken from the connection (X-Forwarded-For is not trusted: anyone can
// write it). It is safe for concurrent use.
type RateLimiter struct {
	opts RateOptions
	now  func() time.Time // replaced in tests

	mu      sync.Mutex // guards buckets and lastGC
	buckets map[string]*bucket
	lastGC  time.Time
}

// bucket holds tokens as of last.
type bucket struct {
	tokens float64
	last   time.Time
}

// NewRateLimiter returns a limiter. Zero fields of opts other than Rate
// take their DefaultRateOptions value.
func NewRateLimiter(opts RateOptions) *RateLimiter {
	def := DefaultRateOptions()
	if opts.Burst <= 0 {
		opts.Burst = max(def.Burst, int(math.Ceil(opts.Rate)))
	}
	if opts.IdleDrop <= 0 {
		opts.IdleDrop = def.IdleDrop
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = def.MaxKeys
	}
	return &RateLimiter{opts: opts, now: time.Now, buckets: make(map[string]*bucket)}
}

// Allow takes one token from client's bucket. When none is left it
// returns false and how long until one is.
func (l *RateLimiter) Allow(client string) (bool, time.Duration) {
	if l.opts.Rate <= 0 {
		return true, 0
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[client]
	if b == nil {
		l.gcLocked(now)
		b = &bucket{tokens: float64(l.opts.Burst), last: now}
		l.buckets[client] = b
	} else if el := now.Sub(b.last); el > 0 {
		b.tokens = min(float64(l.opts.Burst), b.tokens+el.Seconds()*l.opts.Rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.opts.Rate * float64(time.Second))
	return false, wait
}

// gcLocked forgets idle buckets, at most once per IdleDrop, or at once
// when the table is full. A full table of busy clients is cleared
// outright: that only happens under an address-spraying flood, and
// forgetting costs each client at most one extra burst.
func (l *RateLimiter) gcLocked(now time.Time) {
	full := len(l.buckets) >= l.opts.MaxKeys
	if !full && now.Sub(l.lastGC) < l.opts.IdleDrop {
		return
	}
	l.lastGC = now
	for k, b := range l.buckets {
		if now.Sub(b.last) >= l.opts.IdleDrop {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= l.opts.MaxKeys {
		clear(l.buckets)
	}
}

// Wrap returns h limited per client; a request over the limit gets 429
// with Retry-After in whole seconds (at least 1).
func (l *RateLimiter) Wrap(h http.Handler) http.Handler {
	if l.opts.Rate <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := KeyName(r.Context())
		if client != "" {
			client = "key:" + client
		} else {
			client = "ip:" + clientIP(r)
		}
		ok, wait := l.Allow(client)
		if !ok {
			secs := max(1, int(math.Ceil(wait.Seconds())))
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			writeError(w, http.StatusTooManyRequests,
				"rate limit of "+strconv.FormatFloat(l.opts.Rate, 'g', -1, 64)+" requests/s exceeded; retry after "+strconv.Itoa(secs)+" s")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// clientIP is the address of the connection's peer, without port.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
