package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/pith-historian/pith/internal/crc32c"
)

// readWindow is how many bytes the segment reader fetches per read; a
// record larger than this is read whole. Each forwarder keeps a reader
// tailing the log, window included, for as long as it runs: 64 KiB
// holds the records of seconds of live writes, and a replay reads a
// megabyte in 16 calls (a megabyte each kept its window growing towards
// a megabyte per forwarder while the box ran, in the hour-long soak).
const readWindow = 64 << 10

// segmentReader decodes the records of one segment file from an
// io.ReaderAt. It reads through a reusable window, so a returned record
// aliases the window and is valid only until the next call.
type segmentReader struct {
	r      io.ReaderAt
	size   int64 // file size
	maxRec int   // largest payload accepted
	buf    []byte
	start  int64 // file offset of buf[0]
	off    int64 // offset of the next record
	at     int64 // offset of the record next returned (or found bad)
}

func newSegmentReader(r io.ReaderAt, size int64, maxRec int) *segmentReader {
	return &segmentReader{r: r, size: size, maxRec: maxRec, off: headerSize}
}

// window returns the n bytes at off, reading them when they are not in
// the buffer. The caller ensures off+n <= size.
func (s *segmentReader) window(off int64, n int) ([]byte, error) {
	if off >= s.start && off+int64(n) <= s.start+int64(len(s.buf)) {
		i := off - s.start
		return s.buf[i : i+int64(n)], nil
	}
	want := int64(max(n, readWindow))
	want = min(want, s.size-off)
	if int64(cap(s.buf)) < want {
		s.buf = make([]byte, want)
	}
	s.buf = s.buf[:want]
	m, err := s.r.ReadAt(s.buf, off)
	if m < n {
		s.buf = s.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read segment at %d: %w", off, err)
	}
	s.buf, s.start = s.buf[:m], off
	return s.buf[:n], nil
}

// header reads and checks the segment header of segment n.
func (s *segmentReader) header(n uint32) error {
	if s.size < headerSize {
		return ErrShortRecord
	}
	h, err := s.window(0, headerSize)
	if err != nil {
		return err
	}
	return checkSegmentHeader(h, n)
}

// ioError marks an error of the underlying reader, as opposed to bad bytes.
type ioError struct{ err error }

func (e ioError) Error() string { return e.err.Error() }
func (e ioError) Unwrap() error { return e.err }

// next returns the record at s.off, or the first one after the padding
// records there, and advances past it and the padding that follows it
// (a round's padding ends on a page boundary, within the page the record
// ends in). s.at is then the record's offset. It returns io.EOF at the
// clean end of the segment, an ioError when reading fails, and one of the
// Err* format errors, leaving s.off and s.at at the bad record, when the
// bytes there are not a valid record.
func (s *segmentReader) next() ([]byte, error) {
	for {
		s.at = s.off
		rec, typ, err := s.record()
		if err != nil {
			return nil, err
		}
		if typ == recordTypePad {
			continue
		}
		s.skipPad()
		return rec, nil
	}
}

// record reads the record at s.off and, when it is valid, advances past
// it and returns its payload and type. The window then also holds the
// rest of the page the record ends in.
func (s *segmentReader) record() ([]byte, byte, error) {
	rest := s.size - s.off
	if rest == 0 {
		return nil, 0, io.EOF
	}
	if rest < recHeaderSize {
		return nil, 0, ErrShortRecord
	}
	h, err := s.window(s.off, recHeaderSize)
	if err != nil {
		return nil, 0, ioError{err}
	}
	n := binary.LittleEndian.Uint32(h)
	crc := binary.LittleEndian.Uint32(h[4:])
	typ := h[8]
	switch {
	case n == 0 && crc == 0 && typ == 0:
		return nil, 0, ErrZeroRecord
	case int64(n) > int64(s.maxRec):
		return nil, 0, ErrRecordTooLarge
	case recordSize(int(n)) > rest:
		return nil, 0, ErrShortRecord
	}
	// Read the rest of the page too, for the padding after it (skipPad).
	b, err := s.window(s.off, int(min(pageEnd(s.off+recordSize(int(n))), s.size)-s.off))
	if err != nil {
		return nil, 0, ioError{err}
	}
	b = b[:recordSize(int(n))]
	if crc32c.Checksum(b[8:]) != crc {
		return nil, 0, ErrChecksum
	}
	if typ != recordTypeFull && typ != recordTypePad {
		return nil, 0, ErrUnknownType
	}
	s.off += recordSize(int(n))
	return b[recHeaderSize:], typ, nil
}

// resync looks for the first valid record at or after from and returns its
// offset, or -1 when the rest of the segment holds none. It is the slow
// path taken only after damage, to tell a torn tail from corruption in the
// middle and to resume after a damaged record.
func (s *segmentReader) resync(from int64) (int64, error) {
	for off := from; off+recHeaderSize <= s.size; off++ {
		h, err := s.window(off, recHeaderSize)
		if err != nil {
			return -1, err
		}
		n := binary.LittleEndian.Uint32(h)
		if (h[8] != recordTypeFull && h[8] != recordTypePad) || int64(n) > int64(s.maxRec) || off+recordSize(int(n)) > s.size {
			continue
		}
		b, err := s.window(off, int(recordSize(int(n))))
		if err != nil {
			return -1, err
		}
		if crc32c.Checksum(b[8:]) == binary.LittleEndian.Uint32(b[4:]) {
			return off, nil
		}
	}
	return -1, nil
}
