package influxql

import (
	"fmt"
)

// Reserver is a memory budget shared with the rest of the HTTP server,
// implemented by *api.Budget. A query reserves what its buckets, raw
// samples and answer hold as it reads them, and releases it once its
// answer is written. All methods are safe for concurrent use.
type Reserver interface {
	// TryAcquire reserves n bytes and reports whether they fit; it never
	// waits.
	TryAcquire(n int64) bool
	// Release returns n bytes reserved by a successful TryAcquire.
	Release(n int64)
	// Largest returns the largest reservation that can ever succeed.
	Largest() int64
}

// Memory estimates, measured on the benchmarks' heaps: a bucket of one
// column holds its cell, its value in the answer's rows and about 24
// bytes of JSON; a raw sample is read (16 bytes), becomes a point of its
// row and its JSON.
const (
	bucketBytes    = 64 + 40 + 24
	rowBytes       = 40 + 32
	rawSampleBytes = 16 + 40 + 24 + 48
)

// errBusy is a statement refused because the budget is full now: the
// handler answers 503 with Retry-After.
type errBusy struct{}

func (errBusy) Error() string {
	return "server busy: queries, answers and bodies in flight fill its memory budget; retry later"
}

// run is the execution of one request's statements: the engine, the
// memory the request holds and its view of the catalog.
type run struct {
	*Engine
	budget Reserver
	held   int64
	snap   Snapshot // the catalog as the request found it, taken at first use

	// The field condition of the SELECT being run: pred tests the samples
	// of the aggregated field, rowCond the rows of a raw SELECT.
	pred    func(float64) bool
	rowCond Expr
}

// snapshot returns the request's view of the catalog.
func (r *run) snapshot() Snapshot {
	if r.snap == nil {
		r.snap = r.cat.Snapshot()
	}
	return r.snap
}

// take reserves n more bytes for the request.
func (r *run) take(n int64) error {
	if r.budget == nil || n <= 0 {
		return nil
	}
	if r.held+n > r.budget.Largest() {
		return &UnsupportedError{fmt.Sprintf("the answer needs more than the %d bytes the server's memory budget allows one request: narrow the time range, use a wider GROUP BY time() interval or add a LIMIT", r.budget.Largest())}
	}
	if !r.budget.TryAcquire(n) {
		return errBusy{}
	}
	r.held += n
	return nil
}

// release returns everything the request reserved.
func (r *run) release() {
	if r.budget != nil && r.held > 0 {
		r.budget.Release(r.held)
		r.held = 0
	}
}
