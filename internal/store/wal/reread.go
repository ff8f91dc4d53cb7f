package wal

import (
	"fmt"
	"io"
)

// ReadWritten calls fn, in log order, for every record at a position p
// with after < p <= upTo (the zero Pos is before every record) among the
// records written so far, this run's included: it lets a consumer that
// keeps only a cursor read back what it lost, instead of holding every
// record in memory until it is safe. Records not written yet are not
// read: Sync on upTo first. rec aliases a read buffer and is valid only
// during the call. Damage is always an error here (a *CorruptionError):
// these records were written by this process. The caller keeps
// TruncateBefore from removing the segments while it reads.
func (w *WAL) ReadWritten(after, upTo Pos, fn func(pos Pos, rec []byte) error) error {
	exts, err := w.Written(after.Segment)
	if err != nil {
		return err
	}
	for _, e := range exts {
		if e.Segment > upTo.Segment {
			break
		}
		if err := w.rereadSegment(e, after, upTo, fn); err != nil {
			return err
		}
	}
	return nil
}

// rereadSegment is ReadWritten for the written prefix e of one segment.
func (w *WAL) rereadSegment(e Extent, after, upTo Pos, fn func(Pos, []byte) error) error {
	f, _, err := w.openRead(e.Segment)
	if err != nil {
		return err
	}
	defer f.Close()
	path := w.path(e.Segment)
	r := newSegmentReader(f, e.Size, w.opts.MaxRecordSize)
	if err := r.header(e.Segment); err != nil {
		if isIOError(err) {
			return fmt.Errorf("read segment header: %w", err)
		}
		return &CorruptionError{File: path, Offset: 0, Err: err}
	}
	if after.Segment == e.Segment && after.Offset > r.off {
		// Positions come from Append: a record boundary.
		r.off = min(after.Offset, e.Size)
	}
	for {
		rec, err := r.next()
		off := r.at
		switch {
		case err == io.EOF:
			return nil
		case isIOError(err):
			return fmt.Errorf("read segment %s: %w", path, err)
		case err != nil:
			return &CorruptionError{File: path, Offset: off, Err: err}
		}
		pos := Pos{Segment: e.Segment, Offset: off}
		if upTo.Less(pos) {
			return nil
		}
		if after.Less(pos) {
			if err := fn(pos, rec); err != nil {
				return err
			}
		}
	}
}
