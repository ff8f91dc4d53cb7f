package store

import (
	"encoding/binary"
	"strconv"

	"github.com/pith-historian/pith/internal/store/chunkenc"
)

// Text series in run files. A text series is a run series whose fine byte
// is fineText: it keeps no rollup tiers, its chunks hold timestamps, a
// text column (chunkenc.AppendStrings) and qualities, and its index entry
// ends with its newest value. The layout is in docs/format/store.md.

// fineText marks a text series in a run index (in place of a tier).
const fineText = 0xfe

// reset empties in for reuse by another series, of either kind.
func (in *runInput) reset() {
	in.ts, in.vs, in.qs = in.ts[:0], in.vs[:0], in.qs[:0]
	in.xs = nil
}

// asText turns numeric samples into text: only a number that raced the
// first text of its tag (write.go) meets text, and it is kept as text.
func (in *runInput) asText() {
	if in.xs != nil {
		return
	}
	in.xs = make([]string, len(in.ts))
	for i, v := range in.vs {
		in.xs[i] = strconv.FormatFloat(v, 'g', -1, 64)
		in.vs[i] = 0
	}
}

// mergeText is mergeSamples for text series: b wins on equal times.
func mergeText(dst, a, b *runInput) {
	if len(a.ts) > 0 {
		a.asText()
	}
	if len(b.ts) > 0 {
		b.asText()
	}
	dst.ts, dst.vs, dst.qs = dst.ts[:0], dst.vs[:0], dst.qs[:0]
	dst.xs = []string{}
	i, j := 0, 0
	for i < len(a.ts) || j < len(b.ts) {
		switch {
		case j == len(b.ts) || (i < len(a.ts) && a.ts[i] < b.ts[j]):
			dst.ts, dst.vs, dst.qs = append(dst.ts, a.ts[i]), append(dst.vs, 0), append(dst.qs, a.qs[i])
			dst.xs = append(dst.xs, a.xs[i])
			i++
		default:
			if i < len(a.ts) && a.ts[i] == b.ts[j] {
				i++
			}
			dst.ts, dst.vs, dst.qs = append(dst.ts, b.ts[j]), append(dst.vs, 0), append(dst.qs, b.qs[j])
			dst.xs = append(dst.xs, b.xs[j])
			j++
		}
	}
}

func runsHoldText(runs []*runFile) bool {
	for _, r := range runs {
		if r.text {
			return true
		}
	}
	return false
}

// addText writes one text series: chunks of at most maxChunk samples, no
// tiers. The index entry keeps the layout of a numeric one (value fields
// zero) so that one parser reads both, then adds the newest text.
func (rw *runWriter) addText(in *runInput) {
	n := len(in.ts)
	minT, maxT := in.ts[0], in.ts[n-1]
	x := rw.index
	x = binary.AppendUvarint(x, uint64(in.id))
	x = binary.AppendUvarint(x, uint64(n))
	x = binary.AppendVarint(x, minT)
	x = binary.AppendVarint(x, maxT)
	x = appendF64(x, 0)
	x = append(x, byte(in.qs[n-1]), fineText)
	for k := 0; k < 4; k++ {
		x = appendF64(x, 0) // sum, min, max, first
	}
	var chunks []byte
	nChunks := 0
	firstOff := rw.off
	prevEnd := minT
	for i := 0; i < n; {
		j := min(i+maxChunk, n)
		rw.rel = rw.rel[:0]
		for _, t := range in.ts[i:j] {
			rw.rel = append(rw.rel, t-in.ts[i])
		}
		rw.buf = chunkenc.AppendTimestamps(rw.buf[:0], rw.rel)
		rw.buf = chunkenc.AppendStrings(rw.buf, in.xs[i:j])
		rw.qbuf = rw.qbuf[:0]
		for _, q := range in.qs[i:j] {
			rw.qbuf = append(rw.qbuf, uint8(q))
		}
		rw.buf = chunkenc.AppendQualities(rw.buf, rw.qbuf)
		_, l := rw.block(rw.buf)
		chunks = binary.AppendVarint(chunks, in.ts[i]-prevEnd)
		chunks = binary.AppendVarint(chunks, in.ts[j-1]-in.ts[i])
		chunks = binary.AppendUvarint(chunks, uint64(j-i))
		chunks = binary.AppendUvarint(chunks, l)
		prevEnd = in.ts[j-1]
		nChunks++
		i = j
	}
	x = binary.AppendUvarint(x, uint64(nChunks))
	x = binary.AppendUvarint(x, uint64(firstOff))
	x = append(x, chunks...)
	last := in.xs[n-1]
	x = binary.AppendUvarint(x, uint64(len(last)))
	x = append(x, last...)
	rw.index = x
	rw.n++
}

// decodeTextChunk decodes a text chunk's block payload p into d; d.vs is
// zeros, so numeric code (count, bucketing) reads it like any chunk.
func (r *runFile) decodeTextChunk(c *chunkRef, p []byte, d *decodedChunk) error {
	n := int(c.n)
	var err error
	if d.ts, p, err = chunkenc.DecodeTimestamps(d.ts[:0], p, n); err == nil {
		for i := range d.ts {
			d.ts[i] += c.minT
		}
		if d.xs, p, err = chunkenc.DecodeStrings(d.xs[:0], p, n); err == nil {
			d.qs, _, err = chunkenc.DecodeQualities(d.qs[:0], p, n)
		}
	}
	if err != nil {
		return &CorruptionError{File: r.path, Offset: int64(c.off), Err: err}
	}
	d.vs = append(d.vs[:0], make([]float64, n)...)
	return nil
}
