package chunkenc

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
)

// This file holds the bit-packed groups, the payload of the packed and
// sloped kinds of the integer column: one group shares a base, a bit width,
// a list of exceptions and, for the sloped kind, a linear trend.

// slopeShift is the number of fractional bits of a group's slope: the
// trend added to value i of a group is (slope*i) >> slopeShift, so a slope
// is resolved to 1/16 of a unit per sample.
const slopeShift = 4

// maxSlope bounds the fitted slope (in units per sample) so that the
// fixed-point trend stays far from int64 overflow for sane data; steeper
// groups simply get no trend.
const maxSlope = 1 << 40

// groupSlope fits a least-squares line to x and returns its slope in
// fixed point with slopeShift fractional bits.
func groupSlope(x []int64) int64 {
	g := len(x)
	if g < 3 {
		return 0
	}
	// With i centred on its mean, the slope is sum(i'*x)/sum(i'^2).
	// Values are taken relative to x[0] so float64 keeps their precision.
	mid := float64(g-1) / 2
	var sxy float64
	for i, v := range x {
		sxy += (float64(i) - mid) * float64(v-x[0])
	}
	sxx := float64(g) * float64(g*g-1) / 12
	b := sxy / sxx
	if !(b > -maxSlope && b < maxSlope) {
		return 0
	}
	return int64(math.Round(b * (1 << slopeShift)))
}

// trend is the fixed-point linear trend of value i of a group.
func trend(slope int64, i int) int64 { return (slope * int64(i)) >> slopeShift }

// maxExcWidth is the largest width that may carry exceptions, so that 2^w
// and the exception codes stay within 64 bits.
const maxExcWidth = 56

// excCode encodes a value v that falls outside the window [base, base+2^w)
// as its distance from the window: even codes lie above it, odd below, so
// values just outside the window, the common case for noisy signals, take
// one byte.
func excCode(v, base int64, w uint) uint64 {
	r := int64(uint64(v) - uint64(base))
	if r >= 0 {
		return (uint64(r) - 1<<w) << 1
	}
	return uint64(-(r+1))<<1 | 1
}

// excValue is the inverse of excCode.
func excValue(c uint64, base int64, w uint) int64 {
	var r int64
	if c&1 == 0 {
		r = int64(c>>1 + 1<<w)
	} else {
		r = -int64(c>>1) - 1
	}
	return int64(uint64(base) + uint64(r))
}

// groupPlan picks the width w and base of one group that minimise its size
// when values outside [base, base+2^w) are stored as exceptions, and
// returns that size in bytes.
func groupPlan(x []int64, prevBase int64) (cost int, w uint, base int64) {
	g := len(x)
	lo, hi := x[0], x[0]
	for _, v := range x {
		lo = min(lo, v)
		hi = max(hi, v)
	}
	fullW := uint(bits.Len64(uint64(hi) - uint64(lo)))
	cost = 1 + packedLen(g, fullW) + uvarintLen(zigzag(lo-prevBase))
	// Groups of 4 bits or less are searched directly: their sort is one
	// pass of 16 buckets, cheaper than mayExcept's histogram.
	if fullW > 0 && fullW <= maxExcWidth+1 && (fullW <= 4 || mayExcept(x, lo, fullW, cost)) {
		return searchExceptions(x, lo, fullW, prevBase, cost)
	}
	return cost, fullW, lo
}

// searchExceptions is groupPlan's search for a width under fullW whose
// window leaves values out as exceptions, starting from the group's size
// bestCost at fullW (base lo).
func searchExceptions(x []int64, lo int64, fullW uint, prevBase int64, bestCost int) (int, uint, int64) {
	g := len(x)
	bestW, bestBase := fullW, lo
	var sorted [groupSize]int64
	s := sorted[:g]
	sortGroup(s, x, lo, fullW)
	for w := fullW - 1; ; w-- {
		// Find the window of width 2^w covering the most values.
		lim := uint64(1) << w
		bestI, bestCnt := 0, 0
		j := 0
		for i := 0; i < g; i++ {
			j = max(j, i)
			for j < g && uint64(s[j])-uint64(s[i]) < lim {
				j++
			}
			if j-i > bestCnt {
				bestI, bestCnt = i, j-i
			}
			if j == g {
				break
			}
		}
		exc := g - bestCnt
		if exc*2 > g {
			break
		}
		base := s[bestI]
		cost := 2 + packedLen(g, w) + uvarintLen(zigzag(base-prevBase)) + exc
		for _, v := range s[:bestI] {
			cost += uvarintLen(excCode(v, base, w))
		}
		for _, v := range s[bestI+bestCnt:] {
			cost += uvarintLen(excCode(v, base, w))
		}
		if cost < bestCost {
			bestW, bestBase, bestCost = w, base, cost
		}
		if w == 0 || cost > bestCost+g/4 {
			break
		}
	}
	return bestCost, bestW, bestBase
}

// mayExcept reports whether some width under fullW might make group x
// (in [lo, lo+2^fullW)) smaller than bestCost, its size at fullW, judged
// from a histogram of at most 16 buckets of equal width B: a window of
// 2^w values spans at most 2^w/B+1 buckets (2 when it is narrower than a
// bucket), so those buckets bound the values it covers from above, and
// every value left out costs at least two bytes (its position and code).
// When it reports false, no width groupPlan's search tries can win, and
// the search, which sorts the group, is skipped with the same result:
// most groups, whose values spread over their range, are decided here.
func mayExcept(x []int64, lo int64, fullW uint, bestCost int) bool {
	g := len(x)
	kb := min(fullW, 4)
	shift := fullW - kb
	var count [16]int
	buckets := count[:1<<kb]
	for _, v := range x {
		buckets[(uint64(v)-uint64(lo))>>shift]++
	}
	// cover is an upper bound of the values a window of m buckets holds.
	cover := func(m int) int {
		m = min(m, len(buckets))
		sum := 0
		for _, c := range buckets[:m] {
			sum += c
		}
		most := sum
		for i := m; i < len(buckets); i++ {
			sum += buckets[i] - buckets[i-m]
			most = max(most, sum)
		}
		return most
	}
	wins := func(w uint, m int) bool {
		exc := g - cover(m)
		return exc*2 <= g && 3+packedLen(g, w)+2*exc < bestCost
	}
	for w := int(fullW) - 1; w >= int(shift); w-- {
		if wins(uint(w), 1<<(uint(w)-shift)+1) {
			return true
		}
	}
	// Narrower windows span at most two buckets; the narrowest is the
	// smallest of them.
	return shift > 0 && wins(0, 2)
}

// appendGroup writes one group of at most groupSize values. It picks the
// width w and base that minimise the group's size when values outside
// [base, base+2^w) are stored as exceptions (position byte, then a varint
// code). It returns the base, from which the next group's base is a delta.
func appendGroup(dst []byte, x []int64, prevBase int64) ([]byte, int64) {
	g := len(x)
	_, bestW, bestBase := groupPlan(x, prevBase)

	var packed [groupSize]uint64
	lim := uint64(1) << bestW
	exc := 0
	for i, v := range x {
		d := uint64(v) - uint64(bestBase)
		if bestW < 64 && d >= lim {
			exc++
			continue
		}
		packed[i] = d
	}
	h := byte(bestW)
	if exc > 0 {
		h |= 0x80
	}
	dst = append(dst, h)
	dst = binary.AppendUvarint(dst, zigzag(bestBase-prevBase))
	if exc > 0 {
		dst = append(dst, byte(exc))
	}
	dst = appendPacked(dst, packed[:g], bestW)
	if exc > 0 {
		for i, v := range x {
			if d := uint64(v) - uint64(bestBase); bestW < 64 && d >= lim {
				dst = append(dst, byte(i))
				dst = binary.AppendUvarint(dst, excCode(v, bestBase, bestW))
			}
		}
	}
	return dst, bestBase
}

// sortGroup stores x in ascending order in s. All values lie in
// [lo, lo+2^w); narrow groups, the usual case, are radix sorted on their
// offsets from lo, which is several times faster than a comparison sort
// for 128 values. The w bits are split into as few passes of at most 8
// bits as they need, and the passes share them evenly: a pass costs its
// buckets as well as its values, so 11 bits take two passes of 64 buckets
// rather than one of 256 and one of 8.
func sortGroup(s, x []int64, lo int64, w uint) {
	if w > 24 {
		copy(s, x)
		slices.Sort(s)
		return
	}
	var a, b [groupSize]uint32
	src, tmp := a[:len(x)], b[:len(x)]
	for i, v := range x {
		src[i] = uint32(uint64(v) - uint64(lo))
	}
	passes := (w + 7) / 8
	digit := (w + passes - 1) / max(passes, 1)
	mask := uint32(1)<<digit - 1
	for shift := uint(0); shift < w; shift += digit {
		// Counts fit a byte: a group has at most groupSize <= 255 values.
		var count [256]uint8
		buckets := count[:mask+1]
		for _, d := range src {
			buckets[d>>shift&mask]++
		}
		sum := uint8(0)
		for i, c := range buckets {
			buckets[i] = sum
			sum += c
		}
		for _, d := range src {
			k := d >> shift & mask
			tmp[buckets[k]] = d
			buckets[k]++
		}
		src, tmp = tmp, src
	}
	for i, d := range src {
		s[i] = int64(uint64(lo) + uint64(d))
	}
}

// decodeGroups fills s from bit-packed groups.
// With sloped set, each group starts with its slope (a zigzag varint
// delta from the previous group's) and its trend is added back.
func decodeGroups(s []int64, src []byte, sloped bool, what string) ([]byte, error) {
	var prevBase, slope int64
	for len(s) > 0 {
		g := min(groupSize, len(s))
		if sloped {
			u, k := binary.Uvarint(src)
			if k <= 0 {
				return src, corrupt("%s: bad group slope", what)
			}
			src = src[k:]
			slope += unzigzag(u)
		}
		if len(src) == 0 {
			return src, corrupt("%s: truncated group", what)
		}
		h := src[0]
		w := uint(h & 0x7f)
		if w > 64 {
			return src, corrupt("%s: bit width %d", what, w)
		}
		u, k := binary.Uvarint(src[1:])
		if k <= 0 {
			return src, corrupt("%s: bad group base", what)
		}
		src = src[1+k:]
		base := prevBase + unzigzag(u)
		prevBase = base
		exc := 0
		if h&0x80 != 0 {
			if len(src) == 0 {
				return src, corrupt("%s: truncated group", what)
			}
			exc = int(src[0])
			src = src[1:]
			if exc == 0 || exc > g || w > maxExcWidth {
				return src, corrupt("%s: %d exceptions at width %d", what, exc, w)
			}
		}
		nb := packedLen(g, w)
		if len(src) < nb {
			return src, corrupt("%s: truncated packed values", what)
		}
		unpack(s[:g], src, w, base)
		src = src[nb:]
		for range exc {
			if len(src) == 0 {
				return src, corrupt("%s: truncated exception", what)
			}
			pos := int(src[0])
			c, k := binary.Uvarint(src[1:])
			if pos >= g || k <= 0 {
				return src, corrupt("%s: bad exception", what)
			}
			src = src[1+k:]
			s[pos] = excValue(c, base, w)
		}
		if sloped && slope != 0 {
			for i := range s[:g] {
				s[i] += trend(slope, i)
			}
		}
		s = s[g:]
	}
	return src, nil
}
