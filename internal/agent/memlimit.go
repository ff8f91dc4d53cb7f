package agent

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// memoryHeadroom is what the process needs beside the budget and what
// it holds live: goroutines' stacks, the runtime's own structures, the
// garbage of small allocations between two collections.
const memoryHeadroom = 8 << 20

// gcPercent is how much the heap may grow past what is live before the
// next collection. With Go's 100 it doubles: the resident memory of a
// box whose live heap is 12 MB (the store's head, batches being
// forwarded, a query's samples) swings by as much between collections,
// about a quarter of it. With 50 the swing halves, for a collector that
// runs twice as often; at 1,000 values/s it takes under 1% of a core.
const gcPercent = 50

// memoryLimitPart keeps the Go runtime's soft memory limit at the memory
// budget plus memoryHeadroom plus what the process holds live besides
// the request bodies the budget already counts (the store's heads, a
// bulk import's staging, the tag table, caches), so that the garbage of
// bodies and answers that are done goes back before the heap grows by
// gcPercent, whatever the store holds.
//
// A fixed limit of budget plus headroom would do that only while the
// rest stays small: an import of 100,000 tags stages several hundred
// megabytes live, and above its limit the runtime collects again and
// again, up to half of the CPU, to no avail (the import ran 1.5 times
// slower; docs/scaling.md). So the limit is computed again after every
// collection, from the live heap that collection found: no timer, and
// nothing runs while the box is idle and allocates nothing.
//
// It is a soft limit: a heap that needs more gets it, at the cost of
// more collections. GOMEMLIMIT, when set, wins and is left alone; GOGC,
// when not set, is gcPercent rather than Go's 100.
type memoryLimitPart struct {
	base     int64        // the budget plus memoryHeadroom
	inflight func() int64 // the most bytes of bodies the budget held since the last call
	log      *slog.Logger

	stopped atomic.Bool
	// sample is used by afterGC only: one cleanup is armed at a time, so
	// two never run at once.
	sample []metrics.Sample
}

var _ Part = (*memoryLimitPart)(nil)

func newMemoryLimitPart(budget int64, inflight func() int64, log *slog.Logger) *memoryLimitPart {
	return &memoryLimitPart{base: budget + memoryHeadroom, inflight: inflight, log: log,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
}

func (m *memoryLimitPart) Name() string { return "memory limit" }

func (m *memoryLimitPart) Start(context.Context) error {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	debug.SetMemoryLimit(m.base)
	m.log.Debug("go memory limit set", "bytes", m.base, "plus", "the live heap beyond bodies in flight, after each collection")
	m.arm()
	return nil
}

// Stop ends the updates; the limit stays where the last one left it.
func (m *memoryLimitPart) Stop() { m.stopped.Store(true) }

// gcSentinel is an object nothing refers to: its cleanup runs once the
// next collection has found it unreachable. It holds a pointer and is 16
// bytes or more so that the runtime never batches it with other small
// objects, which would delay the cleanup.
type gcSentinel struct {
	_ *byte
	_ [8]byte
}

// arm makes afterGC run after the next collection.
func (m *memoryLimitPart) arm() {
	runtime.AddCleanup(new(gcSentinel), func(m *memoryLimitPart) { m.afterGC() }, m)
}

// afterGC sets the limit from the live heap the collection found, then
// waits for the next one. It runs on the runtime's cleanup goroutine.
//
// The bodies the collection found live were reserved in the budget when
// it marked them, which was after the previous afterGC: the most the
// budget held since then is at least what they count for, so subtracting
// it never takes a body for the store's memory (some of the store's may
// be taken for bodies: the limit errs low, as the fixed one did).
func (m *memoryLimitPart) afterGC() {
	if m.stopped.Load() {
		return
	}
	metrics.Read(m.sample)
	var live int64
	if m.sample[0].Value.Kind() == metrics.KindUint64 {
		live = int64(m.sample[0].Value.Uint64())
	}
	debug.SetMemoryLimit(memoryLimitFor(m.base, live, m.inflight()))
	m.arm()
}

// memoryLimitFor is the soft limit for a live heap of live bytes, of
// which up to inflight are request bodies that the budget (within base)
// already counts.
func memoryLimitFor(base, live, inflight int64) int64 {
	return base + max(0, live-inflight)
}
