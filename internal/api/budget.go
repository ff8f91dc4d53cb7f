package api

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/ingest"
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
	peak int64 // the most used since the last TakePeak; guarded by mu

	refused atomic.Int64

	grace time.Duration // a rated body's allowance beyond its size at MinBodyRate; tests shorten it

	// Requests above smallMax may use only max-reserve; set by KeepForSmall.
	reserve, smallMax int64
}

// KeepForSmall keeps reserve bytes of the budget for requests of at most
// smallMax bytes: large requests may use only the rest, so a steady
// writer of small batches keeps going while large ones are refused. Call
// it before the budget is used.
func (b *Budget) KeepForSmall(reserve, smallMax int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reserve, b.smallMax = min(max(reserve, 0), b.max), max(smallMax, 0)
}

// limit is the most a reservation of n bytes may bring the budget to.
func (b *Budget) limit(n int64) int64 {
	if n > b.smallMax {
		return b.max - b.reserve
	}
	return b.max
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
	if n > b.limit(n)-b.used {
		return false
	}
	b.used += n
	b.peak = max(b.peak, b.used)
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

// TakePeak returns the most bytes reserved at once since the last call
// (or since NewBudget), and starts the next span from what is reserved
// now.
func (b *Budget) TakePeak() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peak
	b.peak = b.used
	return p
}

// Max returns the budget's size in bytes: the most a request could
// reserve, when KeepForSmall is not in force.
func (b *Budget) Max() int64 { return b.max }

// Largest returns the largest reservation that can ever succeed: the
// budget less what KeepForSmall keeps for small requests.
func (b *Budget) Largest() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.max - b.reserve
}

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
	return b.guard(h, func(r *http.Request) int64 { return b.cost(r, maxBody) }, true)
}

// WrapScaled guards a push handler of package ingest that holds scale
// bytes of memory per body byte (the body and what it is parsed into).
// A request reserves scale times its body: the declared length capped at
// maxBody; for a compressed body MaxInflation times its declared length
// (capped the same); else maxBody. The handler is told (ingest.WithMaxBody)
// to refuse with 413 a body, compressed or decoded, larger than what was
// reserved, so a compression bomb cannot outgrow its reservation. The
// body must arrive at MinBodyRate or faster, or the read fails: a
// trickling client cannot sit on its reservation.
func (b *Budget) WrapScaled(h http.Handler, maxBody, scale int64) http.Handler {
	scale = max(scale, 1)
	body := func(r *http.Request) int64 {
		if r.ContentLength > 0 && r.Header.Get("Content-Encoding") != "" {
			return min(r.ContentLength*MaxInflation, maxBody)
		}
		return b.cost(r, maxBody)
	}
	limited := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := body(r); n > 0 {
			r = r.WithContext(ingest.WithMaxBody(r.Context(), n))
		}
		h.ServeHTTP(w, r)
	})
	return b.guard(limited, func(r *http.Request) int64 { return body(r) * scale }, true)
}

// MaxInflation is how much larger than its declared length a compressed
// body may decode to under WrapScaled: gzipped line protocol and
// snappy-compressed remote_write shrink 3 to 15 times.
const MaxInflation = 16

// WrapStream guards a handler that streams its body (an import): it
// holds fixed bytes of buffers, plus about one byte per body byte (the
// points staged for its transaction) up to maxHeld in all, however large
// the body. A request reserves fixed plus its declared length
// (MaxInflation times it when compressed), at most maxHeld; maxHeld when
// the length is not declared. Its body may take as long as the server's
// ReadTimeout allows.
func (b *Budget) WrapStream(h http.Handler, fixed, maxHeld int64) http.Handler {
	return b.guard(h, func(r *http.Request) int64 {
		switch {
		case b.cost(r, 1) == 0:
			return 0
		case r.ContentLength < 0:
			return maxHeld
		case r.Header.Get("Content-Encoding") != "":
			return min(fixed+min(r.ContentLength, maxHeld)*MaxInflation, maxHeld)
		}
		return min(fixed+r.ContentLength, maxHeld)
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
		b.mu.Lock()
		lim := b.limit(n)
		b.mu.Unlock()
		if n > lim {
			b.refused.Add(1)
			writeError(w, http.StatusRequestEntityTooLarge, "request body of up to "+strconv.FormatInt(n, 10)+
				" bytes is larger than the server's memory budget for bodies in flight allows one request ("+strconv.FormatInt(lim, 10)+" bytes)")
			drainRefused(w, r)
			return
		}
		if !b.TryAcquire(n) {
			b.refused.Add(1)
			w.Header().Set("Retry-After", strconv.Itoa(int(budgetRetryAfter/time.Second)))
			writeError(w, http.StatusServiceUnavailable, "server busy: request bodies in flight fill its memory budget; retry later")
			drainRefused(w, r)
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

// maxRefusedDrain is the most of a refused body drainRefused reads.
const maxRefusedDrain = 64 << 20

// drainRefused sends the refusal already written, then reads and drops
// the body the client is still sending (up to maxRefusedDrain, at
// MinBodyRate or faster), through a small shared buffer: closing the
// connection on a client still sending would make the kernel reset it,
// which can destroy the refusal before the client reads it, and the
// client would not know to retry later.
func drainRefused(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength <= 0 || r.ContentLength > maxRefusedDrain {
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	_ = rc.SetReadDeadline(time.Now().Add(bodyGrace + time.Duration(r.ContentLength/MinBodyRate)*time.Second))
	_, _ = io.Copy(io.Discard, r.Body)
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
