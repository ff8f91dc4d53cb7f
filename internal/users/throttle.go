package users

import (
	"math"
	"sync"
	"time"
)

// throttle limits failed sign-ins per key (an account name, or a client
// address): a bucket of burst attempts refilled at one per every. Only
// failures take from the bucket; a success empties nothing. Its memory is
// bounded: past max keys, the fullest buckets (those that would allow a
// whole burst anyway) are forgotten first, then any.
type throttle struct {
	burst float64
	every time.Duration
	max   int

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newThrottle(burst int, every time.Duration, max int) *throttle {
	return &throttle{burst: float64(burst), every: every, max: max, buckets: map[string]*bucket{}}
}

// wait returns how long key must wait before its next attempt; 0 means
// now.
func (t *throttle) wait(key string, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[key]
	if b == nil {
		return 0
	}
	tok := t.refill(b, now)
	if tok >= 1 {
		return 0
	}
	return time.Duration((1 - tok) * float64(t.every))
}

// fail takes one attempt from key's bucket.
func (t *throttle) fail(key string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buckets[key]
	if b == nil {
		if len(t.buckets) >= t.max {
			t.evict(now)
		}
		b = &bucket{tokens: t.burst, at: now}
		t.buckets[key] = b
	}
	b.tokens = math.Max(t.refill(b, now)-1, 0)
	b.at = now
}

// reset forgets key (a successful sign-in of the account).
func (t *throttle) reset(key string) {
	t.mu.Lock()
	delete(t.buckets, key)
	t.mu.Unlock()
}

func (t *throttle) refill(b *bucket, now time.Time) float64 {
	return math.Min(t.burst, b.tokens+float64(now.Sub(b.at))/float64(t.every))
}

// evict drops the full buckets, or, when none is full, half of all.
func (t *throttle) evict(now time.Time) {
	for k, b := range t.buckets {
		if t.refill(b, now) >= t.burst {
			delete(t.buckets, k)
		}
	}
	for k := range t.buckets {
		if len(t.buckets) < t.max/2 {
			break
		}
		delete(t.buckets, k)
	}
}
