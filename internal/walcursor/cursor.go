// Package walcursor keeps how far a consumer of a write-ahead log has
// durably got, in a small checksummed file replaced atomically. The forward
// queue and the events collector each keep one. See docs/format/cursor.md.
package walcursor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/atomicfile"
	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
)

// Format constants. See docs/format/cursor.md.
const (
	magic = "PWC1"
	// Size is the length of an encoded cursor: magic, segment, offset,
	// sequence, CRC-32C.
	Size = 4 + 4 + 8 + 8 + 4

	// Formats written by earlier releases, still read.
	forwardMagic = "PFC1"
	forwardSize  = 4 + 4 + 8 + 4 // magic, segment, offset, CRC-32C
	eventsPrefix = "v1 "
	eventsMax    = 64 // longest "v1 <segment> <offset> <seq>\n" line

	// readLimit is how much of a file Read looks at: enough to see that a
	// file is longer than any cursor.
	readLimit = 128
)

// ErrCorrupt is wrapped by the errors of Decode and Read for bytes that are
// not a cursor: a wrong length or magic, a checksum mismatch or a field out
// of range. A cursor file is replaced atomically, so this is damage by
// something else, and callers stop rather than guess a position.
var ErrCorrupt = errors.New("corrupt cursor")

// Cursor is how far a consumer has got: every record at or before Pos is
// consumed. Seq is a counter the consumer keeps with it (the events
// collector numbers its files with it; the forward queue leaves it 0).
type Cursor struct {
	Pos wal.Pos
	Seq uint64
}

// Append appends the encoding of c to b.
func Append(b []byte, c Cursor) []byte {
	start := len(b)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, c.Pos.Segment)
	b = binary.LittleEndian.AppendUint64(b, uint64(c.Pos.Offset))
	b = binary.LittleEndian.AppendUint64(b, c.Seq)
	return binary.LittleEndian.AppendUint32(b, crc32c.Checksum(b[start:]))
}

// Decode decodes a cursor written by Append or by an earlier release (the
// forward queue's "PFC1" file and the events collector's "v1" line). Errors
// wrap ErrCorrupt.
func Decode(b []byte) (Cursor, error) {
	var c Cursor
	switch {
	case len(b) >= 4 && string(b[:4]) == magic:
		if len(b) != Size {
			return Cursor{}, fmt.Errorf("%w: %d bytes, want %d", ErrCorrupt, len(b), Size)
		}
		if crc32c.Checksum(b[:Size-4]) != binary.LittleEndian.Uint32(b[Size-4:]) {
			return Cursor{}, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
		}
		c.Pos.Segment = binary.LittleEndian.Uint32(b[4:])
		off := binary.LittleEndian.Uint64(b[8:])
		c.Seq = binary.LittleEndian.Uint64(b[16:])
		if off > math.MaxInt64 {
			return Cursor{}, fmt.Errorf("%w: offset %d out of range", ErrCorrupt, off)
		}
		c.Pos.Offset = int64(off)
		return c, nil
	case len(b) >= 4 && string(b[:4]) == forwardMagic:
		if len(b) != forwardSize {
			return Cursor{}, fmt.Errorf("%w: %d bytes, want %d", ErrCorrupt, len(b), forwardSize)
		}
		if crc32c.Checksum(b[:forwardSize-4]) != binary.LittleEndian.Uint32(b[forwardSize-4:]) {
			return Cursor{}, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
		}
		c.Pos.Segment = binary.LittleEndian.Uint32(b[4:])
		off := binary.LittleEndian.Uint64(b[8:])
		if off > math.MaxInt64 {
			return Cursor{}, fmt.Errorf("%w: offset %d out of range", ErrCorrupt, off)
		}
		c.Pos.Offset = int64(off)
		return c, nil
	case strings.HasPrefix(string(b[:min(len(b), len(eventsPrefix))]), eventsPrefix):
		return decodeEventsLine(b)
	}
	return Cursor{}, fmt.Errorf("%w: unknown format %q", ErrCorrupt, b[:min(len(b), 8)])
}

// decodeEventsLine decodes the events collector's earlier cursor, one
// unchecksummed line "v1 <segment> <offset> <seq>\n" in decimal.
func decodeEventsLine(b []byte) (Cursor, error) {
	if len(b) > eventsMax || len(b) == 0 || b[len(b)-1] != '\n' {
		return Cursor{}, fmt.Errorf("%w: bad line %q", ErrCorrupt, b[:min(len(b), eventsMax)])
	}
	fields := strings.Split(string(b[len(eventsPrefix):len(b)-1]), " ")
	if len(fields) != 3 {
		return Cursor{}, fmt.Errorf("%w: bad line %q", ErrCorrupt, b)
	}
	seg, err1 := strconv.ParseUint(fields[0], 10, 32)
	off, err2 := strconv.ParseInt(fields[1], 10, 64)
	seq, err3 := strconv.ParseUint(fields[2], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil || off < 0 {
		return Cursor{}, fmt.Errorf("%w: bad line %q", ErrCorrupt, b)
	}
	return Cursor{Pos: wal.Pos{Segment: uint32(seg), Offset: off}, Seq: seq}, nil
}

// Read reads the cursor file at path. A missing file is reported as
// ok == false with no error: the consumer has consumed nothing yet. Errors
// name the file; those for damaged content wrap ErrCorrupt.
func Read(fsys vfs.FS, path string) (c Cursor, ok bool, err error) {
	f, err := vfs.Open(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return Cursor{}, false, nil
	}
	if err != nil {
		return Cursor{}, false, fmt.Errorf("open cursor: %w", err)
	}
	defer f.Close()
	b := make([]byte, readLimit)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return Cursor{}, false, fmt.Errorf("read cursor %s: %w", path, err)
	}
	if c, err = Decode(b[:n]); err != nil {
		return Cursor{}, false, fmt.Errorf("read cursor %s: %w", path, err)
	}
	return c, true, nil
}

// Write replaces the cursor file at path with c, atomically and durably
// (atomicfile.WriteFS): a crash leaves the old or the new cursor.
func Write(fsys vfs.FS, path string, c Cursor) error {
	if err := atomicfile.WriteFS(fsys, path, Append(make([]byte, 0, Size), c), 0o644); err != nil {
		return fmt.Errorf("write cursor: %w", err)
	}
	return nil
}
