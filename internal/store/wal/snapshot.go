package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Extent is a prefix of one segment file: the bytes [0, Size) of segment
// Segment hold whole records only.
type Extent struct {
	Segment uint32
	Size    int64
}

// Name returns the file name of the extent's segment.
func (e Extent) Name() string { return segmentName(e.Segment) }

// Written returns, for every segment from from on, the prefix that the
// committer has handed to the operating system: every record acknowledged
// so far (in either durability mode) lies inside these extents, and each
// extent ends on a record boundary. Segments after the one being written
// are not listed. The caller must keep TruncateBefore from running until
// it has opened the files (the store holds its flush lock).
func (w *WAL) Written(from uint32) ([]Extent, error) {
	w.mu.Lock()
	end := w.written
	err := w.err
	w.mu.Unlock()
	if err != nil {
		return nil, err
	}
	segs, err := w.listSegments()
	if err != nil {
		return nil, err
	}
	var out []Extent
	for _, n := range segs {
		if n < from || n > end.Segment {
			continue
		}
		if n == end.Segment {
			out = append(out, Extent{n, end.Offset})
			continue
		}
		// An earlier segment is complete: its size is final.
		f, size, err := w.openRead(n)
		if err != nil {
			return nil, err
		}
		f.Close()
		out = append(out, Extent{n, size})
	}
	return out, nil
}

// ParseSegmentName returns the segment number of a WAL file name, or false
// when the name is not a segment's.
func ParseSegmentName(name string) (uint32, bool) { return parseSegmentName(name) }

// ErrNewerFormat is returned (wrapped) when a segment header carries a
// format version newer than this code reads. Replay stops on it instead of
// skipping the segment as damage: the data is fine, this Pith is too old.
var ErrNewerFormat = errors.New("segment format is newer than this Pith supports")

// FormatVersion is the segment format version this code writes and reads.
const FormatVersion = formatVersion

// CheckSegment reads every record of the segment file at path and returns
// what is damaged. With last set (the newest segment of a data directory)
// damage that no valid record follows is a torn tail from a crash: it is
// returned as tornAt >= 0 rather than as damage, as Open cuts it.
func CheckSegment(path string, seg uint32, last bool) (damage []*CorruptionError, tornAt int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, -1, fmt.Errorf("open segment: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, -1, fmt.Errorf("stat segment: %w", err)
	}
	r := newSegmentReader(f, st.Size(), DefaultMaxRecordSize)
	if err := r.header(seg); err != nil {
		if isIOError(err) {
			return nil, -1, fmt.Errorf("read segment header: %w", err)
		}
		if last && (errors.Is(err, ErrShortRecord) || errors.Is(err, ErrZeroRecord)) {
			return nil, 0, nil
		}
		return []*CorruptionError{{File: path, Offset: 0, Err: err}}, -1, nil
	}
	for {
		_, err := r.next()
		off := r.at
		if err == nil {
			continue
		}
		if err == io.EOF {
			return damage, -1, nil
		}
		if isIOError(err) {
			return damage, -1, fmt.Errorf("read segment %s: %w", filepath.Base(path), err)
		}
		nxt, rerr := r.resync(off + 1)
		if rerr != nil {
			return damage, -1, fmt.Errorf("read segment %s: %w", filepath.Base(path), rerr)
		}
		if nxt < 0 && last {
			return damage, off, nil
		}
		damage = append(damage, &CorruptionError{File: path, Offset: off, Err: err})
		if nxt < 0 {
			return damage, -1, nil
		}
		r.off = nxt
	}
}
