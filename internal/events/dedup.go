package events

import (
	"bytes"
	"hash/maphash"

	"github.com/pith-historian/pith/internal/store/wal"
)

// idTable remembers client ids for deduplication in a bounded number of
// bytes: not the ids themselves but a keyed 64-bit hash of each, with
// its expiry and the WAL position of the record that holds it. A hash
// match is only a candidate: the Collector confirms it against the id
// in that record (see Collector.confirm) before it drops an event, so a
// collision costs a read, never an event. The entries sit in a circular
// slice in arrival order, so that the oldest go first, and an
// open-addressing index maps a hash to them; neither holds a pointer,
// so the GC never scans them. It is not safe for concurrent use; the
// Collector guards it with its mutex.
type idTable struct {
	seed  maphash.Seed
	hash  func(seed maphash.Seed, id []byte) uint64 // maphash.Bytes; tests force collisions
	max   int                                       // entries at most
	ents  []idEntry                                 // circular: the i-th oldest is ents[(head+i)%len(ents)]
	head  int
	n     int      // entries held, tombstones included
	index []uint32 // linear probing by hash; 0 is empty, else a slot of ents plus one
	mem   tableMem // what holds ents and index
}

// idEntry is one remembered id.
type idEntry struct {
	hash uint64 // keyed hash of the id as the canonical line writes it
	exp  int64  // Unix ms after which the id is forgotten; tombstone when 0
	seg  uint32 // WAL position of the record holding the id
	off  uint32
}

// Sizes of the id table, in bytes.
const (
	idEntryBytes    = 24 // one idEntry
	idIndexBytes    = 4  // one index slot; the index has at least two per entry
	minIDTableSlots = 1024
)

// DefaultDedupMemory is the default bound on the memory that remembering
// ids and signatures takes (Options.DedupMemory): 8 MiB hold 218,453 ids
// (7 MiB) and 4,096 signatures, and keep the whole collector within
// 64 MB of RSS under load, the GC's headroom included.
const DefaultDedupMemory = 8 << 20

// idTableCap returns the most entries that fit in bytes with their index
// (a power of two of at least twice as many slots), and at most maxIDs.
func idTableCap(bytes int64, maxIDs int) int {
	best := 0
	for slots := int64(minIDTableSlots); slots*idIndexBytes < bytes; slots *= 2 {
		n := min(slots/2, (bytes-slots*idIndexBytes)/idEntryBytes)
		best = max(best, int(n))
	}
	return max(1, min(best, maxIDs))
}

func newIDTable(maxEntries int) *idTable {
	return &idTable{seed: maphash.MakeSeed(), hash: maphash.Bytes, max: maxEntries}
}

// sum returns the table's hash of id (as the canonical line writes it).
func (t *idTable) sum(id []byte) uint64 { return t.hash(t.seed, id) }

// len returns the entries held.
func (t *idTable) len() int { return t.n }

// memory returns the bytes the table holds.
func (t *idTable) memory() int64 {
	return int64(len(t.ents))*idEntryBytes + int64(len(t.index))*idIndexBytes
}

// add remembers the id of hash h in the record at pos until exp,
// forgetting the oldest id when the table is full.
func (t *idTable) add(h uint64, pos wal.Pos, exp int64) {
	if t.n >= t.max {
		t.pop()
	}
	if t.n == len(t.ents) {
		t.resize(min(max(2*len(t.ents), minIDTableSlots/2), t.max))
	}
	slot := (t.head + t.n) % len(t.ents)
	t.ents[slot] = idEntry{hash: h, exp: exp, seg: pos.Segment, off: uint32(pos.Offset)}
	t.n++
	mask := len(t.index) - 1
	i := int(h) & mask
	for t.index[i] != 0 {
		i = (i + 1) & mask
	}
	t.index[i] = uint32(slot) + 1
}

// find calls fn on every live entry of hash h until fn returns true, and
// returns whether one did.
func (t *idTable) find(h uint64, fn func(e *idEntry) bool) bool {
	if t.n == 0 {
		return false
	}
	mask := len(t.index) - 1
	for i := int(h) & mask; t.index[i] != 0; i = (i + 1) & mask {
		e := &t.ents[t.index[i]-1]
		if e.hash == h && e.exp != 0 && fn(e) {
			return true
		}
	}
	return false
}

// remove forgets the entry of hash h in the record at pos, if any.
func (t *idTable) remove(h uint64, pos wal.Pos) {
	t.find(h, func(e *idEntry) bool {
		if e.seg != pos.Segment || int64(e.off) != pos.Offset {
			return false
		}
		// A tombstone: it leaves the index when it is the oldest.
		e.exp = 0
		return true
	})
}

// oldest returns the oldest entry, or false when there is none.
func (t *idTable) oldest() (idEntry, bool) {
	if t.n == 0 {
		return idEntry{}, false
	}
	return t.ents[t.head], true
}

// expire forgets the entries that expired by now (and the tombstones
// before them), then gives memory back when the table is mostly empty.
// An entry that is not the oldest waits until those before it go: the
// expiries are in arrival order give or take a request's lateness.
func (t *idTable) expire(now int64) {
	for t.n > 0 && t.ents[t.head].exp <= now {
		t.pop()
	}
	t.shrink()
}

// dropBefore forgets the oldest entries until the oldest is in segment
// seg or later.
func (t *idTable) dropBefore(seg uint32) {
	for t.n > 0 && t.ents[t.head].seg < seg {
		t.pop()
	}
	t.shrink()
}

// shrink halves the table while a quarter of it would hold the entries,
// so that the memory of a burst goes back once its ids expire.
func (t *idTable) shrink() {
	if t.n == 0 {
		t.release()
		return
	}
	size := len(t.ents)
	for size > minIDTableSlots/2 && t.n <= size/4 {
		size /= 2
	}
	if size != len(t.ents) {
		t.resize(size)
	}
}

// pop forgets the oldest entry.
func (t *idTable) pop() {
	t.unindex(uint32(t.head))
	t.ents[t.head] = idEntry{}
	t.head = (t.head + 1) % len(t.ents)
	t.n--
	if t.n == 0 {
		t.head = 0
	}
}

// unindex takes slot out of the index, shifting back the entries after
// it in its probe run so that every lookup still reaches them.
func (t *idTable) unindex(slot uint32) {
	mask := len(t.index) - 1
	i := int(t.ents[slot].hash) & mask
	for t.index[i] != slot+1 {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.index[j] != 0; j = (j + 1) & mask {
		home := int(t.ents[t.index[j]-1].hash) & mask
		// The entry at j may move to i only when its home is not in the
		// cyclic range (i, j].
		if (i < j && i < home && home <= j) || (i > j && (home > i || home <= j)) {
			continue
		}
		t.index[i] = t.index[j]
		i = j
	}
	t.index[i] = 0
}

// resize moves the entries, oldest first, into a slice of size entries
// and rebuilds the index.
func (t *idTable) resize(size int) {
	slots := minIDTableSlots
	for slots < 2*size {
		slots *= 2
	}
	ents, index, mem := allocTable(size, slots)
	for i := range t.n {
		ents[i] = t.ents[(t.head+i)%len(t.ents)]
	}
	n := t.n
	t.release()
	t.ents, t.index, t.mem, t.n = ents, index, mem, n
	mask := slots - 1
	for k := range t.n {
		i := int(ents[k].hash) & mask
		for t.index[i] != 0 {
			i = (i + 1) & mask
		}
		t.index[i] = uint32(k) + 1
	}
}

// release gives the table's memory back and empties it.
func (t *idTable) release() {
	t.mem.free()
	t.ents, t.index, t.mem, t.head, t.n = nil, nil, tableMem{}, 0, 0
}

// lineID returns the id of a canonical line as the line writes it: the
// JSON string, quotes included. Canonical lines write an id one way
// only, so two lines hold the same id exactly when these bytes are equal.
func lineID(line []byte) ([]byte, bool) {
	const prefix = `{"id":"`
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return nil, false
	}
	for i := len(prefix); i < len(line); i++ {
		switch line[i] {
		case '\\':
			i++
		case '"':
			return line[len(prefix)-1 : i+1], true
		}
	}
	return nil, false
}

// recordHasID reports whether a WAL record holds an event of the given
// id (as lineID returns it).
func recordHasID(rec []byte, id []byte) bool {
	if len(rec) < recHeaderSize {
		return false
	}
	for line := range bytes.Lines(rec[recHeaderSize:]) {
		if got, ok := lineID(line); ok && bytes.Equal(got, id) {
			return true
		}
	}
	return false
}

// sigTable remembers the signatures of signed requests, whose repetition
// within the window is answered as all duplicates. A signature is kept
// whole (as the SHA-256 of its text, a fixed 32 bytes): no record holds
// it to confirm a shorter hash against. It is not safe for concurrent
// use; the Collector guards it with its mutex.
type sigTable struct {
	max  int
	seen map[[32]byte]sigSeen
	fifo []sigExpiring // by arrival; fifo[head:] are live
	head int
}

// sigSeen is where a signed request's record is and when it is forgotten.
type sigSeen struct {
	pos wal.Pos
	exp int64
}

// sigExpiring is a signature in arrival order.
type sigExpiring struct {
	key [32]byte
	exp int64
}

// sigKeyBytes is what one remembered signature costs at most: its map
// entry (key, value and the map's slack) and its place in the fifo.
const sigKeyBytes = 256

func newSigTable(maxKeys int) *sigTable {
	return &sigTable{max: max(1, maxKeys), seen: map[[32]byte]sigSeen{}}
}

// get returns the record of a signature remembered as of now.
func (t *sigTable) get(key [32]byte, now int64) (wal.Pos, bool) {
	s, ok := t.seen[key]
	if !ok || s.exp <= now {
		return wal.Pos{}, false
	}
	return s.pos, true
}

// add remembers a signature, forgetting the oldest when the table is full.
func (t *sigTable) add(key [32]byte, pos wal.Pos, exp int64) {
	if len(t.seen) >= t.max {
		t.expire(0, true)
	}
	t.seen[key] = sigSeen{pos: pos, exp: exp}
	t.fifo = append(t.fifo, sigExpiring{key, exp})
}

// remove forgets a signature whose record is at pos.
func (t *sigTable) remove(key [32]byte, pos wal.Pos) {
	if s, ok := t.seen[key]; ok && s.pos.Equal(pos) {
		delete(t.seen, key)
	}
}

// expire forgets the signatures that expired by now, or only the oldest
// one when full is set. The map and the fifo start again empty once
// nothing is left, which gives back the memory of a burst (a map never
// shrinks).
func (t *sigTable) expire(now int64, full bool) {
	for t.head < len(t.fifo) {
		e := t.fifo[t.head]
		if !full && e.exp > now {
			break
		}
		t.head++
		// A signature seen again later has a later expiry; keep it.
		if s, ok := t.seen[e.key]; ok && s.exp == e.exp {
			delete(t.seen, e.key)
			if full {
				break
			}
		}
	}
	switch {
	case len(t.seen) == 0 && t.head > 0:
		t.seen, t.fifo, t.head = map[[32]byte]sigSeen{}, nil, 0
	case t.head > 1024 && t.head*2 > len(t.fifo):
		n := copy(t.fifo, t.fifo[t.head:])
		t.fifo, t.head = t.fifo[:n], 0
	}
}
