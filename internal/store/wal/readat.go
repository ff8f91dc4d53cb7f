package wal

import (
	"fmt"
	"io"
)

// ReadAt calls fn with the record at pos, a position Append returned
// whose record is written already (Sync on pos first): it lets a
// consumer that keeps only positions check what a record holds. rec
// aliases a read buffer and is valid only during the call. Damage is a
// *CorruptionError. The caller keeps TruncateBefore from removing the
// segment while it reads.
func (w *WAL) ReadAt(pos Pos, fn func(rec []byte) error) error {
	w.mu.Lock()
	end, err := w.written, w.err
	w.mu.Unlock()
	if err != nil {
		return err
	}
	if !pos.Less(end) {
		return fmt.Errorf("read record at %v: not written yet (written up to %v)", pos, end)
	}
	f, size, err := w.openRead(pos.Segment)
	if err != nil {
		return err
	}
	defer f.Close()
	if pos.Segment == end.Segment {
		size = min(size, end.Offset)
	}
	path := w.path(pos.Segment)
	r := newSegmentReader(f, size, w.opts.MaxRecordSize)
	if err := r.header(pos.Segment); err != nil {
		if isIOError(err) {
			return fmt.Errorf("read segment header: %w", err)
		}
		return &CorruptionError{File: path, Offset: 0, Err: err}
	}
	r.off = pos.Offset
	rec, err := r.next()
	switch {
	case err == io.EOF:
		return fmt.Errorf("read record at %v: past the end of %s", pos, path)
	case isIOError(err):
		return fmt.Errorf("read segment %s: %w", path, err)
	case err != nil:
		return &CorruptionError{File: path, Offset: pos.Offset, Err: err}
	}
	return fn(rec)
}
