package events

import (
	"context"
	"math"
	"slices"

	"github.com/pith-historian/pith/internal/store/wal"
)

// This file holds the Collector's side of deduplication: deciding that
// an event is a duplicate, forgetting the ids of a lost record, and
// keeping the WAL segments that the remembered ids point to. The tables
// themselves are in dedup.go.

// sigMemoryShare is the part of Options.DedupMemory left to signatures:
// one sigMemoryShare-th; the rest holds ids.
const sigMemoryShare = 8

// maxReadBuf is the largest record buffer kept from one confirmation to
// the next.
const maxReadBuf = 64 << 10

// unremember forgets the ids of a request whose record the WAL dropped
// for lack of space, so that the client's retry is accepted rather than
// answered as duplicates of a record that does not exist. The record may
// still reach the sinks from memory: a retry then delivers it twice, the
// at-least-once side of the trade.
func (c *Collector) unremember(b *batch, dup []bool, sig *[32]byte, pos wal.Pos) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range b.evs {
		if b.evs[i].assigned || dup != nil && dup[i] {
			continue
		}
		c.ids.remove(b.hashes[i], pos)
	}
	if sig != nil {
		c.sigs.remove(*sig, pos)
	}
}

// duplicate reports whether an id of hash h (id as the canonical line
// writes it) was accepted before arrival within the window, and returns
// the position to wait for before the duplicate is acknowledged. A hash
// match counts only once the record it points to is read and holds the
// id. The caller holds mu.
func (c *Collector) duplicate(h uint64, id []byte, arrival int64) (wal.Pos, bool) {
	var at wal.Pos
	found := c.ids.find(h, func(e *idEntry) bool {
		if e.exp <= arrival {
			return false
		}
		pos, ok := c.confirm(wal.Pos{Segment: e.seg, Offset: int64(e.off)}, id)
		at = pos
		return ok
	})
	return at, found
}

// confirm reports whether the record at pos holds an event of id, and
// returns the position to wait for until that record is durable. The
// record is taken from the queue when it is still there, else read back
// from the WAL (after waiting until it is written, when it is not yet).
// Any failure to read it answers false: an event is rather stored twice
// than dropped unseen. The caller holds mu.
func (c *Collector) confirm(pos wal.Pos, id []byte) (wal.Pos, bool) {
	i, ok := slices.BinarySearchFunc(c.queue, pos, func(q queued, p wal.Pos) int {
		switch {
		case q.pos.Less(p):
			return -1
		case p.Less(q.pos):
			return 1
		}
		return 0
	})
	if ok {
		return c.queue[i].pos, recordHasID(c.queue[i].rec, id)
	}
	read := func() error {
		return c.wal.ReadAt(pos, func(rec []byte) error {
			c.readBuf = append(c.readBuf[:0], rec...)
			return nil
		})
	}
	err := read()
	if err != nil {
		// The sink may have taken the record from memory before the WAL
		// wrote it. The last record appended carries the epoch a Sync
		// needs to tell a record lost to a full disk, which the entry's
		// position lacks.
		if serr := c.wal.Sync(context.Background(), c.lastPos); serr == nil {
			err = read()
		}
	}
	if err != nil {
		c.log.Warn("read back an event's record to confirm a duplicate; taking the event as new", "pos", pos, "err", err)
		return wal.Pos{}, false
	}
	found := recordHasID(c.readBuf, id)
	if cap(c.readBuf) > maxReadBuf {
		c.readBuf = nil
	}
	// The original may be written and not yet durable: wait as for the
	// last record, which covers it.
	return c.lastPos, found
}

// keepFrom returns the first WAL segment to keep when the sink delivered
// everything before segment delivered: the oldest that holds a
// remembered id, whose record confirms a duplicate and rebuilds the
// dedup table at the next start, unless that would keep more than
// DedupWALBytes of delivered segments; then the ids of the older
// segments are forgotten early.
func (c *Collector) keepFrom(delivered uint32) uint32 {
	limit := uint32(max(1, min(c.opts.DedupWALBytes/c.opts.SegmentSize, math.MaxUint32)))
	c.mu.Lock()
	defer c.mu.Unlock()
	if delivered > limit {
		c.ids.dropBefore(delivered - limit)
	}
	if e, ok := c.ids.oldest(); ok && e.seg < delivered {
		return e.seg
	}
	return delivered
}
