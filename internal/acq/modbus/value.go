package modbus

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Type is the data type a tag reads from registers or bits.
type Type uint8

// The supported types.
const (
	Uint16 Type = iota
	Int16
	Uint32
	Int32
	Uint64
	Int64
	Float32
	Float64
	Bool
)

var typeNames = [...]string{"uint16", "int16", "uint32", "int32", "uint64", "int64", "float32", "float64", "bool"}

// String returns the type's name, the word the configuration file uses.
func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Registers returns how many 16-bit registers the type spans. Bool spans one
// register when read from a register area (non-zero is true) and one bit in
// a bit area.
func (t Type) Registers() uint16 {
	switch t {
	case Uint32, Int32, Float32:
		return 2
	case Uint64, Int64, Float64:
		return 4
	}
	return 1
}

// Order is the byte order of a multi-byte value across registers, named by
// where the bytes of the big-endian value ABCD (or ABCDEFGH) land on the
// wire. Two independent swaps make the four orders: the word swap reverses
// the order of the registers and the byte swap exchanges the two bytes
// inside each register.
type Order uint8

// The four orders.
const (
	ABCD Order = iota // big endian, the Modbus default
	CDAB              // word swap: low register first (common on PLCs)
	BADC              // byte swap inside each register
	DCBA              // little endian: both swaps
)

var orderNames = [...]string{"ABCD", "CDAB", "BADC", "DCBA"}

// String returns the order's name, the word the configuration file uses.
func (o Order) String() string {
	if int(o) < len(orderNames) {
		return orderNames[o]
	}
	return fmt.Sprintf("order(%d)", uint8(o))
}

func (o Order) wordSwap() bool { return o == CDAB || o == DCBA }
func (o Order) byteSwap() bool { return o == BADC || o == DCBA }

// normalize copies the wire bytes src into dst (same length, even) as a
// big-endian value.
func normalize(dst, src []byte, o Order) {
	n := len(src) / 2
	for i := range n {
		j := i
		if o.wordSwap() {
			j = n - 1 - i
		}
		hi, lo := src[2*j], src[2*j+1]
		if o.byteSwap() {
			hi, lo = lo, hi
		}
		dst[2*i], dst[2*i+1] = hi, lo
	}
}

// DecodeUint64 returns the raw bits of the value of type t at the start of
// raw, in big-endian order, zero-extended to 64 bits. Signed and float types
// keep their bit pattern; use DecodeFloat64 for a number.
func DecodeUint64(raw []byte, t Type, o Order) (uint64, error) {
	n := int(t.Registers()) * 2
	if len(raw) < n {
		return 0, fmt.Errorf("decode %s: %d bytes, want %d", t, len(raw), n)
	}
	var b [8]byte
	normalize(b[:n], raw[:n], o)
	switch n {
	case 2:
		return uint64(binary.BigEndian.Uint16(b[:])), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(b[:])), nil
	}
	return binary.BigEndian.Uint64(b[:]), nil
}

// DecodeFloat64 decodes the value of type t at the start of raw (register
// bytes as read from the wire) as a float64, the historian's sample type.
// 64-bit integers beyond 2^53 lose precision.
func DecodeFloat64(raw []byte, t Type, o Order) (float64, error) {
	u, err := DecodeUint64(raw, t, o)
	if err != nil {
		return 0, err
	}
	switch t {
	case Uint16, Uint32, Uint64:
		return float64(u), nil
	case Int16:
		return float64(int16(u)), nil
	case Int32:
		return float64(int32(u)), nil
	case Int64:
		return float64(int64(u)), nil
	case Float32:
		return float64(math.Float32frombits(uint32(u))), nil
	case Float64:
		return math.Float64frombits(u), nil
	case Bool:
		if u != 0 {
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("decode %s: unknown type", t)
}

// AppendEncoded appends v encoded as type t in order o: the register bytes a
// write request or the server's bank carries. Integer types round v to the
// nearest integer and refuse values out of their range; Bool encodes
// non-zero as 1.
func AppendEncoded(dst []byte, v float64, t Type, o Order) ([]byte, error) {
	if math.IsNaN(v) && t != Float32 && t != Float64 {
		return dst, fmt.Errorf("encode %s: NaN", t)
	}
	var u uint64
	r := math.Round(v)
	inRange := func(lo, hi float64) error {
		if r < lo || r > hi {
			return fmt.Errorf("encode %s: %g out of range", t, v)
		}
		return nil
	}
	var err error
	switch t {
	case Uint16:
		err, u = inRange(0, math.MaxUint16), uint64(r)
	case Int16:
		err, u = inRange(math.MinInt16, math.MaxInt16), uint64(uint16(int16(r)))
	case Uint32:
		err, u = inRange(0, math.MaxUint32), uint64(r)
	case Int32:
		err, u = inRange(math.MinInt32, math.MaxInt32), uint64(uint32(int32(r)))
	case Uint64:
		// 2^64 itself is representable as a float64 but not as a uint64.
		if err = inRange(0, math.MaxUint64); err == nil && r >= 1<<64 {
			err = fmt.Errorf("encode %s: %g out of range", t, v)
		}
		u = uint64(r)
	case Int64:
		if err = inRange(math.MinInt64, math.MaxInt64); err == nil && r >= 1<<63 {
			err = fmt.Errorf("encode %s: %g out of range", t, v)
		}
		u = uint64(int64(r))
	case Float32:
		u = uint64(math.Float32bits(float32(v)))
	case Float64:
		u = math.Float64bits(v)
	case Bool:
		if v != 0 {
			u = 1
		}
	default:
		err = fmt.Errorf("encode %s: unknown type", t)
	}
	if err != nil {
		return dst, err
	}
	n := int(t.Registers()) * 2
	var be [8]byte
	binary.BigEndian.PutUint64(be[:], u)
	start := len(dst)
	dst = append(dst, be[8-n:]...)
	// The orders are involutions, so normalizing big-endian bytes with the
	// same order yields the wire order.
	normalize(dst[start:], be[8-n:], o)
	return dst, nil
}
