package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// repairTail makes the last segment end at its last good record, as a
// power cut may have left a partly written record (short, bad checksum or
// zeros) there. A last segment whose header itself is torn holds no record
// and is removed, and the one before it is checked in turn. Damage followed
// by a valid record is not a torn tail: it is left for Replay to report.
// It returns the segments that remain.
func (w *WAL) repairTail(segs []uint32) ([]uint32, error) {
	for len(segs) > 0 {
		last := segs[len(segs)-1]
		f, size, err := w.openRead(last)
		if err != nil {
			return nil, err
		}
		r := newSegmentReader(f, size, w.opts.MaxRecordSize)
		herr := r.header(last)
		if errors.Is(herr, ErrShortRecord) || errors.Is(herr, ErrZeroRecord) {
			f.Close()
			w.log.Warn("removing segment with torn header", "segment", segmentName(last), "size", size)
			if err := w.fs.Remove(w.path(last)); err != nil {
				return nil, fmt.Errorf("remove torn segment: %w", err)
			}
			if err := w.fs.SyncDir(w.dir); err != nil {
				return nil, fmt.Errorf("sync wal dir: %w", err)
			}
			w.stats.torn.Add(uint64(size))
			segs = segs[:len(segs)-1]
			continue
		}
		if herr != nil {
			f.Close()
			return segs, nil
		}
		cut, err := tornTail(r)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read segment %s: %w", segmentName(last), err)
		}
		if cut >= 0 {
			if err := w.truncate(last, cut, size); err != nil {
				return nil, err
			}
		}
		return segs, nil
	}
	return segs, nil
}

// tornTail reads r to its end and returns the offset where a torn tail
// starts, or -1 when the segment is whole or its damage is followed by
// valid records.
func tornTail(r *segmentReader) (int64, error) {
	for {
		_, err := r.next()
		switch {
		case err == nil:
			continue
		case err == io.EOF:
			return -1, nil
		case isIOError(err):
			return -1, err
		}
		bad := r.off
		nxt, err := r.resync(bad + 1)
		if err != nil {
			return -1, err
		}
		if nxt >= 0 {
			return -1, nil
		}
		return bad, nil
	}
}

func isIOError(err error) bool {
	var ioe ioError
	return errors.As(err, &ioe)
}

// truncate cuts segment seg to size cut and makes the cut durable.
func (w *WAL) truncate(seg uint32, cut, size int64) error {
	w.log.Warn("cutting torn tail of last segment", "segment", segmentName(seg), "offset", cut, "bytes", size-cut)
	f, err := w.fs.OpenFile(w.path(seg), os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open segment for repair: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(cut); err != nil {
		return fmt.Errorf("truncate torn segment: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync truncated segment: %w", err)
	}
	w.stats.torn.Add(uint64(size - cut))
	return nil
}

// Replay calls fn, in log order, for every record at or after from among
// the records that were in the log when it was opened. rec aliases a read
// buffer and is valid only during the call. An error from fn stops Replay
// and is returned as is.
//
// Damage is returned as a *CorruptionError, unless Options.SkipCorrupt is
// set: then Replay logs it and goes on with the next valid record of the
// segment, or with the next segment when none follows. Damage at the end of
// the last segment is a torn tail (Open already cut it) and is not an error.
func (w *WAL) Replay(from Pos, fn func(pos, end Pos, rec []byte) error) error {
	for i, seg := range w.oldSegs {
		if seg < from.Segment {
			continue
		}
		if i > 0 && seg != w.oldSegs[i-1]+1 {
			for missing := w.oldSegs[i-1] + 1; missing < seg; missing++ {
				cerr := &CorruptionError{File: w.path(missing), Err: ErrMissingSegment}
				if err := w.damaged(cerr); err != nil {
					return err
				}
			}
		}
		if err := w.replaySegment(seg, i == len(w.oldSegs)-1, from, -1, fn); err != nil {
			return err
		}
	}
	return nil
}

// damaged returns cerr, or logs and counts it when skipping is allowed.
func (w *WAL) damaged(cerr *CorruptionError) error {
	if !w.opts.SkipCorrupt {
		return cerr
	}
	w.log.Error("skipping damaged wal data", "file", cerr.File, "offset", cerr.Offset, "err", cerr.Err)
	w.stats.skipped.Add(1)
	return nil
}

// replaySegment replays one segment; last says it is the newest old one,
// whose end may be torn. A limit >= 0 reads only the records that end at
// or before that offset (the durable prefix of the segment being written).
func (w *WAL) replaySegment(seg uint32, last bool, from Pos, limit int64, fn func(pos, end Pos, rec []byte) error) error {
	f, size, err := w.openRead(seg)
	if err != nil {
		return err
	}
	defer f.Close()
	if limit >= 0 {
		size = min(size, limit)
	}
	r := newSegmentReader(f, size, w.opts.MaxRecordSize)
	if ok, err := w.checkHeader(r, seg); !ok {
		return err
	}
	return w.replayRecords(r, seg, last, from, fn)
}

// checkHeader checks the header of segment seg read by r. It returns
// false with the error to return (nil when damage is skipped) when the
// segment's records are not to be read.
func (w *WAL) checkHeader(r *segmentReader, seg uint32) (bool, error) {
	err := r.header(seg)
	switch {
	case err == nil:
		return true, nil
	case isIOError(err):
		return false, fmt.Errorf("read segment header: %w", err)
	case errors.Is(err, ErrNewerFormat):
		return false, fmt.Errorf("read segment %s: %w", w.path(seg), err)
	}
	return false, w.damaged(&CorruptionError{File: w.path(seg), Offset: 0, Err: err})
}

// replayRecords calls fn for the records of segment seg that r reads, from
// from on (or the first record); last is as for replaySegment.
func (w *WAL) replayRecords(r *segmentReader, seg uint32, last bool, from Pos, fn func(pos, end Pos, rec []byte) error) error {
	path := w.path(seg)
	r.off = headerSize
	if from.Segment == seg && from.Offset > r.off {
		// Start at from only when it is a record boundary we can trust:
		// positions come from Append, so it is.
		r.off = min(from.Offset, r.size)
	}
	for {
		rec, err := r.next()
		off := r.at
		if err == nil {
			if err := fn(Pos{Segment: seg, Offset: off}, Pos{Segment: seg, Offset: r.off}, rec); err != nil {
				return err
			}
			continue
		}
		if err == io.EOF {
			return nil
		}
		if isIOError(err) {
			return fmt.Errorf("read segment %s: %w", path, err)
		}
		nxt, rerr := r.resync(off + 1)
		if rerr != nil {
			return fmt.Errorf("read segment %s: %w", path, rerr)
		}
		if nxt < 0 && last {
			w.log.Warn("ignoring torn tail of last segment", "file", path, "offset", off)
			return nil
		}
		if derr := w.damaged(&CorruptionError{File: path, Offset: off, Err: err}); derr != nil {
			return derr
		}
		if nxt < 0 {
			return nil
		}
		r.off = nxt
	}
}
