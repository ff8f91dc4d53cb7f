package store

import "github.com/pith-historian/pith/internal/store/chunkenc"

// headBlock is a sealed part of a head series: up to headBlockSamples
// samples in arrival order, encoded as the payload of a run chunk block
// (docs/format/store.md, "Chunk block payload"): timestamps relative to
// base, values (floats, or texts for a text series), qualities. It lives
// only in memory, so it has no checksum; the WAL holds the same samples
// until a flush has written them to a run.
type headBlock struct {
	base       int64 // the time of the block's first sample
	minT, maxT int64 // the smallest and largest time it holds
	n          int32
	data       []byte
}

// seal encodes the tail into a new block and empties the tail, keeping
// its arrays for the next block.
func (s *headSeries) seal() {
	n := len(s.ts)
	if n == 0 {
		return
	}
	b := headBlock{base: s.ts[0], minT: s.ts[0], maxT: s.ts[0], n: int32(n)}
	var rel [headBlockSamples]int64
	var qs [headBlockSamples]uint8
	for i, t := range s.ts {
		rel[i] = t - b.base
		b.minT, b.maxT = min(b.minT, t), max(b.maxT, t)
		qs[i] = uint8(s.qs[i])
	}
	var scratch [8 * headBlockSamples]byte
	p := chunkenc.AppendTimestamps(scratch[:0], rel[:n])
	if s.text {
		p = chunkenc.AppendStrings(p, s.xs)
	} else {
		p = chunkenc.AppendFloats(p, s.vs)
	}
	p = chunkenc.AppendQualities(p, qs[:n])
	// An exact copy: the scratch (or append's spare room) would otherwise
	// stay resident with the block.
	b.data = append([]byte(nil), p...)
	s.blocks = append(s.blocks, b)
	s.ts, s.vs, s.qs = s.ts[:0], s.vs[:0], s.qs[:0]
	if s.xs != nil {
		// The strings are in the block now; the tail must not keep them.
		clear(s.xs)
		s.xs = s.xs[:0]
	}
}

// decode decodes the block into d, reusing d's arrays.
func (b *headBlock) decode(text bool, d *decodedChunk) error {
	n := int(b.n)
	p, err := b.decodeTimesFrom(d)
	if err != nil {
		return err
	}
	if text {
		if d.xs, p, err = chunkenc.DecodeStrings(d.xs[:0], p, n); err != nil {
			return err
		}
		d.vs = append(d.vs[:0], make([]float64, n)...)
	} else {
		d.xs = nil
		if d.vs, p, err = chunkenc.DecodeFloats(d.vs[:0], p, n); err != nil {
			return err
		}
	}
	d.qs, _, err = chunkenc.DecodeQualities(d.qs[:0], p, n)
	return err
}

// decodeTimes decodes only the block's timestamps into d.ts.
func (b *headBlock) decodeTimes(d *decodedChunk) error {
	_, err := b.decodeTimesFrom(d)
	return err
}

func (b *headBlock) decodeTimesFrom(d *decodedChunk) ([]byte, error) {
	var err error
	var p []byte
	if d.ts, p, err = chunkenc.DecodeTimestamps(d.ts[:0], b.data, int(b.n)); err != nil {
		return nil, err
	}
	for i := range d.ts {
		d.ts[i] += b.base
	}
	return p, nil
}

// memBytes approximates the memory of s: its blocks' bytes and headers and
// the capacity of its tail.
func (s *headSeries) memBytes() int {
	n := 0
	for i := range s.blocks {
		n += cap(s.blocks[i].data) + 48
	}
	n += cap(s.ts)*8 + cap(s.vs)*8 + cap(s.qs) + cap(s.xs)*16
	for _, x := range s.xs {
		n += len(x)
	}
	return n + 160
}
