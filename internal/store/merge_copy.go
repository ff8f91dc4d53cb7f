package store

import (
	"cmp"
	"slices"

	"github.com/pith-historian/pith/internal/store/chunkenc"
)

// copyMinSamples is the size from which a merge of disjoint runs copies a
// chunk as it is, checksum and all, instead of decoding and encoding it
// again. Smaller chunks (a bulk load's spills of a few dozen samples a
// tag, a flush of a slow tag) are decoded and cut again with their
// neighbours, so that a day merged from many small runs does not keep
// their small chunks, each costing a header, a checksum and an index
// entry.
const copyMinSamples = 128

// copySeries writes numeric series id of the merger's runs to rw, copying
// their chunks of copyMinSamples samples or more as they are and taking
// the tiers from their finest cells, merged where two runs meet in one
// cell. That is the series a merge of its samples would write (the same
// samples, totals and cells) except that chunks end where the runs did,
// which may be inside a cell. Encoding is most of what a merge costs, and
// a day of a bulk load in time order, or of a live tag flushed every ten
// minutes, is merged from such runs again and again. It applies when the
// runs' parts of the series are disjoint in time, each keeps its raw
// chunks and has fine as its finest tier, at least one chunk is large
// enough to copy, and every block to copy has a good checksum and every
// block to decode decodes; otherwise it writes nothing and returns false,
// and the caller merges the samples.
func (db *DB) copySeries(rw *runWriter, m *merger, id uint32, fine uint8) bool {
	m.refs = m.refs[:0]
	for i := range m.its {
		m.refs = append(m.refs, seriesRef{m.its[i].r, m.its[i].rs})
	}
	pieces := m.refs
	slices.SortFunc(pieces, func(a, b seriesRef) int { return cmp.Compare(a.s.minT, b.s.minT) })
	copied := false
	for _, x := range pieces {
		if x.s.fine != fine || len(x.s.chunks) == 0 {
			return false
		}
		for i := range x.s.chunks {
			copied = copied || x.s.chunks[i].n >= copyMinSamples
		}
	}
	if !copied {
		return false
	}
	for _, x := range pieces {
		for i := range x.s.chunks {
			c := &x.s.chunks[i]
			if c.n >= copyMinSamples {
				if _, err := x.r.block(c.blockRef); err != nil {
					return false
				}
			} else if err := x.r.decodeChunk(c, &m.d); err != nil {
				return false
			}
		}
	}

	w := rw.beginSeries(id, fine, false)
	// The decimals of the data, as far as what the runs stored shows: a
	// cell's min, max, first and last are samples and its sum was rounded
	// to the run's decimals, so e is at most those of the samples, and a
	// sum of cells rounded to e is the sum of their samples rounded to
	// theirs. Data that is not decimal shows a value with no short
	// decimal form and is not rounded.
	e, decimal := 0, true
	dec := func(a *acc) {
		if decimal {
			e, decimal = chunkenc.DecimalExponentFrom(e, []float64{a.sum, a.min, a.max, a.first, a.last})
		}
	}
	// The finest cells of the runs in time order; where two runs meet
	// inside a cell, its two parts merge (the earlier one's first, the
	// later one's last). Coarser tiers are rolled up from them, as a
	// merge of the samples does.
	if fine != noTier {
		for _, x := range pieces {
			cells, err := x.r.decodeTierInto(&m.tiers, x.s, int(fine))
			if err != nil {
				return false
			}
			for i := range cells {
				dec(&cells[i].acc)
				if n := len(w.cells); n > 0 && w.cells[n-1].start == cells[i].start {
					w.cells[n-1].merge(&cells[i].acc)
					continue
				}
				w.cells = append(w.cells, cells[i])
			}
		}
	}
	for _, x := range pieces {
		t := x.s.total()
		dec(&t)
		w.total.merge(&t)
		w.n += x.s.n
	}
	w.exp, w.decimal = e, decimal
	last := pieces[len(pieces)-1].s
	w.minT, w.prevEnd = pieces[0].s.minT, pieces[0].s.minT
	w.lastV, w.lastQ = last.lastV, last.lastQ

	for _, x := range pieces {
		for i := range x.s.chunks {
			c := &x.s.chunks[i]
			if c.n < copyMinSamples {
				x.r.decodeChunk(c, &m.d) // decoded above without error
				pendSamples(w, m.d.ts, m.d.vs, m.d.qs)
				continue
			}
			w.copyChunk(x.r, c)
		}
	}
	w.finish()
	return true
}
