package chunkenc

import (
	"encoding/binary"
	"slices"
)

// qualEscape marks a run whose quality does not fit the two low bits: the
// quality follows as one byte.
const qualEscape = 3

// AppendQualities appends a run-length encoding of qs to dst. Each run is a
// uvarint of length<<2 | quality, where quality 3 means the quality byte
// follows; the last run stores length 0, meaning "to the end", so a column
// of one quality (all good, the usual case) costs one byte.
func AppendQualities(dst []byte, qs []uint8) []byte {
	for i := 0; i < len(qs); {
		j := i + 1
		for j < len(qs) && qs[j] == qs[i] {
			j++
		}
		l := uint64(j - i)
		if j == len(qs) {
			l = 0
		}
		q := qs[i]
		if q < qualEscape {
			dst = binary.AppendUvarint(dst, l<<2|uint64(q))
		} else {
			dst = binary.AppendUvarint(dst, l<<2|qualEscape)
			dst = append(dst, q)
		}
		i = j
	}
	return dst
}

// DecodeQualities decodes n qualities written by AppendQualities from src,
// appending them to dst, and returns the rest of src after them.
func DecodeQualities(dst []uint8, src []byte, n int) ([]uint8, []byte, error) {
	start := len(dst)
	dst = slices.Grow(dst, n)
	rest := src
	for left := n; left > 0; {
		u, k := binary.Uvarint(rest)
		if k <= 0 {
			return dst[:start], src, corrupt("qualities: bad run")
		}
		rest = rest[k:]
		q := uint8(u & 3)
		if q == qualEscape {
			if len(rest) == 0 {
				return dst[:start], src, corrupt("qualities: truncated run")
			}
			q = rest[0]
			rest = rest[1:]
		}
		l := u >> 2
		if l == 0 {
			l = uint64(left)
		}
		if l > uint64(left) {
			return dst[:start], src, corrupt("qualities: run of %d past the end", l)
		}
		run := dst[len(dst) : len(dst)+int(l)]
		for i := range run {
			run[i] = q
		}
		dst = dst[:len(dst)+int(l)]
		left -= int(l)
	}
	return dst, rest, nil
}
