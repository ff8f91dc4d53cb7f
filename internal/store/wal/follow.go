package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// Reading the log while it is written, for consumers that keep their own
// cursor (the store's followers). Only durable records are read: records
// that a power cut can no longer take back.

// Durable returns the position before which every record is fsynced. It
// is a record boundary (or the start of a segment), so it can serve as the
// end of a read and as a consumer's cursor.
func (w *WAL) Durable() Pos {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.durable
}

// End returns the position the next appended record will take.
func (w *WAL) End() Pos {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.next
}

// WaitDurable blocks until the durable end of the log is past pos and
// returns it. It never asks for an fsync itself: durability advances with
// the writers' Syncs and, in relaxed mode, the periodic fsync. It returns
// ctx's error when ctx ends and ErrClosed once the WAL is closed.
func (w *WAL) WaitDurable(ctx context.Context, pos Pos) (Pos, error) {
	for {
		w.mu.Lock()
		switch {
		case w.err != nil:
			err := w.err
			w.mu.Unlock()
			return Pos{}, err
		case pos.Less(w.durable):
			d := w.durable
			w.mu.Unlock()
			return d, nil
		case w.stopped || w.closed:
			w.mu.Unlock()
			return Pos{}, ErrClosed
		}
		ch := w.round
		w.mu.Unlock()
		select {
		case <-ch:
		case <-w.done:
		case <-ctx.Done():
			return Pos{}, ctx.Err()
		}
	}
}

// Read calls fn, in log order, for every record at a position p with
// from <= p < to, where to is at most Durable(). end is the position just
// after the record. Segments that no longer exist are skipped (the caller
// compares from with Segments to tell a released range). Damage is
// skipped and counted like in Replay when Options.SkipCorrupt is set, and
// returned as a *CorruptionError otherwise. rec aliases a read buffer and
// is valid only during the call; an error from fn stops Read and is
// returned as is. The caller keeps TruncateBefore from removing the
// segments while it reads.
func (w *WAL) Read(from, to Pos, fn func(pos, end Pos, rec []byte) error) error {
	segs, err := w.listSegments()
	if err != nil {
		return err
	}
	for _, seg := range segs {
		if seg < from.Segment || seg > to.Segment {
			continue
		}
		limit := int64(-1)
		if seg == to.Segment {
			limit = to.Offset
		}
		err := w.replaySegment(seg, false, from, limit, fn)
		if err != nil {
			return err
		}
	}
	return nil
}

// ReadRecord returns a copy of the record at pos, a position Append or
// Read handed out.
func (w *WAL) ReadRecord(pos Pos) ([]byte, error) {
	f, size, err := w.openRead(pos.Segment)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := newSegmentReader(f, size, w.opts.MaxRecordSize)
	r.off = pos.Offset
	rec, err := r.next()
	if err != nil {
		if isIOError(err) {
			return nil, fmt.Errorf("read record %v: %w", pos, err)
		}
		return nil, &CorruptionError{File: w.path(pos.Segment), Offset: pos.Offset, Err: err}
	}
	return append([]byte(nil), rec...), nil
}

// Segments returns every segment file with its size, oldest first. The
// size of the segment being written is what the committer has written so
// far.
func (w *WAL) Segments() ([]Extent, error) {
	segs, err := w.listSegments()
	if err != nil {
		return nil, err
	}
	out := make([]Extent, 0, len(segs))
	for _, n := range segs {
		f, size, err := w.openRead(n)
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since it was listed
		}
		if err != nil {
			return nil, err
		}
		f.Close()
		out = append(out, Extent{n, size})
	}
	return out, nil
}

// FirstOffset is the offset of the first record of every segment: a
// position {n, FirstOffset} is the start of segment n.
const FirstOffset = headerSize

// Reader reads the log the way a consumer with its own cursor does, each
// call going on where the last one stopped: it keeps the segment it read
// last open, with its read window, so that reading on costs no directory
// listing, no open and no read of bytes already read. A Reader is not
// safe for concurrent use; Close releases its file.
type Reader struct {
	w   *WAL
	seg uint32
	f   vfs.File
	r   *segmentReader // nil when no segment is open
}

// NewReader returns a Reader of w.
func (w *WAL) NewReader() *Reader { return &Reader{w: w} }

// Read is WAL.Read through the reader's open segment: the same records,
// the same handling of damage and of segments that no longer exist.
func (rd *Reader) Read(from, to Pos, fn func(pos, end Pos, rec []byte) error) error {
	w := rd.w
	for seg := from.Segment; seg <= to.Segment; seg++ {
		r, err := rd.open(seg)
		if errors.Is(err, fs.ErrNotExist) {
			// Released, or never written: go on at the next segment.
			next, ok, err := w.nextSegment(seg)
			if err != nil {
				return err
			}
			if !ok {
				return nil
			}
			seg = next - 1
			continue
		}
		if err != nil {
			return err
		}
		if seg == to.Segment {
			r.size = min(r.size, to.Offset)
		}
		if ok, err := w.checkHeader(r, seg); !ok {
			if err != nil {
				return err
			}
			continue
		}
		err = w.replayRecords(r, seg, false, from, fn)
		if err != nil {
			return err
		}
	}
	return nil
}

// open returns the reader of segment seg with its current size, opening
// it unless it is the one open already; its window is kept, as the bytes
// of a segment below its size never change.
func (rd *Reader) open(seg uint32) (*segmentReader, error) {
	if rd.r == nil || rd.seg != seg {
		rd.Close()
		f, size, err := rd.w.openRead(seg)
		if err != nil {
			return nil, err
		}
		rd.f, rd.seg = f, seg
		rd.r = newSegmentReader(f, size, rd.w.opts.MaxRecordSize)
		return rd.r, nil
	}
	size, err := rd.f.Size()
	if err != nil {
		return nil, fmt.Errorf("stat segment: %w", err)
	}
	rd.r.size = size
	return rd.r, nil
}

// Close closes the open segment, if any. The Reader may be used again.
func (rd *Reader) Close() {
	if rd.f != nil {
		rd.f.Close()
	}
	rd.f, rd.r = nil, nil
}

// nextSegment returns the first segment after seg that exists.
func (w *WAL) nextSegment(seg uint32) (uint32, bool, error) {
	segs, err := w.listSegments()
	if err != nil {
		return 0, false, err
	}
	for _, n := range segs {
		if n > seg {
			return n, true, nil
		}
	}
	return 0, false, nil
}
