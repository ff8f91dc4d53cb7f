package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"unicode/utf8"

	"github.com/pith-historian/pith/internal/model"
)

// Packed data records (data directory format 5, docs/format/store.md "WAL
// packed data record") hold the same points as 'D' and 'R' records, with
// the per-point fields moved into columns: series keys, times and flags as
// runs of equal steps, then the values alone. A live batch (one value of
// each of many tags, one timestamp, ids in order) then costs its values
// and little else: about 2 bytes a point instead of 7. Each record stands
// alone (no state from earlier records), so replay and followers read any
// record by itself, as before.
const (
	recPacked        byte = 'P' // a data record ('D') in columns
	recPackedReplica byte = 'Q' // a replica record ('R') in columns
)

// isDataRecord reports whether a WAL record's type is a data record of
// either layout, and isReplicaRecord whether it is a replica.
func isDataRecord(typ byte) bool {
	return typ == recData || typ == recReplica || typ == recPacked || typ == recPackedReplica || typ == recChained
}

func isReplicaRecord(typ byte) bool { return typ == recReplica || typ == recPackedReplica }

// A packed point's flags byte: quality in bits 0-1, kind in bits 2-3 (as
// in 'D' records), and for a decimal (kind 2) its exponent (1..4) in bits
// 4-6, so that points with one exponent share a run of flags.
const packExpShift = 4

// packScratch holds the columns of a record being encoded.
type packScratch struct {
	keys, times, flags, vals []byte
}

var packPool = sync.Pool{New: func() any { return new(packScratch) }}

// runEnc run-length encodes a column of int64 as (zigzag varint step,
// uvarint count) pairs: count values, each the previous one plus step. The
// value before the first is 0.
type runEnc struct {
	prev, step int64
	n          uint64
}

func (r *runEnc) add(dst []byte, v int64) []byte {
	step := v - r.prev
	r.prev = v
	if r.n > 0 && step == r.step {
		r.n++
		return dst
	}
	dst = r.end(dst)
	r.step, r.n = step, 1
	return dst
}

func (r *runEnc) end(dst []byte) []byte {
	if r.n == 0 {
		return dst
	}
	dst = binary.AppendVarint(dst, r.step)
	return binary.AppendUvarint(dst, r.n)
}

// flagEnc run-length encodes the flags column as (byte, uvarint count).
type flagEnc struct {
	f byte
	n uint64
}

func (r *flagEnc) add(dst []byte, f byte) []byte {
	if r.n > 0 && f == r.f {
		r.n++
		return dst
	}
	dst = r.end(dst)
	r.f, r.n = f, 1
	return dst
}

func (r *flagEnc) end(dst []byte) []byte {
	if r.n == 0 {
		return dst
	}
	return binary.AppendUvarint(append(dst, r.f), r.n)
}

// packValue chooses how a number is written: like appendValue (an integer,
// a decimal of 1 to 4 decimals, or the raw bits), except that a value the
// previous point's decimal exponent writes exactly keeps that exponent, so
// that a series of values such as 57.3, 58, 58.1 stays one run of flags.
// It returns the kind and exponent bits and the integer written (unused
// for raw values).
func packValue(v float64, prev byte) (kind byte, m int64) {
	negZero := v == 0 && math.Signbit(v)
	if e := prev >> packExpShift; (prev>>2)&3 == valDecimal && e >= 1 && e <= 4 && !negZero {
		if f := math.Round(v * pow10[e]); math.Abs(f) < 1<<53 && f/pow10[e] == v {
			return valDecimal<<2 | e<<packExpShift, int64(f)
		}
	}
	if !negZero && v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return valInteger << 2, int64(v)
	}
	if !negZero {
		for e := byte(1); e <= 4; e++ {
			f := math.Round(v * pow10[e])
			if math.Abs(f) < 1<<53 && f/pow10[e] == v {
				return valDecimal<<2 | e<<packExpShift, int64(f)
			}
		}
	}
	return valRaw << 2, 0
}

// appendPackedRecord encodes numeric points, then text points, as one
// packed data record of type typ (recPacked or recPackedReplica) of
// transaction txn. names, order and id are as for appendMixedRecord.
func appendPackedRecord(dst []byte, typ byte, txn uint64, pts []model.Point, tpts []model.TextPoint, names map[string]int, order []string, id func(string) (uint32, bool)) []byte {
	order = recordNames(pts, tpts, names, order, id)
	key := func(tag string) int64 {
		if k, ok := names[tag]; ok {
			return int64(k)
		}
		sid, _ := id(tag)
		return int64(len(order)) + int64(sid)
	}
	s := packPool.Get().(*packScratch)
	defer packPool.Put(s)
	s.keys, s.times, s.flags, s.vals = s.keys[:0], s.times[:0], s.flags[:0], s.vals[:0]
	var keys, times runEnc
	var flags flagEnc
	var prev byte
	for i := range pts {
		p := &pts[i]
		s.keys = keys.add(s.keys, key(p.Tag))
		s.times = times.add(s.times, p.T)
		kind, m := packValue(p.V, prev)
		prev = kind | byte(p.Q)
		s.flags = flags.add(s.flags, prev)
		switch kind & (3 << 2) {
		case valRaw << 2:
			s.vals = binary.LittleEndian.AppendUint64(s.vals, math.Float64bits(p.V))
		default:
			s.vals = binary.AppendVarint(s.vals, m)
		}
	}
	for i := range tpts {
		p := &tpts[i]
		s.keys = keys.add(s.keys, key(p.Tag))
		s.times = times.add(s.times, p.T)
		s.flags = flags.add(s.flags, byte(p.Q)|valText<<2)
		s.vals = binary.AppendUvarint(s.vals, uint64(len(p.Text)))
		s.vals = append(s.vals, p.Text...)
	}
	s.keys, s.times, s.flags = keys.end(s.keys), times.end(s.times), flags.end(s.flags)

	dst = appendRecordHead(dst, typ, txn, order, len(pts)+len(tpts))
	dst = binary.AppendUvarint(dst, uint64(len(s.keys)))
	dst = binary.AppendUvarint(dst, uint64(len(s.times)))
	dst = binary.AppendUvarint(dst, uint64(len(s.flags)))
	dst = append(dst, s.keys...)
	dst = append(dst, s.times...)
	dst = append(dst, s.flags...)
	return append(dst, s.vals...)
}

// runDec decodes a column written by runEnc.
type runDec struct {
	b          []byte
	prev, step int64
	left       uint64
}

func (r *runDec) next() (int64, error) {
	if r.left == 0 {
		step, n := binary.Varint(r.b)
		if n <= 0 {
			return 0, errShortRecord
		}
		c, k := binary.Uvarint(r.b[n:])
		if k <= 0 || c == 0 {
			return 0, errBadRun
		}
		r.b, r.step, r.left = r.b[n+k:], step, c
	}
	r.left--
	r.prev += r.step
	return r.prev, nil
}

// flagDec decodes the flags column written by flagEnc.
type flagDec struct {
	b    []byte
	f    byte
	left uint64
}

func (r *flagDec) next() (byte, error) {
	if r.left == 0 {
		if len(r.b) < 2 {
			return 0, errShortRecord
		}
		c, k := binary.Uvarint(r.b[1:])
		if k <= 0 || c == 0 {
			return 0, errBadRun
		}
		r.f, r.b, r.left = r.b[0], r.b[1+k:], c
	}
	r.left--
	return r.f, nil
}

var errBadRun = errors.New("bad run in packed data record")

// packedCols is the decoding state of a packed record's columns.
type packedCols struct {
	keys, times runDec
	flags       flagDec
	vals        []byte
	done        int // points decoded
}

// decodePacked reads the column lengths of a packed record after its
// point count; b is the rest of the record.
func (d *dataRecord) decodePacked(b []byte) error {
	cols, err := splitColumns(b, 3)
	if err != nil {
		return err
	}
	c := &d.cols
	*c = packedCols{}
	c.keys.b, c.times.b, c.flags.b, c.vals = cols[0], cols[1], cols[2], cols[3]
	return nil
}

// splitColumns reads n column lengths from b and returns the n columns
// and what follows them.
func splitColumns(b []byte, n int) ([5][]byte, error) {
	var cols [5][]byte
	var l [4]uint64
	sum := uint64(0)
	for i := range n {
		v, k := binary.Uvarint(b)
		if k <= 0 || v > uint64(len(b)) {
			return cols, errShortRecord
		}
		l[i], b, sum = v, b[k:], sum+v
	}
	if sum > uint64(len(b)) {
		return cols, errShortRecord
	}
	for i := range n {
		cols[i], b = b[:l[i]], b[l[i]:]
	}
	cols[n] = b
	return cols, nil
}

// nextPacked is next for a packed record. After the last point it checks
// that every column was used up exactly, so that a record has one reading.
func (d *dataRecord) nextPacked() (key int, t int64, v float64, q model.Quality, err error) {
	c := &d.cols
	if c.done >= d.n {
		return 0, 0, 0, 0, errors.New("read past the points of a packed data record")
	}
	k, err := c.keys.next()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	if k < 0 || k > 1<<32+int64(len(d.names)) || k > math.MaxInt { // as in next
		return 0, 0, 0, 0, fmt.Errorf("bad key in data record")
	}
	if t, err = c.times.next(); err != nil {
		return 0, 0, 0, 0, err
	}
	flags, err := c.flags.next()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	q = model.Quality(flags & 3)
	e := flags >> packExpShift
	d.isText = false
	b := c.vals
	switch kind := (flags >> 2) & 3; {
	case kind != valDecimal && e != 0, kind == valDecimal && (e < 1 || e > 4), flags&0x80 != 0:
		return 0, 0, 0, 0, fmt.Errorf("bad flags %#x in data record", flags)
	case kind == valRaw:
		if len(b) < 8 {
			return 0, 0, 0, 0, errShortRecord
		}
		v, b = math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:]
	case kind == valInteger || kind == valDecimal:
		m, n := binary.Varint(b)
		if n <= 0 {
			return 0, 0, 0, 0, errShortRecord
		}
		v, b = float64(m), b[n:]
		if kind == valDecimal {
			v /= pow10[e]
		}
	default: // text
		l, n := binary.Uvarint(b)
		if n <= 0 || l > model.MaxTextLen || l > uint64(len(b)-n) {
			return 0, 0, 0, 0, errShortRecord
		}
		d.text, b = b[n:n+int(l)], b[n+int(l):]
		if !utf8.Valid(d.text) || bytes.ContainsAny(d.text, "\r\n") {
			return 0, 0, 0, 0, fmt.Errorf("bad text in data record")
		}
		d.isText = true
	}
	c.vals = b
	c.done++
	if q > model.QualityUncertain || model.CheckValue(v) != nil {
		return 0, 0, 0, 0, fmt.Errorf("bad sample in data record")
	}
	if c.done == d.n && (len(c.vals) > 0 || len(c.keys.b) > 0 || len(c.times.b) > 0 || len(c.flags.b) > 0 ||
		c.keys.left > 0 || c.times.left > 0 || c.flags.left > 0) {
		return 0, 0, 0, 0, errors.New("bytes left after the points of a packed data record")
	}
	return int(k), t, v, q, nil
}
