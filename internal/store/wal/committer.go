package wal

import (
	"fmt"
	"os"
	"time"
)

// maxKeptBuffer is the largest chunk buffer kept for reuse; a buffer grown
// by a huge record is dropped rather than held for ever.
const maxKeptBuffer = 16 << 20

// run is the committer goroutine: it writes what Append buffered, fsyncs
// for waiting Syncs (one fsync for all of them), and in relaxed mode
// fsyncs every CommitInterval.
func (w *WAL) run() {
	defer close(w.done)
	var tick <-chan time.Time
	if w.opts.Durability == DurabilityRelaxed {
		t := time.NewTicker(w.opts.CommitInterval)
		defer t.Stop()
		tick = t.C
	}
	for {
		forceSync := false
		select {
		case <-w.kick:
		case <-tick:
			forceSync = true
		}
		if stop := w.commitRound(forceSync); stop {
			return
		}
	}
}

// commitRound takes the pending bytes, writes them, fsyncs when asked,
// publishes the new written and durable positions and wakes the waiters
// of the round. It reports whether the committer should stop.
func (w *WAL) commitRound(forceSync bool) bool {
	w.mu.Lock()
	closing := w.closed
	wantSync := forceSync || closing || w.syncReq
	if wantSync && w.err == nil {
		w.padLocked()
	}
	chunks := w.pending
	w.pending, w.spare = w.spare[:0], nil
	end := w.next
	w.syncReq = false
	failed := w.err != nil
	w.pendingBytes = 0
	w.room.Broadcast()
	w.mu.Unlock()

	var err error
	var lost *Pos
	var cause error
	if !failed {
		err = w.writeChunks(chunks)
		if at, ok := w.recoverNoSpace(err); ok {
			lost, cause, err = &at, err, nil
		}
		if err == nil && lost == nil && wantSync && w.f != nil && w.syncedTo.Less(end) {
			err = w.fsync()
			if err == nil {
				w.syncedTo = end
			}
		}
	}
	if closing && w.f != nil {
		if cerr := w.f.Close(); err == nil && cerr != nil && !failed {
			err = fmt.Errorf("close segment: %w", cerr)
		}
		w.f = nil
	}
	for i := range chunks {
		if cap(chunks[i].buf) > maxKeptBuffer {
			chunks[i].buf = nil
		}
	}

	w.mu.Lock()
	w.spare = chunks[:0]
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("wal failed: %w", err)
		w.log.Error("wal failed; refusing further writes", "err", err)
	}
	if w.err == nil && lost != nil {
		end = *lost
		w.rewindLocked(*lost, cause)
	}
	if w.err == nil {
		w.written = end
		w.durable = w.syncedTo
		w.fileSeg = w.fseg
	}
	if closing {
		w.stopped = true
	}
	// The round ends here, in the same critical section that publishes
	// the positions: a waiter that saw the old positions holds this
	// round's channel and is woken. Swapped earlier, a waiter arriving
	// during the write would hold the next round's channel while this one
	// publishes, and sleep until some later write (WaitDurable does not
	// ask for a round of its own).
	round := w.round
	w.round = make(chan struct{})
	w.room.Broadcast()
	w.mu.Unlock()
	close(round)
	return closing
}

// writeChunks writes chunks in order, switching segment files between them.
func (w *WAL) writeChunks(chunks []chunk) error {
	w.writeFailed = false
	for _, c := range chunks {
		if c.seg != w.fseg || w.f == nil {
			if err := w.switchTo(c.seg); err != nil {
				return err
			}
		}
		if len(c.buf) == 0 {
			continue
		}
		// WriteAt at the known end, not Write: after an out-of-space
		// failure the file is cut back and the next record goes there.
		n, err := w.f.WriteAt(c.buf, w.foff)
		w.stats.bytes.Add(uint64(n))
		if err != nil {
			w.writeFailed, w.writeFailedSeg = true, c.seg
			return fmt.Errorf("write segment %d: %w", c.seg, err)
		}
		w.foff += int64(n)
	}
	return nil
}

// switchTo fsyncs and closes the current segment, then creates segment seg
// with its header and makes it durable. Because the old segment is fsynced
// before the new file's directory entry can be durable, every segment but
// the last is complete after a power cut, in either durability mode.
func (w *WAL) switchTo(seg uint32) error {
	if w.f != nil {
		if err := w.fsync(); err != nil {
			return err
		}
		w.syncedTo = Pos{Segment: w.fseg, Offset: w.foff}
		if err := w.f.Close(); err != nil {
			return fmt.Errorf("close segment %d: %w", w.fseg, err)
		}
		w.f = nil
	}
	f, err := w.fs.OpenFile(w.path(seg), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		w.writeFailed, w.writeFailedSeg = true, seg
		return fmt.Errorf("create segment: %w", err)
	}
	w.stats.segments.Add(1)
	var hdr [headerSize]byte
	if _, err := f.WriteAt(appendSegmentHeader(hdr[:0], seg), 0); err != nil {
		// No half-made segment stays behind: recoverNoSpace creates it
		// again when space returns.
		f.Close()
		if rerr := w.fs.Remove(w.path(seg)); rerr != nil {
			return fmt.Errorf("remove segment %d after failed header write: %w", seg, rerr)
		}
		w.writeFailed, w.writeFailedSeg = true, seg
		return fmt.Errorf("write segment header %d: %w", seg, err)
	}
	w.f, w.fseg, w.foff = f, seg, headerSize
	if err := w.fsync(); err != nil {
		return err
	}
	if err := w.fs.SyncDir(w.dir); err != nil {
		return fmt.Errorf("sync wal dir: %w", err)
	}
	w.syncedTo = Pos{Segment: seg, Offset: headerSize}
	return nil
}

// fsync syncs the current segment file and records its latency.
func (w *WAL) fsync() error {
	start := time.Now()
	err := w.f.Sync()
	d := uint64(time.Since(start))
	w.stats.fsyncs.Add(1)
	w.stats.fsyncNanos.Add(d)
	for {
		old := w.stats.fsyncMax.Load()
		if d <= old || w.stats.fsyncMax.CompareAndSwap(old, d) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("fsync segment %d: %w", w.fseg, err)
	}
	return nil
}
