package events

import "math"

// recentLineBytes is the room budgeted per event of the recent ring: a
// ring of n events holds at most n*recentLineBytes bytes of lines, so
// that events with many or long attributes cost a bounded amount of
// memory (the ring then holds fewer of them). A typical line is 100 to
// 300 bytes.
const recentLineBytes = 512

// ring keeps the canonical lines (without their '\n') of the most recent
// events for GET /api/v1/events: at most len(ents) lines and maxBytes
// bytes. The lines are copied one after the other into one circular byte
// arena rather than kept as sub-slices of the WAL records: a record
// leaves the queue once delivered, and a sub-slice would pin all of it
// for the few of its lines still here; the arena is also one object for
// the GC rather than one per event. It is not safe for concurrent use;
// the Collector guards it with its mutex.
type ring struct {
	data     []byte     // the arena; grows as needed up to maxBytes
	maxBytes int        // bound of len(data)
	w        int        // where the next line goes in data
	ents     []ringLine // circular; the oldest line is ents[first]
	first    int
	n        int // lines held
}

// ringLine is where a line is in the arena.
type ringLine struct {
	off, len uint32
}

// minRingBytes is the first size of the arena.
const minRingBytes = 64 << 10

func newRing(n int) ring {
	return ring{ents: make([]ringLine, n), maxBytes: int(min(int64(n)*recentLineBytes, math.MaxUint32))}
}

// add copies line into the ring, dropping the oldest lines to make room.
// A line longer than the whole arena is not kept.
func (r *ring) add(line []byte) {
	if len(r.ents) == 0 || len(line) > r.maxBytes {
		return
	}
	if r.n == len(r.ents) {
		r.drop()
	}
	if !r.fits(len(line)) && len(r.data) < r.maxBytes {
		r.grow(len(line))
	}
	if r.w+len(line) > len(r.data) {
		// Wrap around. The lines at or after w are the oldest ones (the
		// live lines run from the oldest to w, wrapping at most once);
		// they go now, so that this stays true once w is back at 0.
		for r.n > 0 && int(r.ents[r.first].off) >= r.w {
			r.drop()
		}
		r.w = 0
	}
	// The oldest lines are the ones that the new line overwrites.
	for r.n > 0 && int(r.ents[r.first].off) >= r.w && int(r.ents[r.first].off) < r.w+len(line) {
		r.drop()
	}
	copy(r.data[r.w:], line)
	r.ents[(r.first+r.n)%len(r.ents)] = ringLine{off: uint32(r.w), len: uint32(len(line))}
	r.n++
	r.w += len(line)
}

// drop forgets the oldest line.
func (r *ring) drop() {
	r.first = (r.first + 1) % len(r.ents)
	r.n--
	if r.n == 0 {
		r.first, r.w = 0, 0
	}
}

// fits reports whether a line of n bytes fits in the arena without
// dropping a line (but those that the count of lines drops anyway).
func (r *ring) fits(n int) bool {
	if r.n == 0 {
		return n <= len(r.data)
	}
	oldest := int(r.ents[r.first].off)
	if r.w+n <= len(r.data) {
		return oldest < r.w || oldest >= r.w+n
	}
	// Wrapping drops the lines at or after w, and those in [0, n).
	return oldest < r.w && oldest >= n
}

// grow enlarges the arena, copying the live lines to its start in
// order, so that they and need more bytes fit with an eighth to spare:
// growing only when the lines do not fit, by that little, keeps the
// arena close to the size of the last lines, at the cost of a few more
// copies while the ring first fills.
func (r *ring) grow(need int) {
	live := 0
	for i := range r.n {
		live += int(r.ents[(r.first+i)%len(r.ents)].len)
	}
	size := min(max(minRingBytes, (live+need)*9/8), r.maxBytes)
	data := make([]byte, size)
	w := 0
	for i := range r.n {
		e := &r.ents[(r.first+i)%len(r.ents)]
		copy(data[w:], r.data[e.off:e.off+e.len])
		e.off = uint32(w)
		w += int(e.len)
	}
	r.data, r.w = data, w
}

// each calls fn on the lines from the newest to the oldest until fn
// returns false. The line is the ring's memory: fn must not keep it.
func (r *ring) each(fn func(line []byte) bool) {
	for i := r.n - 1; i >= 0; i-- {
		e := r.ents[(r.first+i)%len(r.ents)]
		if !fn(r.data[e.off : e.off+e.len]) {
			return
		}
	}
}
