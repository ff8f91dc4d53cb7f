package store

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// chunkIter reads one run's part of a series a chunk at a time.
type chunkIter struct {
	r   *runFile
	rs  *runSeries
	c   int // the next chunk to decode
	d   decodedChunk
	pos int // the next sample of d
}

// ready decodes chunks until a sample is at pos; false when none is left.
// A damaged chunk is skipped (counted and logged when report is set).
func (it *chunkIter) ready(db *DB, report bool) bool {
	for it.pos >= len(it.d.ts) {
		if it.c >= len(it.rs.chunks) {
			return false
		}
		c := &it.rs.chunks[it.c]
		it.c++
		it.pos = 0
		if err := it.r.decodeChunk(c, &it.d); err != nil {
			it.d.ts = it.d.ts[:0]
			if report {
				db.stats.CorruptBlocks.Add(1)
				db.log.Error("merge skips damaged data", "err", err)
			}
		}
	}
	return true
}

// merger merges one series of a day's runs, given oldest first, in time
// order, the newer run winning on equal times. It holds one decoded chunk
// per run.
type merger struct {
	its  []chunkIter
	text bool // the series is text in one of the runs
	// scratch of copySeries
	refs  []seriesRef
	d     decodedChunk
	tiers tierScratch
}

// reset starts the merge of series id of runs, keeping the buffers.
func (m *merger) reset(runs []*runFile, curs []indexCursor, id uint32) {
	m.text = false
	n := 0
	for i, r := range runs {
		rs := curs[i].at(id)
		if rs == nil {
			continue
		}
		m.text = m.text || rs.fine == fineText
		if n < cap(m.its) {
			m.its = m.its[:n+1]
		} else {
			m.its = append(m.its, chunkIter{})
		}
		m.its[n].r, m.its[n].rs = r, rs
		n++
	}
	m.its = m.its[:n]
	m.rewind()
}

// rewind starts the merge again from the first samples.
func (m *merger) rewind() {
	for i := range m.its {
		it := &m.its[i]
		it.c, it.pos = 0, 0
		it.d.ts = it.d.ts[:0]
	}
}

// disjoint reports whether the runs' spans of the series do not meet, as
// their indexes say.
func (m *merger) disjoint() bool {
	type span struct{ lo, hi int64 }
	spans := make([]span, len(m.its))
	for i := range m.its {
		spans[i] = span{m.its[i].rs.minT, m.its[i].rs.maxT}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	for i := 1; i < len(spans); i++ {
		if spans[i].lo <= spans[i-1].hi {
			return false
		}
	}
	return true
}

// each calls emit with the merged samples, in strictly increasing time, in
// pieces: from runs that do not meet, a piece is the rest of a decoded
// chunk. The slices are valid until emit returns. A sample at or before
// one already emitted (which only damaged data could hold) is dropped.
// The first pass of a merge is silent about damage; the second reports it.
func (m *merger) each(db *DB, emit func(ts []int64, vs []float64, qs []uint8)) {
	m.eachReport(db, true, emit)
}

func (m *merger) eachReport(db *DB, report bool, emit func(ts []int64, vs []float64, qs []uint8)) {
	last := int64(math.MinInt64)
	first := true
	for {
		best := -1
		var bt int64
		for i := range m.its {
			it := &m.its[i]
			if !it.ready(db, report) {
				continue
			}
			// On equal times the newer run (later in its) wins.
			if t := it.d.ts[it.pos]; best < 0 || t <= bt {
				best, bt = i, t
			}
		}
		if best < 0 {
			return
		}
		bound := int64(math.MaxInt64)
		for i := range m.its {
			it := &m.its[i]
			if i == best || !it.ready(db, report) {
				continue
			}
			if it.d.ts[it.pos] == bt {
				it.pos++ // an older write of the same time
				if !it.ready(db, report) {
					continue
				}
			}
			bound = min(bound, it.d.ts[it.pos])
		}
		it := &m.its[best]
		d := &it.d
		if !first && bt <= last {
			it.pos++
			continue
		}
		j := it.pos + 1
		for j < len(d.ts) && d.ts[j] < bound && d.ts[j] > d.ts[j-1] {
			j++
		}
		emit(d.ts[it.pos:j], d.vs[it.pos:j], d.qs[it.pos:j])
		last, first = d.ts[j-1], false
		it.pos = j
	}
}

// indexCursor walks a run's index entries in id order for a merge: over
// the entries in memory when the run holds them, else parsing them one at
// a time from the index bytes, so that merging a day's runs of 100,000
// series holds each run's index as bytes (about 75 a series) rather than
// as entries (about 240: the background merge of a bulk load's day held
// 190 MB of them).
type indexCursor struct {
	ss     []runSeries // the entries in memory, or nil
	i      int         // the next of ss
	t      *runFile    // parse state over the index bytes
	br     byteReader
	left   uint64 // entries not yet parsed
	cur    runSeries
	has    bool // cur is the next entry
	chunks []chunkRef
	tiers  []tierRef
	err    error
}

// start positions c before the first entry of r.
func (c *indexCursor) start(r *runFile) {
	*c = indexCursor{chunks: c.chunks[:0], tiers: c.tiers[:0]}
	if p := r.idx.Load(); p != nil {
		c.ss = *p
		return
	}
	raw, err := r.rawIndex()
	if err != nil {
		c.err = fmt.Errorf("merge: index of %s: %w", r.path, err)
		return
	}
	c.t = &runFile{path: r.path, size: r.size}
	c.br = byteReader{b: raw}
	c.br.varint()  // part
	c.br.uvarint() // seq
	c.left = c.br.uvarint()
	if c.br.err != nil || c.left > uint64(len(c.br.b)) {
		c.err = &CorruptionError{File: r.path, Err: errors.New("bad series count")}
		c.left = 0
	}
	c.advance()
}

// advance parses the next entry into cur.
func (c *indexCursor) advance() {
	prev, had := c.cur.id, c.has
	c.has = false
	if c.left == 0 || c.err != nil {
		return
	}
	c.left--
	var err error
	c.chunks, c.tiers, err = c.t.parseEntry(&c.br, &c.cur, c.chunks[:0], c.tiers[:0])
	if err == nil && had && c.cur.id <= prev {
		err = errors.New("series out of order")
	}
	if err != nil {
		c.err = &CorruptionError{File: c.t.path, Err: err}
		return
	}
	c.has = true
}

// seek skips the entries before id lo and returns the id of the next;
// false when none is left.
func (c *indexCursor) seek(lo uint32) (uint32, bool) {
	if c.ss != nil {
		for c.i < len(c.ss) && c.ss[c.i].id < lo {
			c.i++
		}
		if c.i < len(c.ss) {
			return c.ss[c.i].id, true
		}
		return 0, false
	}
	for c.has && c.cur.id < lo {
		c.advance()
	}
	return c.cur.id, c.has
}

// at returns the entry of series id, or nil, skipping the entries before
// it; ids are asked in increasing order. The entry is valid until the
// next call.
func (c *indexCursor) at(id uint32) *runSeries {
	if x, ok := c.seek(id); !ok || x != id {
		return nil
	}
	if c.ss != nil {
		return &c.ss[c.i]
	}
	return &c.cur
}
