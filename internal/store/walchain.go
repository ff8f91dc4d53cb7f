package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store/wal"
)

// Chained data records (type 'S', data directory format 7,
// docs/format/store.md "WAL chained data record") are packed records whose
// values may be written as the difference from the same series' previous
// value in the chain: the chained records of one WAL segment since the
// record that starts the chain (wal.Chain). A live value that steps a
// little from the one before then costs a few bits instead of a varint of
// the whole value, which is most of what the WAL writes. Every reader
// meets a chain's records in order from its start (replay reads segments
// from their start; a follower reads its segment from the start before
// its cursor), and a chain never spans a segment or an out-of-space
// rewind, so no reader needs a record outside the segment it reads.
const recChained byte = 'S'

// chainMaxAge is how long a chain lasts before the encoder starts another.
// A damaged record costs the chained records after it up to the next
// start, since their differences refer to values it held: at most this
// long of writes. A start writes every value whole.
const chainMaxAge = 10 * time.Second

// chainMaxSeries bounds the series ids a chain tracks (16 bytes each):
// the values of series past it are always written whole, so that a
// damaged or hostile key cannot make a reader allocate for 2^32 series.
const chainMaxSeries = 1 << 21

// chainMaxPoints bounds the points of a chained record, which can take
// less than a byte each; a larger write goes in packed records.
const chainMaxPoints = 1 << 20

// chainDelta in a chained record's flags byte says the value is the
// series' previous value plus the next difference of the deltas column.
const chainDelta byte = 0x80

// chainKindMask keeps the kind and exponent bits of a flags byte.
const chainKindMask byte = 0x7c

// chainVal is a series' last value in the chain: the integer m written
// for it and its kind and exponent bits (integer or decimal only).
type chainVal struct {
	m     int64
	f     byte
	set   bool
	stamp uint32 // the encoder's record that last looked at it
}

// chainEnc encodes chained records. It is used under DB.orderMu, which
// keeps its encodings in the order of their appends.
type chainEnc struct {
	chain wal.Chain
	began time.Time  // when the chain started
	vals  []chainVal // by series id
	stamp uint32

	// Per point of the record being encoded.
	sid []int64 // series id, -1 for a point keyed by name
	f   []byte  // flags: kind, exponent and quality, chainDelta if a difference
	m   []int64 // the integer written (the difference's whole value if chainDelta)
	zz  []uint64

	keys, times, flags, values, deltas []byte
	names                              map[string]int
	order                              []string
	buf                                []byte
}

func zigzag(d int64) uint64   { return uint64(d<<1) ^ uint64(d>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// exactIn reports whether v is written exactly with kind and exponent bits
// f (an integer or a decimal), and the integer it is written as.
func exactIn(v float64, f byte) (int64, bool) {
	if v == 0 && math.Signbit(v) {
		return 0, false
	}
	switch (f >> 2) & 3 {
	case valInteger:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v), true
		}
	case valDecimal:
		e := f >> packExpShift
		if m := math.Round(v * pow10[e]); math.Abs(m) < 1<<53 && m/pow10[e] == v {
			return int64(m), true
		}
	}
	return 0, false
}

// encode writes pts as one chained record. With start the record starts
// a chain: no value refers to an earlier record. Otherwise a value of a
// series the chain holds, written exactly in the same kind and exponent,
// may be its difference. The chain's values change only by commit, once
// the record is appended.
func (c *chainEnc) encode(pts []model.Point, start bool, id func(string) (uint32, bool)) []byte {
	if c.names == nil {
		c.names = make(map[string]int)
	}
	c.order = recordNames(pts, nil, c.names, c.order, id)
	c.stamp++
	n := len(pts)
	c.sid, c.f, c.m, c.zz = grow(c.sid, n), grow(c.f, n), grow(c.m, n), c.zz[:0]
	var hist [65]int // differences by bit length
	var prev byte
	for i := range pts {
		p := &pts[i]
		c.sid[i] = -1
		var sv *chainVal
		if _, named := c.names[p.Tag]; !named {
			sid, _ := id(p.Tag)
			c.sid[i] = int64(sid)
			if int64(sid) < int64(len(c.vals)) {
				sv = &c.vals[sid]
			}
		}
		if sv != nil && sv.stamp != c.stamp && sv.set && !start {
			// The first of the series' points in this record: later ones
			// are written whole, since the chain changes only at commit.
			sv.stamp = c.stamp
			if m, ok := exactIn(p.V, sv.f); ok {
				z := zigzag(m - sv.m)
				c.f[i], c.m[i] = sv.f|chainDelta|byte(p.Q), m
				c.zz = append(c.zz, z)
				hist[bits.Len64(z)]++
				prev = sv.f
				continue
			}
		} else if sv != nil {
			sv.stamp = c.stamp
		}
		kind, m := packValue(p.V, prev)
		c.f[i], c.m[i] = kind|byte(p.Q), m
		prev = kind
	}
	// The width of the differences: the one that costs least, counting a
	// difference too wide as its varint and the two flag runs it breaks.
	w, best := 0, math.MaxInt
	for cand := 0; cand <= 64; cand++ {
		cost := 0
		for b, k := range hist {
			if k == 0 {
				continue
			}
			if b <= cand {
				cost += k * cand
			} else {
				cost += k * (8*((b+6)/7) + 32)
			}
		}
		if cost < best {
			w, best = cand, cost
		}
	}
	c.keys, c.times, c.flags, c.values = c.keys[:0], c.times[:0], c.flags[:0], c.values[:0]
	var keys, times runEnc
	var flags flagEnc
	bw := bitWriter{buf: append(c.deltas[:0], byte(w))}
	k := 0
	for i := range pts {
		p := &pts[i]
		key := int64(len(c.order)) + c.sid[i]
		if c.sid[i] < 0 {
			key = int64(c.names[p.Tag])
		}
		c.keys = keys.add(c.keys, key)
		c.times = times.add(c.times, p.T)
		f := c.f[i]
		if f&chainDelta != 0 {
			z := c.zz[k]
			k++
			if bits.Len64(z) <= w {
				bw.write(z, w)
			} else {
				f &^= chainDelta
				c.f[i] = f
				c.values = binary.AppendVarint(c.values, c.m[i])
			}
		} else if (f>>2)&3 == valRaw {
			c.values = binary.LittleEndian.AppendUint64(c.values, math.Float64bits(p.V))
		} else {
			c.values = binary.AppendVarint(c.values, c.m[i])
		}
		c.flags = flags.add(c.flags, f)
	}
	if c.deltas = bw.bytes(); bw.n == 0 {
		c.deltas = c.deltas[:0]
	}
	c.keys, c.times, c.flags = keys.end(c.keys), times.end(c.times), flags.end(c.flags)

	dst := appendRecordHead(c.buf[:0], recChained, txnAuto, c.order, n)
	startByte := byte(0)
	if start {
		startByte = 1
	}
	dst = append(dst, startByte)
	for _, col := range [][]byte{c.keys, c.times, c.flags, c.deltas} {
		dst = binary.AppendUvarint(dst, uint64(len(col)))
	}
	dst = append(dst, c.keys...)
	dst = append(dst, c.times...)
	dst = append(dst, c.flags...)
	dst = append(dst, c.deltas...)
	dst = append(dst, c.values...)
	c.buf = dst
	return dst
}

// commit folds the record encode wrote last into the chain, once it is
// appended in chain ch.
func (c *chainEnc) commit(pts []model.Point, start bool, ch wal.Chain) {
	if start {
		clear(c.vals)
		c.began = time.Now()
	}
	c.chain = ch
	for i := range pts {
		sid := c.sid[i]
		if sid < 0 {
			continue
		}
		c.vals = setChainVal(c.vals, sid, c.f[i], c.m[i])
	}
}

// setChainVal records the value written with flags f as series sid's last.
func setChainVal(vals []chainVal, sid int64, f byte, m int64) []chainVal {
	if sid >= chainMaxSeries {
		return vals
	}
	if kind := (f >> 2) & 3; kind != valInteger && kind != valDecimal {
		if sid < int64(len(vals)) {
			vals[sid].set = false
		}
		return vals
	}
	if sid >= int64(len(vals)) {
		vals = append(vals, make([]chainVal, int(sid)+1-len(vals))...)
	}
	v := &vals[sid]
	v.m, v.f, v.set = m, f&chainKindMask, true
	return vals
}

// drop forgets the chain: the next record starts a new one.
func (c *chainEnc) drop() { c.chain = wal.Chain{} }

// starts reports whether the next record must start a chain: there is
// none yet, or it is chainMaxAge old.
func (c *chainEnc) starts() bool {
	return !c.chain.Valid() || time.Since(c.began) >= chainMaxAge
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// bitWriter packs values of w bits, least significant bit first.
type bitWriter struct {
	buf []byte
	acc uint64
	nb  uint // bits in acc
	n   int  // values written
}

func (b *bitWriter) write(v uint64, w int) {
	b.n++
	for w > 0 {
		take := min(w, 32) // acc holds under 8 bits here: 32 more fit
		b.acc |= (v & (1<<take - 1)) << b.nb
		b.nb += uint(take)
		v >>= take
		w -= take
		for b.nb >= 8 {
			b.buf = append(b.buf, byte(b.acc))
			b.acc >>= 8
			b.nb -= 8
		}
	}
}

func (b *bitWriter) bytes() []byte {
	if b.nb > 0 {
		b.buf = append(b.buf, byte(b.acc))
		b.acc, b.nb = 0, 0
	}
	return b.buf
}

// bitReader reads what bitWriter packed.
type bitReader struct {
	b   []byte
	acc uint64
	nb  uint
}

func (r *bitReader) read(w int) (uint64, bool) {
	var v uint64
	got := 0
	for got < w {
		if r.nb == 0 {
			if len(r.b) == 0 {
				return 0, false
			}
			r.acc, r.nb, r.b = uint64(r.b[0]), 8, r.b[1:]
		}
		take := min(w-got, int(r.nb))
		v |= (r.acc & (1<<take - 1)) << got
		r.acc >>= take
		r.nb -= uint(take)
		got += take
	}
	return v, true
}

// walChain is a reader's view of the chain of the records it reads: each
// series' last value, where it is known. A value is known from the record
// that wrote it whole on, as long as every record since was read, in
// order and without a gap: a gap or a new segment forgets every value.
type walChain struct {
	next wal.Pos // where the last record entered ends
	vals []chainVal
}

// enter is called with every record read, in log order, before it is
// decoded.
func (c *walChain) enter(pos, end wal.Pos) {
	if !pos.Equal(c.next) { // next is in the segment of the last record
		clear(c.vals)
	}
	c.next = end
}

// at reports whether the chain has entered every record before pos.
func (c *walChain) at(pos wal.Pos) bool { return c.next.Equal(pos) && c.next != (wal.Pos{}) }

var errNoChain = errors.New("chained data record refers to a value not read (a damaged or missing record before it)")

// decodeChained decodes all the points of a chained record (b: the rest
// after its point count) into d, taking and updating the values of c. A
// record that does not decode makes c forget every value, but one that
// only refers to values c does not know updates the others (the values it
// holds whole) and forgets those.
func (d *dataRecord) decodeChained(b []byte, c *walChain) (err error) {
	if c == nil {
		return errNoChain
	}
	missing := false
	defer func() {
		if err != nil && !missing {
			clear(c.vals)
		}
	}()
	if len(b) < 1 || b[0] > 1 {
		return fmt.Errorf("bad chain byte in chained data record")
	}
	if b[0] == 1 {
		clear(c.vals)
	}
	cols, err := splitColumns(b[1:], 4)
	if err != nil {
		return err
	}
	var keys, times runDec
	var flags flagDec
	keys.b, times.b, flags.b = cols[0], cols[1], cols[2]
	deltas, vals := cols[3], cols[4]
	var br bitReader
	w := -1
	if len(deltas) > 0 {
		if deltas[0] > 64 {
			return fmt.Errorf("bad difference width in chained data record")
		}
		w, br.b = int(deltas[0]), deltas[1:]
	}
	k := int64(len(d.names))
	d.ck, d.ct, d.cv, d.cq = d.ck[:0], d.ct[:0], d.cv[:0], d.cq[:0]
	ndelta := 0
	for i := 0; i < d.n; i++ {
		key, err := keys.next()
		if err != nil {
			return err
		}
		if key < 0 || key > 1<<32+k || key > math.MaxInt {
			return fmt.Errorf("bad key in data record")
		}
		t, err := times.next()
		if err != nil {
			return err
		}
		f, err := flags.next()
		if err != nil {
			return err
		}
		q := model.Quality(f & 3)
		kind, e := (f>>2)&3, (f&0x7f)>>packExpShift
		if kind != valDecimal && e != 0 || kind == valDecimal && (e < 1 || e > 4) || kind == valText ||
			f&chainDelta != 0 && (kind == valRaw || key < k) {
			return fmt.Errorf("bad flags %#x in data record", f)
		}
		var m int64
		var v float64
		known := true
		switch {
		case f&chainDelta != 0:
			if w < 0 {
				return errShortRecord
			}
			z, ok := br.read(w)
			if !ok {
				return errShortRecord
			}
			ndelta++
			sid := key - k
			if known = sid < int64(len(c.vals)) && c.vals[sid].set && c.vals[sid].f == f&chainKindMask; known {
				m = c.vals[sid].m + unzigzag(z)
			}
		case kind == valRaw:
			if len(vals) < 8 {
				return errShortRecord
			}
			v, vals = math.Float64frombits(binary.LittleEndian.Uint64(vals)), vals[8:]
		default:
			var n int
			if m, n = binary.Varint(vals); n <= 0 {
				return errShortRecord
			}
			vals = vals[n:]
		}
		if !known {
			missing = true
			if sid := key - k; sid < int64(len(c.vals)) {
				c.vals[sid].set = false
			}
			continue
		}
		if kind != valRaw {
			if m <= -1<<53 || m >= 1<<53 {
				return fmt.Errorf("bad sample in data record")
			}
			v = float64(m)
			if kind == valDecimal {
				v /= pow10[e]
			}
		}
		if q > model.QualityUncertain || model.CheckValue(v) != nil {
			return fmt.Errorf("bad sample in data record")
		}
		if key >= k {
			c.vals = setChainVal(c.vals, key-k, f, m)
		}
		d.ck, d.ct, d.cv, d.cq = append(d.ck, int(key)), append(d.ct, t), append(d.cv, v), append(d.cq, q)
	}
	used := (ndelta*max(w, 0) + 7) / 8
	if len(vals) > 0 || len(keys.b) > 0 || len(times.b) > 0 || len(flags.b) > 0 ||
		keys.left > 0 || times.left > 0 || flags.left > 0 ||
		(len(deltas) > 0) != (ndelta > 0) || len(br.b) != 0 || len(deltas) > 0 && used != len(deltas)-1 ||
		br.acc != 0 {
		missing = false
		return errors.New("bytes left after the points of a chained data record")
	}
	if missing {
		return errNoChain
	}
	return nil
}

// nextChained is next for a chained record, decoded whole by decodeChained.
func (d *dataRecord) nextChained() (key int, t int64, v float64, q model.Quality, err error) {
	i := d.ci
	if i >= len(d.ck) {
		return 0, 0, 0, 0, errors.New("read past the points of a chained data record")
	}
	d.ci++
	d.isText = false
	return d.ck[i], d.ct[i], d.cv[i], d.cq[i], nil
}
