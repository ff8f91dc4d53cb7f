package chunkenc

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// groupSize is the number of values that share one bit width and base in
// the packed form. Larger groups spend fewer header bytes per value but
// adapt more slowly to changes in the data; 128 measured best on the test
// corpora against 64 and 256 (docs/format/chunkenc.md). Positions within a
// group must fit a byte.
const groupSize = 128

// stackValues is the column length up to which encoders keep their scratch
// buffers on the stack; chunks hold about 512 values, so this avoids any
// allocation for them.
const stackValues = 1024

// The integer column header byte: bits 0-1 hold the order, bits 2-3 the kind.
const (
	kindConst  = 0 // every stream value is the same: one zigzag varint
	kindGroups = 1 // bit-packed groups with patched exceptions
	kindRuns   = 2 // run-length: (zigzag varint delta of value, uvarint length) pairs
	kindSloped = 3 // like kindGroups, each group minus its own linear trend
)

// maxOrder is the highest differencing order tried: 0 stores values, 1
// their deltas, 2 their deltas of deltas.
const maxOrder = 2

// AppendInts appends an encoding of vs to dst. The encoder differences the
// values zero, one or two times, then stores the result as a constant, as
// runs, or as bit-packed groups of groupSize values with a per-group base,
// width and patched exceptions, optionally minus a per-group linear trend;
// the order and form with the smallest estimated size win.
func AppendInts(dst []byte, vs []int64) []byte {
	return appendIntColumn(dst, vs)
}

// DecodeInts decodes n integers written by AppendInts from src, appending
// them to dst, and returns the rest of src after them.
func DecodeInts(dst []int64, src []byte, n int) ([]int64, []byte, error) {
	return decodeIntColumn(dst, src, n, "ints")
}

// AppendTimestamps appends an encoding of ts to dst. It is the integer
// column encoding: strictly increasing timestamps at a constant interval
// become a constant delta and cost a few bytes whatever their number;
// jittered ones are packed as their offsets from a per-group linear trend
// or as deltas of deltas, whichever is smaller.
func AppendTimestamps(dst []byte, ts []int64) []byte {
	return appendIntColumn(dst, ts)
}

// DecodeTimestamps decodes n timestamps written by AppendTimestamps from src,
// appending them to dst, and returns the rest of src after them.
func DecodeTimestamps(dst []int64, src []byte, n int) ([]int64, []byte, error) {
	return decodeIntColumn(dst, src, n, "timestamps")
}

// plan is the encoder's choice for one column.
type plan struct {
	order int
	kind  int
	cost  int // estimated bytes
}

// appendIntColumn encodes vs as one integer column.
func appendIntColumn(dst []byte, vs []int64) []byte {
	n := len(vs)
	if n == 0 {
		return dst
	}
	if dst, ok := appendRegular(dst, vs); ok {
		return dst
	}
	var stack [stackValues]int64
	buf := stack[:0]
	if n > stackValues {
		buf = make([]int64, 0, n)
	}

	// Estimate the three orders. Deltas are computed once, then turned
	// into deltas of deltas in place (each step reads only the next,
	// still untouched, element).
	best := estimate(vs, 0)
	if n > 1 {
		d := buf[:n-1]
		for i := range d {
			d[i] = vs[i+1] - vs[i]
		}
		if p := estimate(d, 1); p.cost+uvarintLen(zigzag(vs[0])) < best.cost {
			best = p
			best.cost += uvarintLen(zigzag(vs[0]))
		}
		if n > 2 {
			warm := uvarintLen(zigzag(vs[0])) + uvarintLen(zigzag(d[0]))
			for i := 0; i+1 < len(d); i++ {
				d[i] = d[i+1] - d[i]
			}
			if p := estimate(d[:n-2], 2); p.cost+warm < best.cost {
				best = p
				best.cost += warm
			}
		}
	}

	// Rebuild the chosen stream; order 2 is still in buf.
	var stream []int64
	switch best.order {
	case 0:
		stream = vs
	case 1:
		stream = buf[:n-1]
		for i := range stream {
			stream[i] = vs[i+1] - vs[i]
		}
	case 2:
		stream = buf[:n-2]
	}

	dst = append(dst, byte(best.order|best.kind<<2))
	if best.order >= 1 {
		dst = binary.AppendUvarint(dst, zigzag(vs[0]))
	}
	if best.order == 2 {
		dst = binary.AppendUvarint(dst, zigzag(vs[1]-vs[0]))
	}
	if len(stream) == 0 {
		return dst
	}
	switch best.kind {
	case kindConst:
		dst = binary.AppendUvarint(dst, zigzag(stream[0]))
	case kindRuns:
		dst = appendRuns(dst, stream)
	case kindGroups:
		var prevBase int64
		for len(stream) > 0 {
			g := min(groupSize, len(stream))
			dst, prevBase = appendGroup(dst, stream[:g], prevBase)
			stream = stream[g:]
		}
	case kindSloped:
		var prevBase, prevSlope int64
		var res [groupSize]int64
		for len(stream) > 0 {
			g := min(groupSize, len(stream))
			x := stream[:g]
			slope := groupSlope(x)
			for i, v := range x {
				res[i] = v - trend(slope, i)
			}
			dst = binary.AppendUvarint(dst, zigzag(slope-prevSlope))
			prevSlope = slope
			dst, prevBase = appendGroup(dst, res[:g], prevBase)
			stream = stream[g:]
		}
	}
	return dst
}

// appendRegular encodes vs on its own if it is constant or has a constant
// delta, the common case for timestamps, without weighing the other orders.
func appendRegular(dst []byte, vs []int64) ([]byte, bool) {
	if len(vs) < 2 {
		return dst, false
	}
	d := vs[1] - vs[0]
	for i := 2; i < len(vs); i++ {
		if vs[i]-vs[i-1] != d {
			return dst, false
		}
	}
	if d == 0 {
		dst = append(dst, byte(0|kindConst<<2))
		return binary.AppendUvarint(dst, zigzag(vs[0])), true
	}
	dst = append(dst, byte(1|kindConst<<2))
	dst = binary.AppendUvarint(dst, zigzag(vs[0]))
	return binary.AppendUvarint(dst, zigzag(d)), true
}

// estimate returns the cheapest kind for stream s at the given order and
// its size in bytes. The group size is an upper bound (it ignores the
// savings of exceptions), the others are exact.
func estimate(s []int64, order int) plan {
	if len(s) == 0 {
		return plan{order: order, kind: kindConst, cost: 1}
	}
	groups, sloped := 0, 0
	var prevSlope, prevSBase int64
	nRuns := 1
	var prevBase int64
	prev := s[0]
	for start := 0; start < len(s); start += groupSize {
		g := s[start:min(start+groupSize, len(s))]
		lo, hi := g[0], g[0]
		for _, v := range g {
			lo = min(lo, v)
			hi = max(hi, v)
			if v != prev {
				nRuns++
			}
			prev = v
		}
		w := uint(bits.Len64(uint64(hi) - uint64(lo)))
		// The exact size with exceptions: a few outliers (spikes, their
		// edges in deltas) must not make an order look wide.
		gc, _, gbase := groupPlan(g, prevBase)
		groups += gc
		prevBase = gbase
		if w > 2 && order < 2 {
			// A linear trend in deltas of deltas is a cubic in the values,
			// rare enough not to be worth the fit.
			slope := groupSlope(g)
			slo, shi := g[0], g[0]
			for i, v := range g {
				r := v - trend(slope, i)
				slo = min(slo, r)
				shi = max(shi, r)
			}
			sw := uint(bits.Len64(uint64(shi) - uint64(slo)))
			sloped += 1 + uvarintLen(zigzag(slo-prevSBase)) + uvarintLen(zigzag(slope-prevSlope)) + packedLen(len(g), sw)
			prevSBase, prevSlope = slo, slope
		} else {
			sloped += 2 + uvarintLen(zigzag(lo-prevSBase)) + uvarintLen(zigzag(-prevSlope)) + packedLen(len(g), w)
			prevSBase, prevSlope = lo, 0
		}
	}
	if nRuns == 1 {
		// A single run: the constant kind says the same without the length.
		return plan{order: order, kind: kindConst, cost: 1 + uvarintLen(zigzag(s[0]))}
	}
	best := plan{order: order, kind: kindGroups, cost: 1 + groups}
	if sloped < groups {
		best = plan{order: order, kind: kindSloped, cost: 1 + sloped}
	}
	// A run costs at least two bytes; size the runs only if they may win.
	if 1+2*nRuns <= best.cost {
		if runs := 1 + runsLen(s); runs <= best.cost {
			best = plan{order: order, kind: kindRuns, cost: runs}
		}
	}
	return best
}

// runsLen is the size of appendRuns(nil, s).
func runsLen(s []int64) int {
	size := 0
	var prev int64
	for i := 0; i < len(s); {
		j := i + 1
		for j < len(s) && s[j] == s[i] {
			j++
		}
		size += uvarintLen(zigzag(s[i]-prev)) + uvarintLen(uint64(j-i))
		prev = s[i]
		i = j
	}
	return size
}

// appendRuns writes s as runs of equal values. Each run is the zigzag varint
// of its value minus the previous run's value, then its length as a uvarint.
func appendRuns(dst []byte, s []int64) []byte {
	var prev int64
	for i := 0; i < len(s); {
		j := i + 1
		for j < len(s) && s[j] == s[i] {
			j++
		}
		dst = binary.AppendUvarint(dst, zigzag(s[i]-prev))
		dst = binary.AppendUvarint(dst, uint64(j-i))
		prev = s[i]
		i = j
	}
	return dst
}

// decodeIntColumn decodes n values of an integer column, appending them to
// dst. what names the column in errors.
func decodeIntColumn(dst []int64, src []byte, n int, what string) ([]int64, []byte, error) {
	if n <= 0 {
		return dst, src, nil
	}
	dst = slices.Grow(dst, n)
	out := dst[len(dst) : len(dst)+n]
	rest, err := decodeIntsInto(out, src, what)
	if err != nil {
		return dst, src, err
	}
	return dst[:len(dst)+n], rest, nil
}

// decodeIntsInto decodes len(out) > 0 values of an integer column into out.
func decodeIntsInto(out []int64, src []byte, what string) ([]byte, error) {
	n := len(out)
	if len(src) == 0 {
		return src, corrupt("%s: empty input", what)
	}
	h := src[0]
	src = src[1:]
	order, kind := int(h&3), int(h>>2)
	if order > maxOrder || kind > kindSloped {
		return src, corrupt("%s: bad header %#x", what, h)
	}
	warm := min(order, n)
	for i := 0; i < warm; i++ {
		u, k := binary.Uvarint(src)
		if k <= 0 {
			return src, corrupt("%s: bad warm-up value", what)
		}
		src = src[k:]
		out[i] = unzigzag(u)
	}
	if n <= order {
		return src, nil
	}
	s := out[order:]
	var err error
	switch kind {
	case kindConst:
		u, k := binary.Uvarint(src)
		if k <= 0 {
			return src, corrupt("%s: bad constant", what)
		}
		src = src[k:]
		c := unzigzag(u)
		for i := range s {
			s[i] = c
		}
	case kindRuns:
		src, err = decodeRuns(s, src, what)
	case kindGroups:
		src, err = decodeGroups(s, src, false, what)
	case kindSloped:
		src, err = decodeGroups(s, src, true, what)
	}
	if err != nil {
		return src, err
	}
	// Undo the differencing in place.
	switch order {
	case 1:
		acc := out[0]
		for i := 1; i < n; i++ {
			acc += out[i]
			out[i] = acc
		}
	case 2:
		d := out[1]
		acc := out[0] + d
		out[1] = acc
		for i := 2; i < n; i++ {
			d += out[i]
			acc += d
			out[i] = acc
		}
	}
	return src, nil
}

// decodeRuns fills s from run-length pairs.
func decodeRuns(s []int64, src []byte, what string) ([]byte, error) {
	var v int64
	for len(s) > 0 {
		u, k := binary.Uvarint(src)
		if k <= 0 {
			return src, corrupt("%s: bad run value", what)
		}
		src = src[k:]
		l, k := binary.Uvarint(src)
		if k <= 0 || l == 0 || l > uint64(len(s)) {
			return src, corrupt("%s: bad run length", what)
		}
		src = src[k:]
		v += unzigzag(u)
		for i := range s[:l] {
			s[i] = v
		}
		s = s[l:]
	}
	return src, nil
}
