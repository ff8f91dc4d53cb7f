// Package chunkenc holds the column codecs of the store: timestamps,
// decimal-aware float values, integers and qualities. Each column of a chunk
// is encoded on its own and decodes on its own, without outside state, so a
// query can open one small chunk at a bucket edge cheaply. The byte formats
// are documented in docs/format/chunkenc.md.
//
// All encoders append to a caller's slice and all decoders append to a
// caller's slice and return the unread rest of the input, so columns can be
// laid out back to back. The number of values of a column is not stored: the
// caller keeps it and passes it to the decoder.
package chunkenc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// ErrCorrupt is wrapped by every decoding error caused by bad input bytes.
var ErrCorrupt = errors.New("corrupt column")

// corrupt builds a decoding error that wraps ErrCorrupt.
func corrupt(what string, args ...any) error {
	return fmt.Errorf("decode %s: %w", fmt.Sprintf(what, args...), ErrCorrupt)
}

// zigzag maps signed integers to unsigned ones so that values near zero,
// of either sign, get short encodings.
func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

// unzigzag is the inverse of zigzag.
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// uvarintLen is the length in bytes of binary.AppendUvarint(nil, u).
func uvarintLen(u uint64) int { return (bits.Len64(u|1) + 6) / 7 }

// packedLen is the number of bytes that g values of w bits occupy.
func packedLen(g int, w uint) int { return (g*int(w) + 7) / 8 }

// appendPacked appends vals, each of which must be < 2^w, as a little-endian
// bit stream of exactly packedLen(len(vals), w) bytes: value i occupies bits
// [i*w, (i+1)*w) counted from the least significant bit of the first byte.
func appendPacked(dst []byte, vals []uint64, w uint) []byte {
	if w == 0 {
		return dst
	}
	var acc uint64
	var n uint // bits held in acc
	for _, v := range vals {
		acc |= v << n
		if n+w >= 64 {
			dst = binary.LittleEndian.AppendUint64(dst, acc)
			// The high bits of v that did not fit; a shift by 64 yields 0
			// in Go, which is what n == 0 needs.
			acc = v >> (64 - n)
			n = n + w - 64
		} else {
			n += w
		}
	}
	for n > 0 {
		dst = append(dst, byte(acc))
		acc >>= 8
		n -= min(n, 8)
	}
	return dst
}

// unpack decodes len(dst) values of w bits from the start of src and stores
// base plus each value in dst. The caller guarantees that src holds at least
// packedLen(len(dst), w) bytes; src may run on past them (the next fields of
// the column), which lets most values be read with one unaligned 8-byte load.
func unpack(dst []int64, src []byte, w uint, base int64) {
	if w == 0 {
		for i := range dst {
			dst[i] = base
		}
		return
	}
	mask := ^uint64(0) >> (64 - w)
	i := 0
	if w <= 56 {
		// A value starts at most 7 bits into its first byte, so one 8-byte
		// load always covers it. Loads are independent of each other, which
		// keeps the loop free of serial dependencies.
		for ; i < len(dst); i++ {
			off := uint(i) * w
			b := int(off >> 3)
			if b+8 > len(src) {
				break
			}
			dst[i] = base + int64(binary.LittleEndian.Uint64(src[b:])>>(off&7)&mask)
		}
	}
	for ; i < len(dst); i++ {
		off := uint(i) * w
		b := int(off >> 3)
		lo := load64(src, b) >> (off & 7)
		if off&7+w > 64 {
			// Only widths above 56 reach here: the value spills into a ninth byte.
			lo |= uint64(src[b+8]) << (64 - off&7)
		}
		dst[i] = base + int64(lo&mask)
	}
}

// load64 reads up to 8 little-endian bytes of src at b, padding with zeros
// past the end of src.
func load64(src []byte, b int) uint64 {
	if b+8 <= len(src) {
		return binary.LittleEndian.Uint64(src[b:])
	}
	var v uint64
	for k := 0; b+k < len(src); k++ {
		v |= uint64(src[b+k]) << (8 * k)
	}
	return v
}
