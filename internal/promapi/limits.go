package promapi

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// Reserver is a memory budget shared with the rest of the HTTP server,
// implemented by *api.Budget. A query reserves the size of its answer
// before building it. All methods are safe for concurrent use.
type Reserver interface {
	// TryAcquire reserves n bytes and reports whether they fit; it never
	// waits.
	TryAcquire(n int64) bool
	// Release returns n bytes reserved by a successful TryAcquire.
	Release(n int64)
	// Largest returns the largest reservation that can ever succeed.
	Largest() int64
}

// Defaults of the query admission options.
const (
	defaultMaxConcurrent = 2
	defaultMaxQueued     = 8
	defaultQueueWait     = 10 * time.Second
	// busyRetryAfter is the Retry-After of a query refused for want of a
	// turn or of memory: a turn usually frees within seconds.
	busyRetryAfter = 2 * time.Second
)

// Answer size estimate, per sample and per series, of the JSON being built
// (a sample is [1700000000.123,"21.5"], 13 bytes on average over a
// million-sample answer; a series' labels a few names), and twice that:
// writeSuccess copies the result into its envelope.
const (
	answerBytesPerSample = 16
	answerBytesPerSeries = 256
	answerCopies         = 2
)

// admission bounds how many queries run at once and how many wait.
type admission struct {
	slots  chan struct{} // one token per running query
	queued atomic.Int64  // queries waiting for a slot
	max    int64         // most queries allowed to wait
	wait   time.Duration // longest a query waits
}

func newAdmission(running, queued int, wait time.Duration) *admission {
	return &admission{slots: make(chan struct{}, running), max: int64(queued), wait: wait}
}

// enter waits for a turn. It returns false, having answered 503 with
// Retry-After, when the queue is full, the wait is over or the client
// left; otherwise the caller must call leave.
func (a *admission) enter(w http.ResponseWriter, r *http.Request) bool {
	select {
	case a.slots <- struct{}{}:
		return true
	default:
	}
	if a.queued.Add(1) > a.max {
		a.queued.Add(-1)
		busy(w, "too many PromQL queries running and waiting; retry later")
		return false
	}
	defer a.queued.Add(-1)
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return true
	case <-t.C:
		busy(w, "no PromQL query slot freed within "+a.wait.String()+"; retry later")
	case <-r.Context().Done():
		writeError(w, 499, "canceled", "client went away while the query waited for a turn")
	}
	return false
}

func (a *admission) leave() { <-a.slots }

// busy answers 503 in Prometheus's error shape with Retry-After.
func busy(w http.ResponseWriter, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(busyRetryAfter/time.Second)))
	writeError(w, http.StatusServiceUnavailable, "unavailable", msg)
}

// answerSize estimates the bytes of memory the answer to v takes while it
// is built and sent.
func answerSize(v parser.Value) int64 {
	var samples, series int64
	switch v := v.(type) {
	case promql.Matrix:
		series = int64(len(v))
		for _, s := range v {
			samples += int64(len(s.Floats) + len(s.Histograms))
		}
	case promql.Vector:
		series, samples = int64(len(v)), int64(len(v))
	default:
		series, samples = 1, 1
	}
	return answerCopies * (samples*answerBytesPerSample + series*answerBytesPerSeries)
}

// reserveAnswer reserves the memory of the answer to v from the budget,
// where the query already holds work bytes. It returns the bytes to
// release, or false having answered: 422 when the answer could never fit
// beside the work, 503 with Retry-After when it does not fit now.
func (h *Handler) reserveAnswer(w http.ResponseWriter, v parser.Value, work int64) (int64, bool) {
	b := h.opts.Budget
	if b == nil {
		return 0, true
	}
	n := answerSize(v)
	if n < smallAnswer {
		return 0, true
	}
	if n+work > b.Largest() {
		writeError(w, http.StatusUnprocessableEntity, "execution", "answer of about "+strconv.FormatInt(n, 10)+
			" bytes, beside the query's own memory, is larger than the server's memory budget allows one request ("+
			strconv.FormatInt(b.Largest(), 10)+" bytes); query fewer series or a larger step")
		return 0, false
	}
	if !b.TryAcquire(n) {
		busy(w, "server busy: answers and bodies in flight fill its memory budget; retry later")
		return 0, false
	}
	return n, true
}

// querySampleBytes is the memory one sample of a query's result takes
// while the engine evaluates it: the point itself, the raw samples read
// for it and the engine's series, measured as about 70 bytes per sample
// of a 1-million-sample range query's peak heap, answer excluded.
const querySampleBytes = 64

// workSize estimates the memory evaluating expr takes: for each selector,
// the series it matches over [mint, maxt] times steps, at most
// MaxSamples, at querySampleBytes each.
func (h *Handler) workSize(expr parser.Expr, mint, maxt, steps int64) int64 {
	var samples int64
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			samples += int64(countMatching(h.st, mint, maxt, vs.LabelMatchers)) * steps
		}
		return nil
	})
	return min(samples, int64(h.opts.MaxSamples)) * querySampleBytes
}

// reserveWork reserves from the budget the memory evaluating expr is
// estimated to take (workSize). It returns the bytes to release, or
// false having answered: 422 when they could never fit, 503 with
// Retry-After when they do not fit now.
func (h *Handler) reserveWork(w http.ResponseWriter, expr parser.Expr, mint, maxt, steps int64) (int64, bool) {
	b := h.opts.Budget
	if b == nil {
		return 0, true
	}
	n := h.workSize(expr, mint, maxt, steps)
	if n < smallAnswer {
		return 0, true
	}
	if n > b.Largest() {
		writeError(w, http.StatusUnprocessableEntity, "execution", "query would take about "+strconv.FormatInt(n, 10)+
			" bytes of memory to evaluate, more than the server's memory budget allows one request ("+strconv.FormatInt(b.Largest(), 10)+
			" bytes); query fewer series or a larger step")
		return 0, false
	}
	if !b.TryAcquire(n) {
		busy(w, "server busy: queries, answers and bodies in flight fill its memory budget; retry later")
		return 0, false
	}
	return n, true
}

// smallAnswer is the size below which an answer is built without a
// reservation: the bookkeeping would cost more than it guards.
const smallAnswer = 16 << 10
