package events

import "math"

// recentLineBytes is the room budgeted per event of the recent ring: a
// ring of n events holds at most n*recentLineBytes bytes of lines, so
// that events with many or long attributes cost a bounded amount of
// memory (the ring then holds fewer of them). A typical line is 100 to
// 300 bytes.
const recentLineBytes = 512

// maxRingBlock is the size of the ring's blocks (smaller for a small
// ring: a sixteenth of its bound).
const maxRingBlock = 16 << 10

// ring keeps the canonical lines (without their '\n') of the most recent
// events for GET /api/v1/events: at most len(ents) lines and maxBytes
// bytes. The lines are copied one after the other into blocks of equal
// size rather than kept as sub-slices of the WAL records: a record
// leaves the queue once delivered, and a sub-slice would pin all of it
// for the few of its lines still here; a block is also one object for
// the GC rather than one per event.
//
// The ring takes a block when the last one is full and, at its bound,
// frees the oldest block with its lines. Nothing is ever copied to grow:
// an arena that doubled (or grew by an eighth) as the ring filled left
// the old arena as garbage at each step, so the process's memory rose in
// steps for as long as the ring filled (17 minutes at 10 events/s, the
// soak's rate) instead of by the lines held. A line longer than a quarter
// of a block gets a block of its own size, so a block is at least three
// quarters full. It is not safe for concurrent use; the Collector guards
// it with its mutex.
type ring struct {
	blocks   [][]byte   // oldest first; each holds whole lines, len is what is used
	counts   []int      // lines held in each block
	base     uint64     // the number of blocks[0]; a block's number never changes
	bytes    int        // the capacity of the blocks held
	maxBytes int        // bound of bytes
	block    int        // the size of a shared block
	spare    []byte     // a freed shared block, for the next one
	ents     []ringLine // circular; the oldest line is ents[first]
	first    int
	n        int // lines held
}

// ringLine is where a line is: block number blk, at off.
type ringLine struct {
	blk      uint64
	off, len uint32
}

func newRing(n int) ring {
	maxBytes := int(min(int64(n)*recentLineBytes, math.MaxUint32))
	return ring{ents: make([]ringLine, n), maxBytes: maxBytes, block: min(maxRingBlock, max(1, maxBytes/16))}
}

// add copies line into the ring, dropping the oldest lines to make room.
// A line longer than the whole bound is not kept.
func (r *ring) add(line []byte) {
	if len(r.ents) == 0 || len(line) > r.maxBytes {
		return
	}
	if r.n == len(r.ents) {
		r.dropLine()
	}
	last := len(r.blocks) - 1
	if last < 0 || len(line) > cap(r.blocks[last])-len(r.blocks[last]) {
		size := r.block
		if len(line) > r.block/4 {
			size = len(line)
		}
		for r.n > 0 && r.bytes+size > r.maxBytes {
			r.dropBlock()
		}
		r.take(size)
		last = len(r.blocks) - 1
	}
	b := r.blocks[last]
	r.ents[(r.first+r.n)%len(r.ents)] = ringLine{blk: r.base + uint64(last), off: uint32(len(b)), len: uint32(len(line))}
	r.blocks[last] = append(b, line...)
	r.counts[last]++
	r.n++
}

// take appends an empty block of size bytes.
func (r *ring) take(size int) {
	var b []byte
	if size == r.block && r.spare != nil {
		b, r.spare = r.spare[:0], nil
	} else {
		b = make([]byte, 0, size)
	}
	r.blocks = append(r.blocks, b)
	r.counts = append(r.counts, 0)
	r.bytes += size
}

// dropLine forgets the oldest line, and its block once it holds no
// other line and is not the one being filled.
func (r *ring) dropLine() {
	e := r.ents[r.first]
	r.first = (r.first + 1) % len(r.ents)
	r.n--
	i := int(e.blk - r.base)
	r.counts[i]--
	if r.n == 0 {
		r.first = 0
	}
	if r.counts[0] == 0 && (len(r.blocks) > 1 || r.n == 0) {
		r.freeOldest()
	}
}

// dropBlock forgets the oldest block and its lines.
func (r *ring) dropBlock() {
	oldest := r.base
	for r.n > 0 && r.ents[r.first].blk == oldest {
		r.dropLine()
	}
	if len(r.blocks) > 0 && r.base == oldest {
		r.freeOldest() // the block being filled, now empty
	}
}

// freeOldest removes blocks[0], which holds no line.
func (r *ring) freeOldest() {
	b := r.blocks[0]
	r.bytes -= cap(b)
	if cap(b) == r.block {
		r.spare = b
	}
	r.blocks[0] = nil
	r.blocks, r.counts = r.blocks[1:], r.counts[1:]
	r.base++
	if len(r.blocks) == 0 {
		r.blocks, r.counts = r.blocks[:0:0], r.counts[:0:0]
	}
}

// each calls fn on the lines from the newest to the oldest until fn
// returns false. The line is the ring's memory: fn must not keep it.
func (r *ring) each(fn func(line []byte) bool) {
	for i := r.n - 1; i >= 0; i-- {
		e := r.ents[(r.first+i)%len(r.ents)]
		b := r.blocks[e.blk-r.base]
		if !fn(b[e.off : e.off+e.len]) {
			return
		}
	}
}
