package wal

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrNoSpace is wrapped by the error of a Sync whose record could not be
// written because the filesystem is full (ENOSPC) or the quota is used up
// (EDQUOT). The error also wraps the system's own error, so errors.Is
// with syscall.ENOSPC holds too.
var ErrNoSpace = errors.New("no space left for the wal")

// maxLostEpochs bounds the out-of-space failures remembered for Syncs
// still waiting on a lost record. A waiter is woken by the round that lost
// its record, so only one that slept through this many more failures
// would find its epoch forgotten; it is then told its record was lost.
const maxLostEpochs = 1024

// IsNoSpace reports whether err is the filesystem running out of space
// or quota.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, ErrNoSpace)
}

type noSpaceError struct{ err error }

func (e *noSpaceError) Error() string { return e.err.Error() }
func (e *noSpaceError) Unwrap() []error {
	return []error{ErrNoSpace, e.err}
}

// recoverNoSpace undoes a failed write round when the failure is the
// filesystem running out of space while writing or creating a segment: it
// cuts the current segment back to its last whole record (a short write
// may have left part of one) and returns the position where the lost
// records began. Any other failure, or a failure to cut, is reported as
// not recovered and fails the WAL for good. It runs in the committer.
func (w *WAL) recoverNoSpace(err error) (Pos, bool) {
	if err == nil || !w.writeFailed || !IsNoSpace(err) {
		return Pos{}, false
	}
	if w.f != nil && w.fseg == w.writeFailedSeg {
		if terr := w.f.Truncate(w.foff); terr != nil {
			w.log.Error("cut segment after out-of-space write", "segment", w.fseg, "err", terr)
			return Pos{}, false
		}
		return Pos{Segment: w.fseg, Offset: w.foff}, true
	}
	// The segment could not be created or given its header; switchTo
	// removed what it made.
	return Pos{Segment: w.writeFailedSeg, Offset: headerSize}, true
}

// rewindLocked drops every record from lost on, written or still pending,
// fails their Syncs and makes lost the place of the next record. The
// caller holds mu.
func (w *WAL) rewindLocked(lost Pos, cause error) {
	w.nospace = &noSpaceError{fmt.Errorf("wal: record not written, filesystem full: %w", cause)}
	w.lostFrom = append(w.lostFrom, lost)
	if len(w.lostFrom) > maxLostEpochs {
		w.lostFrom = w.lostFrom[1:]
		w.lostBase++
	}
	w.epoch++
	dropped := w.next
	for i := range w.pending {
		w.pending[i].buf = w.pending[i].buf[:0]
	}
	w.pending = w.pending[:0]
	w.pendingBytes = 0
	w.next = Pos{Segment: lost.Segment, Offset: lost.Offset}
	w.stats.nospace.Add(1)
	w.log.Warn("wal out of space; records refused until space returns", "from", lost, "to", dropped, "err", cause)
}

// lostLocked reports whether the record at pos was dropped by an
// out-of-space failure. The caller holds mu.
func (w *WAL) lostLocked(pos Pos) bool {
	if pos.epoch == w.epoch {
		return false
	}
	if pos.epoch < w.lostBase {
		return true // forgotten: see maxLostEpochs
	}
	return !pos.Less(w.lostFrom[pos.epoch-w.lostBase])
}
