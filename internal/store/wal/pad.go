package wal

import (
	"encoding/binary"

	"github.com/pith-historian/pith/internal/crc32c"
)

// padLocked ends a round that is to be fsynced on a page boundary with a
// padding record (format version 2), so that the next round starts on a
// new page: otherwise every fsync writes the page the round before ended
// in once more (at ten rounds a second of 2.7 kB each, 0.68 bytes were
// written a value for 0.27 of records). It pads only when the padding
// takes no more room than the round's own bytes, so the log at most
// doubles: a slow writer's rounds (a record a second) are not padded,
// since their page is written once a round either way. The caller holds
// mu.
func (w *WAL) padLocked() {
	off := w.next.Offset
	room := pageEnd(off) - off
	if w.pendingBytes == 0 || room < recHeaderSize || room > int64(w.pendingBytes) || off+room > w.opts.SegmentSize {
		return
	}
	c := w.chunkFor(w.next.Segment)
	c.buf = appendPad(c.buf, int(room))
	w.next.Offset += room
	w.stats.pad.Add(uint64(room))
}

var zeroPage [padPage]byte

// appendPad appends a padding record of size bytes in all (at least
// recHeaderSize): its payload is zeros.
func appendPad(b []byte, size int) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(size-recHeaderSize))
	b = append(b, 0, 0, 0, 0, recordTypePad)
	b = append(b, zeroPage[:size-recHeaderSize]...)
	binary.LittleEndian.PutUint32(b[start+4:], crc32c.Checksum(b[start+8:]))
	return b
}

// pageEnd returns the end of the padding page that off is in (off itself
// when it is on a page boundary).
func pageEnd(off int64) int64 { return (off + padPage - 1) / padPage * padPage }

// skipPad advances past the padding record at s.off, if there is one:
// it ends at the end of the page s.off is in, and that page is in the
// window already (record read it), so the record returned before it stays
// valid.
func (s *segmentReader) skipPad() {
	end := pageEnd(s.off)
	if end-s.off < recHeaderSize || end > s.size || s.off < s.start || end > s.start+int64(len(s.buf)) {
		return
	}
	b := s.buf[s.off-s.start : end-s.start]
	if b[8] != recordTypePad || recordSize(int(binary.LittleEndian.Uint32(b))) != end-s.off ||
		crc32c.Checksum(b[8:]) != binary.LittleEndian.Uint32(b[4:]) {
		return
	}
	s.off = end
}
