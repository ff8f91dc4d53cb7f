package chunkenc

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// appendXOR writes vs as a Gorilla-style XOR stream, header byte included.
// Each value after the first is XORed with the previous one; a zero XOR
// costs one bit, and a non-zero one stores only its meaningful bits,
// reusing the previous leading/trailing-zero window when it fits.
func appendXOR(dst []byte, vs []float64) []byte {
	dst = append(dst, modeXOR<<5)
	w := bitWriter{buf: dst}
	prev := math.Float64bits(vs[0])
	w.write(prev, 64)
	// No window yet: 65 leading zeros never fit, forcing a new window.
	pl, pt := uint(65), uint(0)
	for _, v := range vs[1:] {
		cur := math.Float64bits(v)
		x := cur ^ prev
		prev = cur
		if x == 0 {
			w.write(0, 1)
			continue
		}
		lz, tz := uint(bits.LeadingZeros64(x)), uint(bits.TrailingZeros64(x))
		if lz >= pl && tz >= pt {
			w.write(0b01, 2) // 1 then 0, least significant bit first
			w.write(x>>pt, 64-pl-pt)
			continue
		}
		sig := 64 - lz - tz
		w.write(0b11, 2)
		w.write(uint64(lz), 6)
		w.write(uint64(sig-1), 6)
		w.write(x>>tz, sig)
		pl, pt = lz, tz
	}
	return w.flush()
}

// decodeXOR decodes len(out) values of an XOR stream (after its header byte).
func decodeXOR(out []float64, src []byte) ([]byte, error) {
	r := bitReader{src: src}
	prev, ok := r.read(64)
	if !ok {
		return src, corrupt("floats: truncated XOR stream")
	}
	out[0] = math.Float64frombits(prev)
	pl, pt := uint(65), uint(0)
	for i := 1; i < len(out); i++ {
		ctl, ok := r.read(1)
		if !ok {
			return src, corrupt("floats: truncated XOR stream")
		}
		if ctl == 1 {
			newWin, ok := r.read(1)
			if !ok {
				return src, corrupt("floats: truncated XOR stream")
			}
			if newWin == 1 {
				lz, ok1 := r.read(6)
				s, ok2 := r.read(6)
				if !ok1 || !ok2 || lz+s+1 > 64 {
					return src, corrupt("floats: bad XOR window")
				}
				pl, pt = uint(lz), uint(64-lz-s-1)
			} else if pl > 64 {
				return src, corrupt("floats: XOR window used before set")
			}
			x, ok := r.read(64 - pl - pt)
			if !ok {
				return src, corrupt("floats: truncated XOR stream")
			}
			prev ^= x << pt
		}
		out[i] = math.Float64frombits(prev)
	}
	return src[(r.pos+7)/8:], nil
}

// bitWriter appends a little-endian bit stream to buf.
type bitWriter struct {
	buf []byte
	acc uint64
	n   uint // bits held in acc
}

// write appends the k <= 64 low bits of v.
func (w *bitWriter) write(v uint64, k uint) {
	if k == 0 {
		return
	}
	if k < 64 {
		v &= 1<<k - 1
	}
	w.acc |= v << w.n
	if w.n+k >= 64 {
		w.buf = binary.LittleEndian.AppendUint64(w.buf, w.acc)
		w.acc = v >> (64 - w.n)
		w.n = w.n + k - 64
	} else {
		w.n += k
	}
}

// flush writes the bits still held, padded with zeros to a whole byte.
func (w *bitWriter) flush() []byte {
	for w.n > 0 {
		w.buf = append(w.buf, byte(w.acc))
		w.acc >>= 8
		w.n -= min(w.n, 8)
	}
	return w.buf
}

// bitReader reads a little-endian bit stream written by bitWriter.
type bitReader struct {
	src []byte
	pos uint // bits consumed
}

// read returns the next k <= 64 bits, or false if src has fewer left.
func (r *bitReader) read(k uint) (uint64, bool) {
	if k == 0 {
		return 0, true
	}
	end := r.pos + k
	if end > uint(len(r.src))*8 {
		return 0, false
	}
	b, sh := int(r.pos>>3), r.pos&7
	v := load64(r.src, b) >> sh
	if sh+k > 64 {
		v |= uint64(r.src[b+8]) << (64 - sh)
	}
	if k < 64 {
		v &= 1<<k - 1
	}
	r.pos = end
	return v, true
}
