package store

import (
	"encoding/binary"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store/chunkenc"
)

// seriesWriter writes one numeric series to a run from samples given in
// strictly increasing time, a piece at a time: a chunk is written as soon
// as its end is decided, rollup cells accumulate at the finest tier, and
// the index entry is made by finish. It holds at most a chunk's worth of
// samples (maxChunk plus a piece) and the finest tier's cells (at most
// 8,640 for a day), whatever the size of the series, so a merge of a day
// that grew for hours costs no more memory than one of its first hour.
// Given the same samples and fine, it writes the bytes add always wrote.
type seriesWriter struct {
	rw      *runWriter
	id      uint32
	fine    uint8
	dropRaw bool
	n       int64
	minT    int64
	lastV   float64
	lastQ   model.Quality
	total   acc
	exp     int  // chunkenc.DecimalExponentFrom over the values so far
	decimal bool // every value so far is a short decimal
	cells   []cell
	// pending samples, not yet in a chunk
	pts []int64
	pvs []float64
	pqs []uint8
	// chunk references for the index entry
	chunks   []byte
	nChunks  int
	firstOff int64
	prevEnd  int64
}

// beginSeries starts series id with its finest tier fine (finestTier of
// its count and span, or noTier); with dropRaw a series with tiers keeps
// only them. The series ends with finish; series come in increasing id
// order, one at a time.
func (rw *runWriter) beginSeries(id uint32, fine uint8, dropRaw bool) *seriesWriter {
	w := &rw.sw
	*w = seriesWriter{rw: rw, id: id, fine: fine, dropRaw: dropRaw && fine != noTier, decimal: true,
		cells: w.cells[:0], pts: w.pts[:0], pvs: w.pvs[:0], pqs: w.pqs[:0], chunks: w.chunks[:0]}
	w.firstOff = rw.off
	return w
}

// push adds samples after those pushed before. The writer keeps no
// reference to the slices.
func pushSamples[Q ~uint8](w *seriesWriter, ts []int64, vs []float64, qs []Q) {
	if len(ts) == 0 {
		return
	}
	if w.n == 0 {
		w.minT, w.prevEnd = ts[0], ts[0]
	}
	w.n += int64(len(ts))
	w.lastV, w.lastQ = vs[len(vs)-1], model.Quality(qs[len(qs)-1])
	if w.decimal {
		w.exp, w.decimal = chunkenc.DecimalExponentFrom(w.exp, vs)
	}
	var cw int64
	if w.fine != noTier {
		cw = tierWidth[w.fine]
	}
	for i, t := range ts {
		w.total.addSample(t, vs[i])
		if cw > 0 {
			s := floorTo(t, cw)
			if len(w.cells) == 0 || w.cells[len(w.cells)-1].start != s {
				w.cells = append(w.cells, cell{start: s})
			}
			w.cells[len(w.cells)-1].addSample(t, vs[i])
		}
	}
	if !w.dropRaw {
		pendSamples(w, ts, vs, qs)
	}
}

// pendSamples adds samples after those pending to the chunks to write,
// writing the chunks whose end is decided.
func pendSamples[Q ~uint8](w *seriesWriter, ts []int64, vs []float64, qs []Q) {
	if len(w.pts) == 0 {
		// Chunks whose end is decided are cut from the piece itself.
		i := w.cut(ts, vs, qs, false)
		ts, vs, qs = ts[i:], vs[i:], qs[i:]
	}
	w.pts = append(w.pts, ts...)
	w.pvs = append(w.pvs, vs...)
	for _, q := range qs {
		w.pqs = append(w.pqs, uint8(q))
	}
	if i := w.cut(w.pts, w.pvs, w.pqs, false); i > 0 {
		k := copy(w.pts, w.pts[i:])
		copy(w.pvs, w.pvs[i:])
		copy(w.pqs, w.pqs[i:])
		w.pts, w.pvs, w.pqs = w.pts[:k], w.pvs[:k], w.pqs[:k]
	}
}

// cut writes the chunks of ts whose end is decided, all of them when
// last, and returns how many samples they took. More than maxChunk
// samples decide a chunk: its first cell ends within maxChunk, and the
// whole cells it takes after that stay within chunkTarget.
func (w *seriesWriter) cut(ts []int64, vs []float64, qs any, last bool) int {
	i := 0
	for i < len(ts) && (last || len(ts)-i > maxChunk) {
		j := chunkEnd(ts, i, w.fine)
		w.writeChunk(ts[i:j], vs[i:j], qs, i, j)
		i = j
	}
	return i
}

// chunkEnd returns where the chunk that starts at sample i ends: for a
// series with tiers, on a boundary of a finest cell, taking whole further
// cells while it stays at or under chunkTarget samples, so that a query
// edge inside a cell decodes one short chunk; a sparse series is cut
// every maxChunk samples.
func chunkEnd(ts []int64, i int, fine uint8) int {
	n := len(ts)
	lim := min(i+maxChunk, n)
	if fine == noTier {
		return lim
	}
	w := tierWidth[fine]
	j := i + 1
	end := floorTo(ts[i], w) + w
	for j < lim && ts[j] < end {
		j++
	}
	for j < n {
		end := floorTo(ts[j], w) + w
		k := j
		for k < n && ts[k] < end {
			k++
		}
		if k-i > chunkTarget {
			break
		}
		j = k
	}
	return j
}

// writeChunk writes samples [i, j) as one chunk block; qs is the
// qualities of the whole slice ([]uint8 or []model.Quality).
func (w *seriesWriter) writeChunk(ts []int64, vs []float64, qs any, i, j int) {
	rw := w.rw
	// Times are stored relative to the chunk's first, which the index
	// holds: the chunk's own first timestamp then costs one byte.
	rw.rel = rw.rel[:0]
	for _, t := range ts {
		rw.rel = append(rw.rel, t-ts[0])
	}
	rw.buf = chunkenc.AppendTimestamps(rw.buf[:0], rw.rel)
	rw.buf = chunkenc.AppendFloats(rw.buf, vs)
	rw.qbuf = rw.qbuf[:0]
	switch q := qs.(type) {
	case []uint8:
		rw.qbuf = append(rw.qbuf, q[i:j]...)
	case []model.Quality:
		for _, x := range q[i:j] {
			rw.qbuf = append(rw.qbuf, uint8(x))
		}
	}
	rw.buf = chunkenc.AppendQualities(rw.buf, rw.qbuf)
	_, l := rw.block(rw.buf)
	w.addChunkRef(ts[0], ts[len(ts)-1], len(ts), l)
}

// copyChunk writes chunk c of run r to the series as it is, checksum
// included: its payload holds its times relative to its first, so it
// reads the same anywhere. Pending samples are written first.
func (w *seriesWriter) copyChunk(r *runFile, c *chunkRef) {
	w.writePending()
	w.rw.write(r.data[c.off : c.off+c.len])
	w.addChunkRef(c.minT, c.maxT, int(c.n), uint64(c.len))
}

// addChunkRef adds the index reference of the chunk just written.
// Chunks are contiguous: only lengths are stored, and times as deltas,
// which the index's compression shrinks further.
func (w *seriesWriter) addChunkRef(minT, maxT int64, n int, blockLen uint64) {
	w.chunks = binary.AppendVarint(w.chunks, minT-w.prevEnd)
	w.chunks = binary.AppendVarint(w.chunks, maxT-minT)
	w.chunks = binary.AppendUvarint(w.chunks, uint64(n))
	w.chunks = binary.AppendUvarint(w.chunks, blockLen)
	w.prevEnd = maxT
	w.nChunks++
}

// writePending writes the pending samples as chunks, the last one
// ending with them.
func (w *seriesWriter) writePending() {
	if len(w.pts) > 0 {
		w.cut(w.pts, w.pvs, w.pqs, true)
		w.pts, w.pvs, w.pqs = w.pts[:0], w.pvs[:0], w.pqs[:0]
	}
}

// finish writes the last chunks and the tiers and adds the series to the
// run's index. A series given no sample is left out.
func (w *seriesWriter) finish() {
	if w.n == 0 {
		return
	}
	rw := w.rw
	if !w.dropRaw {
		w.writePending()
	}
	if w.decimal {
		w.total.sum = roundDecimal(w.total.sum, w.exp)
	}
	// Room for the entry's fields and its chunk and tier references.
	x := growDouble(rw.index, 128+len(w.chunks)+2*binary.MaxVarintLen64*numTiers)
	x = binary.AppendUvarint(x, uint64(w.id))
	x = binary.AppendUvarint(x, uint64(w.n))
	x = binary.AppendVarint(x, w.minT)
	x = binary.AppendVarint(x, w.total.lastK)
	x = appendF64(x, w.lastV)
	x = append(x, byte(w.lastQ), w.fine)
	x = appendF64(x, w.total.sum)
	x = appendF64(x, w.total.min)
	x = appendF64(x, w.total.max)
	x = appendF64(x, w.total.first)
	x = binary.AppendUvarint(x, uint64(w.nChunks))
	x = binary.AppendUvarint(x, uint64(w.firstOff))
	x = append(x, w.chunks...)
	if w.fine != noTier {
		partStart := rw.part * partitionMs
		tiers := rollUp(w.fine, w.cells, w.exp, w.decimal)
		for l := int(w.fine); l < numTiers; l++ {
			rw.buf = appendTier(rw.buf[:0], partStart, tierWidth[l], tiers[l], rw.scrI, rw.scrF)
			_, ln := rw.block(rw.buf)
			x = binary.AppendUvarint(x, uint64(len(tiers[l])))
			x = binary.AppendUvarint(x, ln)
		}
	}
	rw.index = x
	rw.n++
}
