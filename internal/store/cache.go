package store

import (
	"sync"
	"time"
)

// genCache is a byte-bounded cache with two generations: when the young
// one is full, or older than half of idle, it becomes the old one and the
// oldest is dropped; a hit in the old generation moves the entry back to
// the young one. Hot entries survive, memory stays under the budget
// without per-entry bookkeeping, and an entry unused for idle is gone:
// queries over a window that slides with time (a dashboard of the last
// hour) touch new chunks all the time, and without the age rule they
// filled the budget over hours, so the process grew for hours (the soak).
type genCache[K comparable, V any] struct {
	mu         sync.Mutex
	max        int // bytes, both generations together
	idle       time.Duration
	now        func() time.Time
	size       func(V) int
	young, old map[K]V
	youngBytes int
	oldBytes   int
	born       time.Time // when the young generation started
}

func newGenCache[K comparable, V any](maxBytes int, idle time.Duration, now func() time.Time, size func(V) int) *genCache[K, V] {
	return &genCache[K, V]{max: maxBytes, idle: idle, now: now, size: size, young: make(map[K]V), old: make(map[K]V), born: now()}
}

func (c *genCache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.young[k]; ok {
		return v, true
	}
	if v, ok := c.old[k]; ok {
		delete(c.old, k)
		c.oldBytes -= c.size(v)
		c.putLocked(k, v)
		return v, true
	}
	var zero V
	return zero, false
}

func (c *genCache[K, V]) put(k K, v V) {
	c.mu.Lock()
	c.putLocked(k, v)
	c.mu.Unlock()
}

func (c *genCache[K, V]) putLocked(k K, v V) {
	if c.max <= 0 {
		return
	}
	n := c.size(v)
	now := c.now()
	if c.youngBytes+n > c.max/2 || c.idle > 0 && now.Sub(c.born) >= c.idle/2 {
		c.old, c.oldBytes = c.young, c.youngBytes
		c.young = make(map[K]V)
		c.youngBytes = 0
		c.born = now
	}
	if old, ok := c.young[k]; ok {
		c.youngBytes -= c.size(old)
	}
	c.young[k] = v
	c.youngBytes += n
}

// bytes returns the memory the cache accounts for.
func (c *genCache[K, V]) bytes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.youngBytes + c.oldBytes
}

// drop forgets the entries whose key matches.
func (c *genCache[K, V]) drop(match func(K) bool) {
	c.mu.Lock()
	for k, v := range c.young {
		if match(k) {
			delete(c.young, k)
			c.youngBytes -= c.size(v)
		}
	}
	for k, v := range c.old {
		if match(k) {
			delete(c.old, k)
			c.oldBytes -= c.size(v)
		}
	}
	c.mu.Unlock()
}

// blockKey names a tier or a chunk of one series in one run.
// Its 16 bytes have no padding, so the maps hash and compare them as
// plain memory: with an int index the padding made them call generated
// per-field functions, a tenth of a ten-year chart's time.
type blockKey struct {
	run   *runFile
	id    uint32
	index uint32 // the tier level, or the chunk number
}

// caches holds what queries decode: rollup tiers, and the raw chunks at
// bucket edges, so that a chart drawn again (zoom, pan, refresh) decodes
// nothing twice.
type caches struct {
	tiers  *genCache[blockKey, []cell]
	chunks *genCache[blockKey, *decodedChunk]
	// sums holds the summaries above the day (span.go) of the series
	// queried over long spans, in a quarter of the tiers' budget more
	// (taking it from the tiers made the edges of a ten-year chart no
	// longer fit and decode their tiers at every query).
	sums *genCache[uint32, *daySums]
}

const cellBytes = 64 // approximate memory of one decoded cell

// cacheIdle is how long a decoded tier or chunk that no query uses stays
// in memory: at most this, at least half of it. A chart redrawn (zoom,
// pan, a dashboard's refresh every minute) within it decodes nothing
// twice. A decoded chunk takes 25 bytes a value against about one
// stored, so every minute held of what queries touch is memory: at 5
// minutes the soak's queries over the last minutes kept several MB once
// the first head flush made them read run files.
const cacheIdle = 2 * time.Minute

func newCaches(tierBytes, chunkBytes int, now func() time.Time) *caches {
	return &caches{
		tiers:  newGenCache[blockKey, []cell](tierBytes, cacheIdle, now, func(c []cell) int { return len(c) * cellBytes }),
		sums:   newGenCache[uint32, *daySums](tierBytes/4, cacheIdle, now, daySumsSize),
		chunks: newGenCache[blockKey, *decodedChunk](chunkBytes, cacheIdle, now, chunkSize),
	}
}

// chunkSize approximates the memory of a decoded chunk; a text chunk
// counts its strings too (at most 1 KiB each), so that text cannot grow
// the cache past its bound.
func chunkSize(d *decodedChunk) int {
	n := 25*len(d.ts) + 96
	for _, x := range d.xs {
		n += 16 + len(x)
	}
	return n
}

// dropRun forgets what was decoded from a run that is being removed.
func (c *caches) dropRun(r *runFile) {
	c.tiers.drop(func(k blockKey) bool { return k.run == r })
	c.chunks.drop(func(k blockKey) bool { return k.run == r })
}
