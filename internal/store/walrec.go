package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/pith-historian/pith/internal/model"
)

// WAL record types. A record's first byte is its type; the wal package frames
// and checksums records, this file gives them meaning. The layout is in
// docs/format/store.md.
const (
	recData byte = 'D' // txn uvarint (0: commits itself), names, points
	// recReplica is a data record whose points were copied from another
	// Pith (the peer of a redundant pair, WriteReplica): replay applies
	// it as a data record, followers mark its entry Replica so that
	// forwarders do not send again what the peer forwarded itself.
	recReplica byte = 'R'
	recCommit  byte = 'C' // id uvarint: the bulk transaction or delete id committed
	recAbort   byte = 'A' // id uvarint: the bulk transaction id rolled back
	recOpen    byte = 'O' // no payload: the store opened; nothing begun before it commits later
)

// txnAuto marks a data record that commits itself. A data record with
// another txn is a copy of a bulk transaction's points, written for the
// followers only (follow.go): replay never applies it, the run files hold
// those points.
const txnAuto = 0

// appendTxnRecord encodes a commit or abort record of transaction id.
func appendTxnRecord(dst []byte, typ byte, id uint64) []byte {
	return binary.AppendUvarint(append(dst, typ), id)
}

// decodeTxnRecord decodes a commit or abort record and returns its id.
func decodeTxnRecord(rec []byte) (uint64, error) {
	if len(rec) < 2 || (rec[0] != recCommit && rec[0] != recAbort) {
		return 0, errors.New("not a commit or abort record")
	}
	id, n := binary.Uvarint(rec[1:])
	if n <= 0 || n != len(rec)-1 {
		return 0, errShortRecord
	}
	return id, nil
}

// appendDataRecord encodes pts as one data record of transaction txn with
// every tag written by name.
func appendDataRecord(dst []byte, txn uint64, pts []model.Point, names map[string]int, order []string) []byte {
	return appendDataRecordIDs(dst, txn, pts, names, order, nil)
}

// appendDataRecordIDs encodes pts as one data record. A tag that id knows
// (a series already in the series file, so replay resolves it the same
// way) is written as its id, any other by name, once per record. A scan of
// 100 registers then costs about 5 bytes a point, not 20: the WAL is most
// of what an SD card is written.
func appendDataRecordIDs(dst []byte, txn uint64, pts []model.Point, names map[string]int, order []string, id func(string) (uint32, bool)) []byte {
	return appendMixedRecord(dst, txn, pts, nil, names, order, id)
}

// appendRecordHead appends what both data record layouts start with: the
// type byte, the transaction, the names written in full, and the count of
// points.
func appendRecordHead(dst []byte, typ byte, txn uint64, order []string, points int) []byte {
	dst = append(dst, typ)
	dst = binary.AppendUvarint(dst, txn)
	dst = binary.AppendUvarint(dst, uint64(len(order)))
	for _, n := range order {
		dst = binary.AppendUvarint(dst, uint64(len(n)))
		dst = append(dst, n...)
	}
	return binary.AppendUvarint(dst, uint64(points))
}

// appendMixedRecord encodes numeric points, then text points, as one data
// record (text values are point kind 3). This is the layout of Pith before
// data directory format 5, which reads it still; the store now writes
// packed records (walpack.go), and this encoder stays for the tests and
// golden files of the older layout.
func appendMixedRecord(dst []byte, txn uint64, pts []model.Point, tpts []model.TextPoint, names map[string]int, order []string, id func(string) (uint32, bool)) []byte {
	order = recordNames(pts, tpts, names, order, id)
	dst = appendRecordHead(dst, recData, txn, order, len(pts)+len(tpts))
	var prev int64
	for i := range pts {
		p := &pts[i]
		key, ok := names[p.Tag]
		if !ok {
			sid, _ := id(p.Tag)
			key = len(order) + int(sid)
		}
		dst = binary.AppendUvarint(dst, uint64(key))
		dst = binary.AppendVarint(dst, p.T-prev)
		prev = p.T
		dst = appendValue(dst, p.V, p.Q)
	}
	for i := range tpts {
		p := &tpts[i]
		key, ok := names[p.Tag]
		if !ok {
			sid, _ := id(p.Tag)
			key = len(order) + int(sid)
		}
		dst = binary.AppendUvarint(dst, uint64(key))
		dst = binary.AppendVarint(dst, p.T-prev)
		prev = p.T
		dst = append(dst, byte(p.Q)|valText<<2)
		dst = binary.AppendUvarint(dst, uint64(len(p.Text)))
		dst = append(dst, p.Text...)
	}
	return dst
}

// Value kinds of a point in a data record: the flags byte holds the
// quality in bits 0-1 and the kind in bits 2-3.
const (
	valRaw     = 0 // 8 bytes, the float64 bits
	valInteger = 1 // zigzag varint
	valDecimal = 2 // exponent byte e (1..4), zigzag varint mantissa: v = m / 10^e
	valText    = 3 // uvarint length, UTF-8 bytes (data directory format 3)
)

// recordNames fills names and order with the tags of pts and tpts that
// id does not know, in order of first appearance (names maps each to its
// index in order), and returns order.
func recordNames(pts []model.Point, tpts []model.TextPoint, names map[string]int, order []string, id func(string) (uint32, bool)) []string {
	clear(names)
	order = order[:0]
	add := func(tag string) {
		if id != nil {
			if _, ok := id(tag); ok {
				return
			}
		}
		if _, ok := names[tag]; !ok {
			names[tag] = len(order)
			order = append(order, tag)
		}
	}
	for i := range pts {
		add(pts[i].Tag)
	}
	for i := range tpts {
		add(tpts[i].Tag)
	}
	return order
}

// appendValue writes a value in its shortest exact form.
func appendValue(dst []byte, v float64, q model.Quality) []byte {
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 && !(v == 0 && math.Signbit(v)) {
		dst = append(dst, byte(q)|valInteger<<2)
		return binary.AppendVarint(dst, int64(v))
	}
	for e := 1; e <= 4; e++ {
		m := math.Round(v * pow10[e])
		if math.Abs(m) < 1<<53 && m/pow10[e] == v {
			dst = append(dst, byte(q)|valDecimal<<2, byte(e))
			return binary.AppendVarint(dst, int64(m))
		}
	}
	dst = append(dst, byte(q)|valRaw<<2)
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(v))
}

var errShortRecord = errors.New("record too short")

// dataRecord is a decoded view of a data record; names alias the record bytes.
type dataRecord struct {
	txn   uint64
	names [][]byte
	n     int
	body  []byte // the points, decoded by next
	prev  int64
	// isText and text describe the point next returned last: a text
	// point has value 0 and its text here (aliasing the record bytes).
	isText bool
	text   []byte
	// packed says the record is a packed one (walpack.go), read from cols.
	packed bool
	cols   packedCols
	// chained says the record is a chained one (walchain.go), decoded
	// whole into ck, ct, cv and cq against chain, which the caller sets.
	chained bool
	chain   *walChain
	ck      []int
	ct      []int64
	cv      []float64
	cq      []model.Quality
	ci      int
}

func decodeDataRecord(rec []byte, d *dataRecord) error {
	if len(rec) == 0 || !isDataRecord(rec[0]) {
		return errors.New("not a data record")
	}
	b := rec[1:]
	txn, k := binary.Uvarint(b)
	if k <= 0 {
		return errShortRecord
	}
	b = b[k:]
	nn, k := binary.Uvarint(b)
	if k <= 0 || nn > uint64(len(b)) {
		return errShortRecord
	}
	b = b[k:]
	d.txn = txn
	d.names = d.names[:0]
	for i := uint64(0); i < nn; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return errShortRecord
		}
		d.names = append(d.names, b[k:k+int(l)])
		b = b[k+int(l):]
	}
	np, k := binary.Uvarint(b)
	if k <= 0 || np > uint64(len(b)) && (rec[0] != recChained || np > chainMaxPoints) {
		// A point takes at least a byte, but in a chained record, where
		// an unchanged value can take no bits at all.
		return errShortRecord
	}
	d.n = int(np)
	d.body = b[k:]
	d.prev = 0
	d.packed = rec[0] == recPacked || rec[0] == recPackedReplica
	d.chained, d.ci = rec[0] == recChained, 0
	if d.chained {
		if txn != txnAuto {
			return errors.New("chained data record of a transaction")
		}
		return d.decodeChained(d.body, d.chain)
	}
	if d.packed {
		return d.decodePacked(d.body)
	}
	return nil
}

// next decodes the next point: its key (an index into names, or
// len(names)+series id), time, value and quality.
func (d *dataRecord) next() (key int, t int64, v float64, q model.Quality, err error) {
	if d.chained {
		return d.nextChained()
	}
	if d.packed {
		return d.nextPacked()
	}
	b := d.body
	k, n := binary.Uvarint(b)
	// A key must fit an int: on a 32-bit board a series id past 2^31
	// (which no store of that size reaches) is refused, not wrapped.
	if n <= 0 || k > 1<<32+uint64(len(d.names)) || k > math.MaxInt {
		return 0, 0, 0, 0, fmt.Errorf("bad key in data record")
	}
	b = b[n:]
	dt, n := binary.Varint(b)
	if n <= 0 || len(b)-n < 1 {
		return 0, 0, 0, 0, errShortRecord
	}
	b = b[n:]
	t = d.prev + dt
	d.prev = t
	d.isText = false
	flags := b[0]
	b = b[1:]
	q = model.Quality(flags & 3)
	switch flags >> 2 {
	case valRaw:
		if len(b) < 8 {
			return 0, 0, 0, 0, errShortRecord
		}
		v = math.Float64frombits(binary.LittleEndian.Uint64(b))
		b = b[8:]
	case valInteger:
		m, n := binary.Varint(b)
		if n <= 0 {
			return 0, 0, 0, 0, errShortRecord
		}
		v, b = float64(m), b[n:]
	case valDecimal:
		if len(b) < 2 || b[0] < 1 || b[0] > 4 {
			return 0, 0, 0, 0, errShortRecord
		}
		e := b[0]
		m, n := binary.Varint(b[1:])
		if n <= 0 {
			return 0, 0, 0, 0, errShortRecord
		}
		v, b = float64(m)/pow10[e], b[1+n:]
	case valText:
		l, n := binary.Uvarint(b)
		if n <= 0 || l > model.MaxTextLen || l > uint64(len(b)-n) {
			return 0, 0, 0, 0, errShortRecord
		}
		d.text, b = b[n:n+int(l)], b[n+int(l):]
		if !utf8.Valid(d.text) || bytes.ContainsAny(d.text, "\r\n") || q > model.QualityUncertain {
			return 0, 0, 0, 0, fmt.Errorf("bad text in data record")
		}
		d.body, d.isText = b, true
		return int(k), t, 0, q, nil
	default:
		return 0, 0, 0, 0, fmt.Errorf("bad value kind in data record")
	}
	d.body = b
	if q > model.QualityUncertain || model.CheckValue(v) != nil {
		return 0, 0, 0, 0, fmt.Errorf("bad sample in data record")
	}
	return int(k), t, v, q, nil
}
