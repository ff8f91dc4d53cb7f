// Package wal is the store's write-ahead log: an append-only sequence of
// segment files holding opaque byte records, written with group commit and
// read back at open to rebuild what was not yet checkpointed.
//
// The on-disk format is documented in docs/format/wal.md.
package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/crc32c"
)

// Format constants. See docs/format/wal.md.
const (
	segmentMagic   = "PWAL" // first bytes of every segment file
	formatVersion  = 2      // the segment format version this code writes (it reads 1 too)
	headerSize     = 16     // bytes of the segment header
	recHeaderSize  = 9      // bytes of a record header: length, CRC, type
	recordTypeFull = 1      // one whole record
	recordTypePad  = 2      // padding to a page boundary, skipped by readers (version 2)
	padPage        = 4096   // the page that padding completes
	segmentSuffix  = ".wal" // file name suffix of segments
	segmentDigits  = 8      // fixed width of the decimal segment number in names
)

// Errors carried in a CorruptionError (test with errors.Is).
var (
	ErrChecksum       = errors.New("checksum mismatch")
	ErrShortRecord    = errors.New("record runs past end of segment")
	ErrRecordTooLarge = errors.New("record too large")
	ErrUnknownType    = errors.New("unknown record type")
	ErrZeroRecord     = errors.New("zeroed record header")
	ErrBadHeader      = errors.New("bad segment header")
	ErrMissingSegment = errors.New("missing segment")
)

// ErrClosed is returned by calls on a closed WAL.
var ErrClosed = errors.New("wal closed")

// Pos is the position of a record: its segment number and the byte offset
// of its header in that segment file. Positions of later records compare
// greater (Less).
type Pos struct {
	Segment uint32
	Offset  int64
	// epoch counts the out-of-space failures before Append handed the
	// position out. A failure rewinds the log to the first lost record, so
	// a position can be handed out again; the epoch tells Sync which of
	// the two records it waits for. Replay and comparisons ignore it.
	epoch uint32
}

// Less reports whether p comes before q in the log.
func (p Pos) Less(q Pos) bool {
	if p.Segment != q.Segment {
		return p.Segment < q.Segment
	}
	return p.Offset < q.Offset
}

// Equal reports whether p and q are the same place in the log. Use it, not
// ==, to match a position from Append with one from Replay: == also
// compares the epoch, which Replay does not know.
func (p Pos) Equal(q Pos) bool { return p.Segment == q.Segment && p.Offset == q.Offset }

// String formats p as "segment:offset".
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Segment, p.Offset) }

// CorruptionError reports damaged bytes in a segment: a bad checksum or
// header followed by valid data, or damage in a segment that is not the
// last one. A torn tail of the last segment is not corruption: it is cut.
type CorruptionError struct {
	File   string // segment file path
	Offset int64  // byte offset of the damaged record or header
	Err    error  // what is wrong, one of the Err* values above
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("wal corruption in %s at offset %d: %v", e.File, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }

// segmentName returns the file name of segment n.
func segmentName(n uint32) string {
	return fmt.Sprintf("%0*d%s", segmentDigits, n, segmentSuffix)
}

// parseSegmentName returns the segment number of a file name, or false
// when the name is not a segment's.
func parseSegmentName(name string) (uint32, bool) {
	s, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(s) != segmentDigits {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}

// appendSegmentHeader appends the 16-byte header of segment n to b.
func appendSegmentHeader(b []byte, n uint32) []byte {
	start := len(b)
	b = append(b, segmentMagic...)
	b = append(b, formatVersion, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, n)
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b[start:]))
}

// checkSegmentHeader validates a segment header read from the file of
// segment n.
func checkSegmentHeader(h []byte, n uint32) error {
	switch {
	case len(h) < headerSize:
		return ErrShortRecord
	case isZero(h[:headerSize]):
		return ErrZeroRecord
	case string(h[:4]) != segmentMagic:
		return fmt.Errorf("%w: magic %q", ErrBadHeader, h[:4])
	case crc32c.Checksum(h[:12]) != binary.LittleEndian.Uint32(h[12:]):
		return fmt.Errorf("%w: %w", ErrBadHeader, ErrChecksum)
	case h[4] > formatVersion:
		return fmt.Errorf("%w: version %d, this Pith reads %d; upgrade Pith", ErrNewerFormat, h[4], formatVersion)
	case h[4] < 1:
		return fmt.Errorf("%w: version %d (want 1 to %d)", ErrBadHeader, h[4], formatVersion)
	case binary.LittleEndian.Uint32(h[8:]) != n:
		return fmt.Errorf("%w: segment number %d in file of segment %d", ErrBadHeader, binary.LittleEndian.Uint32(h[8:]), n)
	}
	return nil
}

// appendRecord appends the framed record to b.
func appendRecord(b []byte, rec []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(rec)))
	b = append(b, 0, 0, 0, 0, recordTypeFull)
	b = append(b, rec...)
	binary.LittleEndian.PutUint32(b[start+4:], crc32c.Checksum(b[start+8:]))
	return b
}

// recordSize is the framed size of a record of n payload bytes.
func recordSize(n int) int64 { return recHeaderSize + int64(n) }

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
