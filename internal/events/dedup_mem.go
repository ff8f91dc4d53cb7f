package events

import "unsafe"

// tableMem holds an id table's entries and index. On Unix they live in
// an anonymous memory mapping outside the Go heap: they hold no pointers,
// so the GC has nothing to scan there, and keeping them out of the heap
// keeps them out of the heap goal too, which would otherwise let the
// heap (and the RSS) grow by as much again before a collection. The
// mapping goes back to the system as soon as the table shrinks.
type tableMem struct {
	mapped []byte // the mapping; nil when the slices are on the Go heap
}

// allocTable returns zeroed room for n entries and slots index slots.
func allocTable(n, slots int) ([]idEntry, []uint32, tableMem) {
	size := n*idEntryBytes + slots*idIndexBytes
	if b, ok := mapAnon(size); ok {
		ents := unsafe.Slice((*idEntry)(unsafe.Pointer(unsafe.SliceData(b))), n)
		index := unsafe.Slice((*uint32)(unsafe.Pointer(&b[n*idEntryBytes])), slots)
		return ents, index, tableMem{mapped: b}
	}
	return make([]idEntry, n), make([]uint32, slots), tableMem{}
}

// free releases the mapping; the slices that alias it must be dropped
// first.
func (m tableMem) free() {
	if m.mapped != nil {
		unmapAnon(m.mapped)
	}
}

// The entries are laid out as idEntryBytes says, 8-byte aligned, so the
// index that follows them in a mapping is aligned too.
var _ [idEntryBytes - unsafe.Sizeof(idEntry{})]struct{}
var _ [unsafe.Sizeof(idEntry{}) - idEntryBytes]struct{}
