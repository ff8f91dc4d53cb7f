package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/pith-historian/pith/internal/crc32c"

	"github.com/pith-historian/pith/internal/store/wal"
)

// The cursor file of a follower, DIR/followers/<name> (docs/format/store.md):
// where the follower resumes after a restart, the oldest WAL position it
// may still need, and its loss counters. It is small, fixed-size and
// checksummed, and replaced atomically (writeFileAtomic) on every Ack.
//
//	magic "PITHFOL2" 8 B | cursor segment u32 | cursor offset u64 | cursor part u32
//	| hold segment u32 | hold offset u64 | dropped events u64 | dropped records u64
//	| dropped points u64 | upstream token u64 | CRC-32C u32 of all before
//
// Files of earlier releases ("PITHFOL1", without the token) are still
// read, with token 0.

const (
	cursorMagic = "PITHFOL2"
	cursorSize  = 8 + 4 + 8 + 4 + 4 + 8 + 8 + 8 + 8 + 8 + 4

	cursorMagicV1 = "PITHFOL1"
	cursorSizeV1  = cursorSize - 8
)

// cursorState is what a follower's cursor file holds.
type cursorState struct {
	Cursor  Position // the next record to deliver
	Hold    wal.Pos  // the oldest record the follower may still read (<= Cursor)
	Dropped Dropped  // what retention took from it so far
	// Token is the follower's own note of where its upstream stood when
	// Cursor was acknowledged (a forwarder keeps the stream sequence of
	// its last confirmed publish): opaque to the store, 0 when none.
	Token uint64
}

var errBadCursor = errors.New("bad cursor file")

func encodeCursor(c cursorState) []byte {
	b := make([]byte, 0, cursorSize)
	b = append(b, cursorMagic...)
	b = binary.LittleEndian.AppendUint32(b, c.Cursor.Segment)
	b = binary.LittleEndian.AppendUint64(b, uint64(c.Cursor.Offset))
	b = binary.LittleEndian.AppendUint32(b, c.Cursor.Part)
	b = binary.LittleEndian.AppendUint32(b, c.Hold.Segment)
	b = binary.LittleEndian.AppendUint64(b, uint64(c.Hold.Offset))
	b = binary.LittleEndian.AppendUint64(b, uint64(c.Dropped.Events))
	b = binary.LittleEndian.AppendUint64(b, uint64(c.Dropped.Records))
	b = binary.LittleEndian.AppendUint64(b, uint64(c.Dropped.Points))
	b = binary.LittleEndian.AppendUint64(b, c.Token)
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b))
}

func decodeCursor(b []byte) (cursorState, error) {
	var c cursorState
	size := cursorSize
	if len(b) >= 8 && string(b[:8]) == cursorMagicV1 {
		size = cursorSizeV1
	}
	switch {
	case len(b) != size:
		return c, fmt.Errorf("%w: %d bytes, want %d", errBadCursor, len(b), size)
	case size == cursorSize && string(b[:8]) != cursorMagic:
		return c, fmt.Errorf("%w: magic %q", errBadCursor, b[:8])
	case crc32c.Checksum(b[:size-4]) != binary.LittleEndian.Uint32(b[size-4:]):
		return c, fmt.Errorf("%w: checksum mismatch", errBadCursor)
	}
	le := binary.LittleEndian
	c.Cursor = Position{Segment: le.Uint32(b[8:]), Offset: int64(le.Uint64(b[12:])), Part: le.Uint32(b[20:])}
	c.Hold = wal.Pos{Segment: le.Uint32(b[24:]), Offset: int64(le.Uint64(b[28:]))}
	c.Dropped = Dropped{Events: int64(le.Uint64(b[36:])), Records: int64(le.Uint64(b[44:])), Points: int64(le.Uint64(b[52:]))}
	if size == cursorSize {
		c.Token = le.Uint64(b[60:])
	}
	if c.Cursor.Offset < 0 || c.Hold.Offset < 0 || c.Cursor.walPos().Less(c.Hold) {
		return cursorState{}, fmt.Errorf("%w: cursor %v before hold %v", errBadCursor, c.Cursor, c.Hold)
	}
	return c, nil
}
