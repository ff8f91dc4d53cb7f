package store

import "github.com/pith-historian/pith/internal/model"

// The private head of a bulk load. Its series seal their samples into
// encoded blocks as the live head's do, but of bulkBlockSamples samples
// and at each new day, so that every block lies in one day. A spill then
// writes a sorted series' blocks as the run's chunks as they are (the
// block payload is the chunk payload, docs/format/store.md), decoding them
// only for the totals and rollup cells, and encodes only the raw tails.
// An import of 100,000 tags in time order, whose requests of 200 minutes
// used to be written as runs of 48 samples a tag (chunks too small for a
// merge to copy, so every sample was encoded twice), is so encoded once,
// in chunks that later merges copy.

// bulkBlockSamples is the size of a bulk series' sealed blocks in a head
// of many series: the smallest chunk a merge copies as it is
// (copyMinSamples), so that the raw tails of many series stay small
// (100,000 tails of at most 128 samples hold 218 MB, what the two raw
// heads of 48 a tag held before) while no sealed block is encoded again.
// A head of at most bulkWideSeries series seals blocks of bulkWideBlock
// samples (their tails hold at most 18 MB), chunks as large as a flush
// writes: a week of 100 tags in blocks of 128 took 20% more bytes.
const (
	bulkBlockSamples = copyMinSamples
	bulkWideBlock    = 512
	bulkWideSeries   = 2048
)

// bulkBlock is how many samples a series' tail holds before it seals.
func (h *head) bulkBlock() int {
	if h.count <= bulkWideSeries {
		return bulkWideBlock
	}
	return bulkBlockSamples
}

// appendBulk adds a sample to a numeric bulk series, sealing its tail at
// a new day and once it holds block samples.
func (s *headSeries) appendBulk(t int64, v float64, q model.Quality, block int) {
	s.sealDay(t)
	s.push(t, v, q)
	if len(s.ts) >= block {
		s.seal()
	}
}

// Bounds of a private head, checked after each Add (Tx.full). The raw
// tails hold at most bulkMaxRaw × HeadMaxSamples samples (17 bytes each):
// a head of more series than that allows spills before its tails seal,
// so its chunks are small again, which costs time, not memory. The sealed
// blocks (1.2 bytes a sample on plant data, at most about 9) are written
// out once they hold bulkSealedPerSample × HeadMaxSamples bytes (64 MB by
// default).
const (
	bulkMaxRaw          = 16
	bulkSealedPerSample = 64
)

func newBulkHead() *head { return &head{bulk: true} }

// blockSamples is how many samples the tail of s holds before it seals
// (appendBulk seals a numeric bulk series at its head's bulkBlock).
func (s *headSeries) blockSamples() int {
	if s.bulk {
		return bulkBlockSamples
	}
	return headBlockSamples
}

// maxTail is the most samples the tail of s holds.
func (s *headSeries) maxTail() int {
	if s.bulk {
		return bulkWideBlock
	}
	return headBlockSamples
}

// sealDay seals the tail of a bulk series before a sample of a later day
// than the tail's, so that a sorted series' blocks each lie in one day.
func (s *headSeries) sealDay(t int64) {
	if len(s.ts) == 0 {
		s.dayEnd = (partitionOf(t) + 1) * partitionMs
		return
	}
	// A sample later than the last one is of a later day than the
	// tail's first exactly when it is past the end of that day.
	if t >= s.dayEnd && t > s.lastT {
		s.seal()
		s.dayEnd = (partitionOf(t) + 1) * partitionMs
	}
}

// noteSealed counts the blocks that series s sealed beyond its first nb.
func (h *head) noteSealed(s *headSeries, nb int) {
	for i := max(nb, 0); i < len(s.blocks); i++ {
		h.sealedN += int(s.blocks[i].n)
		h.sealedBytes += len(s.blocks[i].data) + headBlockOverhead
	}
}

// headBlockOverhead is the memory of a headBlock beside its data.
const headBlockOverhead = 48

// writeBulkSeries writes the samples of bulk series s in [lo, hi) (a day
// or part of one) to rw as series id. A sorted numeric series' blocks that
// lie in [lo, hi) become chunks as they are; the rest (the raw tail, a
// block cut by lo or hi) is encoded as rw.add would. The totals, cells
// and tier are those of the samples, as rw.add computes them. d and buf
// are scratch.
func (rw *runWriter) writeBulkSeries(id uint32, s *headSeries, lo, hi int64, d *decodedChunk, buf *runInput) {
	if s.text || !s.sorted || len(s.blocks) == 0 {
		buf.reset()
		buf.id = id
		s.read(lo, hi, buf)
		rw.add(buf, false)
		return
	}
	n, minT, maxT := s.span(lo, hi, d)
	if n == 0 {
		return
	}
	w := rw.beginSeries(id, finestTier(n, minT, maxT), false)
	for i := range s.blocks {
		b := &s.blocks[i]
		if b.maxT < lo || b.minT >= hi {
			continue
		}
		if err := b.decode(false, d); err != nil {
			panic("store: decode head block: " + err.Error())
		}
		if b.minT >= lo && b.maxT < hi {
			observeSamples(w, d.ts, d.vs, d.qs)
			w.copyPayload(b.data, b.minT, b.maxT, int(b.n))
			continue
		}
		buf.reset()
		appendRange(buf, d.ts, d.vs, d.qs, nil, lo, hi)
		pushSamples(w, buf.ts, buf.vs, buf.qs)
	}
	i, j := s.tailRange(lo, hi)
	pushSamples(w, s.ts[i:j], s.vs[i:j], s.qs[i:j])
	w.finish()
}

// span returns how many samples sorted series s holds in [lo, hi), and
// the first and last of their times.
func (s *headSeries) span(lo, hi int64, d *decodedChunk) (n int, minT, maxT int64) {
	add := func(k int, a, b int64) {
		if n == 0 {
			minT = a
		}
		n += k
		maxT = b
	}
	for i := range s.blocks {
		b := &s.blocks[i]
		switch {
		case b.maxT < lo || b.minT >= hi:
		case b.minT >= lo && b.maxT < hi:
			add(int(b.n), b.minT, b.maxT)
		default:
			if err := b.decodeTimes(d); err != nil {
				panic("store: decode head block: " + err.Error())
			}
			for _, t := range d.ts {
				if t >= lo && t < hi {
					add(1, t, t)
				}
			}
		}
	}
	i, j := s.tailRange(lo, hi)
	if j > i {
		add(j-i, s.ts[i], s.ts[j-1])
	}
	return n, minT, maxT
}
