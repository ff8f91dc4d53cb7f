package chunkenc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MaxText is the longest value a text column holds, in bytes. The store
// refuses longer text before it is written; the decoder refuses it too, so
// damaged bytes cannot make it allocate without bound.
const MaxText = 4096

// AppendStrings appends a text column of len(xs) values: a dictionary of
// the distinct values in order of first appearance, each front-coded
// against the one before (states and batch ids share long prefixes), then
// an integer column of the values' dictionary indexes, so that a state
// held for a while costs one run. The layout is in docs/format/chunkenc.md.
func AppendStrings(dst []byte, xs []string) []byte {
	if len(xs) == 0 {
		return dst
	}
	index := make(map[string]int64, 8)
	var dict []string
	idx := make([]int64, len(xs))
	for i, x := range xs {
		k, ok := index[x]
		if !ok {
			k = int64(len(dict))
			index[x] = k
			dict = append(dict, x)
		}
		idx[i] = k
	}
	dst = binary.AppendUvarint(dst, uint64(len(dict)))
	prev := ""
	for _, x := range dict {
		p := 0
		for p < len(prev) && p < len(x) && prev[p] == x[p] {
			p++
		}
		dst = binary.AppendUvarint(dst, uint64(p))
		dst = binary.AppendUvarint(dst, uint64(len(x)-p))
		dst = append(dst, x[p:]...)
		prev = x
	}
	return AppendInts(dst, idx)
}

var errBadText = errors.New("bad text column")

// DecodeStrings decodes a text column of n values appended to dst and
// returns the bytes after it.
func DecodeStrings(dst []string, src []byte, n int) ([]string, []byte, error) {
	if n == 0 {
		return dst, src, nil
	}
	d, k := binary.Uvarint(src)
	if k <= 0 || d == 0 || d > uint64(n) || d > uint64(len(src)) {
		return dst, src, errBadText
	}
	src = src[k:]
	dict := make([]string, d)
	prev := ""
	for i := range dict {
		p, k := binary.Uvarint(src)
		if k <= 0 || p > uint64(len(prev)) {
			return dst, src, errBadText
		}
		src = src[k:]
		l, k := binary.Uvarint(src)
		if k <= 0 || l > uint64(len(src)-k) || p+l > MaxText {
			return dst, src, errBadText
		}
		x := prev[:p] + string(src[k:k+int(l)])
		src = src[k+int(l):]
		dict[i] = x
		prev = x
	}
	var scratch [64]int64
	idx, rest, err := DecodeInts(scratch[:0], src, n)
	if err != nil {
		return dst, src, fmt.Errorf("text indexes: %w", err)
	}
	for _, k := range idx {
		if k < 0 || k >= int64(len(dict)) {
			return dst, src, errBadText
		}
		dst = append(dst, dict[k])
	}
	return dst, rest, nil
}
