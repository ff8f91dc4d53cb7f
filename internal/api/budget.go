package api

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultBudgetBytes is the memory budget for request bodies in flight
// that suits a board with 1 GB of RAM: what every push endpoint may hold
// at once, together.
const DefaultBudgetBytes = 128 << 20

// budgetRetryAfter is the Retry-After of a request refused by the budget:
// bodies in flight are usually gone within a second.
const budgetRetryAfter = 1 * time.Second

// Budget is one byte semaphore shared by every endpoint that buffers a
// request body (line protocol, remote_write, emoncms, import, events,
// PromQL): each limits one request, the budget limits all of them
// together. A request reserves its size before its body is read and
// returns it when its handler is done; a request that does not fit is
// refused at once with 503 and Retry-After, never queued, and the budget
// never grows. It is safe for concurrent use.
type Budget struct {
	max int64

	mu   sync.Mutex
	used int64 // guarded by mu

	refused atomic.Int64

	grace time.Duration // a rated body's allowance beyond its size at MinBodyRate; tests shorten it
}

// NewBudget returns a budget of maxBytes (DefaultBudgetBytes when <= 0).
func NewBudget(maxBytes int64) *Budget {
	if maxBytes <= 0 {
		maxBytes = DefaultBudgetBytes
	}
	return &Budget{max: maxBytes, grace: bodyGrace}
}

// TryAcquire reserves n bytes and reports whether they fit; it never
// waits. A reservation is returned with Release.
func (b *Budget) TryAcquire(n int64) bool {
	if n < 0 {
		n = 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n > b.max-b.used {
		return false
	}
	b.used += n
	return true
}

// Release returns n bytes reserved by a successful TryAcquire.
func (b *Budget) Release(n int64) {
	if n <= 0 {
		return
	}
	b.mu.Lock()
	// Releasing more than was acquired is a caller's bug; clamping keeps
	// it from turning into a budget larger than configured.
	b.used = max(b.used-n, 0)
	b.mu.Unlock()
}

// InUse returns the bytes reserved now.
func (b *Budget) InUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Max returns the budget's size in bytes.
func (b *Budget) Max() int64 { return b.max }

// Refused returns how many requests the budget refused since NewBudget.
func (b *Budget) Refused() int64 { return b.refused.Load() }

// Wrap guards h, an endpoint that reads at most maxBody bytes of body
// into memory (its own per-request limit; the inflated limit when it
// accepts gzip). Each request reserves what it can cost before h runs:
// its Content-Length when declared and not compressed, capped at maxBody
// (h refuses a larger one itself without buffering it), else maxBody.
// A request that does not fit gets 503 with Retry-After at once; one that
// could never fit (maxBody or its declared size beyond the whole budget)
// gets 413, since retrying cannot help. Requests without a body pass free.
func (b *Budget) Wrap(h http.Handler, maxBody int64) http.Handler {
	return b.WrapScaled(h, maxBody, 1)
}

// WrapScaled is Wrap for a handler that holds scale bytes of memory per
// body byte (the body itself and what it is parsed into): it reserves
// scale times what Wrap would. The body must then arrive at
// MinBodyRate or faster, or the read fails: a trickling client cannot
// sit on its reservation.
func (b *Budget) WrapScaled(h http.Handler, maxBody, scale int64) http.Handler {
	scale = max(scale, 1)
	return b.guard(h, func(r *http.Request) int64 { return b.cost(r, maxBody) * scale }, true)
}

// WrapFixed guards a handler that streams its body through buffers of n
// bytes however large the body is (an import): every request with a
// body reserves n. Its body may take as long as the server's
// ReadTimeout allows.
func (b *Budget) WrapFixed(h http.Handler, n int64) http.Handler {
	return b.guard(h, func(r *http.Request) int64 {
		if b.cost(r, 1) == 0 {
			return 0
		}
		return n
	}, false)
}

// MinBodyRate is the slowest a body reserved by Wrap or WrapScaled may
// arrive, after bodyGrace: 32 MiB takes 8.5 minutes at it.
const (
	MinBodyRate = 64 << 10 // bytes per second
	bodyGrace   = 10 * time.Second
)

// guard reserves cost(r) around h, or refuses the request.
func (b *Budget) guard(h http.Handler, cost func(*http.Request) int64, rated bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := cost(r)
		if n == 0 {
			h.ServeHTTP(w, r)
			return
		}
		if n > b.max {
			b.refused.Add(1)
			writeError(w, http.StatusRequestEntityTooLarge, "request body of up to "+strconv.FormatInt(n, 10)+
				" bytes is larger than the server's memory budget for bodies in flight ("+strconv.FormatInt(b.max, 10)+" bytes)")
			return
		}
		if !b.TryAcquire(n) {
			b.refused.Add(1)
			w.Header().Set("Retry-After", strconv.Itoa(int(budgetRetryAfter/time.Second)))
			writeError(w, http.StatusServiceUnavailable, "server busy: request bodies in flight fill its memory budget; retry later")
			return
		}
		defer b.Release(n)
		if rated && r.ContentLength != 0 {
			// A server without per-request deadlines (a recorder in a
			// test, the light server) keeps its own; ignore the error.
			size := max(r.ContentLength, 0)
			if size == 0 {
				size = n
			}
			d := b.grace + time.Duration(size/MinBodyRate)*time.Second
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		h.ServeHTTP(w, r)
	})
}

// cost is the bytes a request's body may take in memory: nothing without
// a body, its declared length when that is what the handler buffers, else
// the handler's limit.
func (b *Budget) cost(r *http.Request, maxBody int64) int64 {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return 0
	}
	if r.ContentLength > 0 && r.Header.Get("Content-Encoding") == "" {
		return min(r.ContentLength, maxBody)
	}
	return maxBody
}
