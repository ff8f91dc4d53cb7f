package forward

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/pith-historian/pith/internal/atomicfile"
	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
	"github.com/pith-historian/pith/internal/walcursor"
)

// Queue directory entries. See docs/format/forward.md.
const (
	cursorFile = "cursor" // docs/format/cursor.md
	poisonDir  = "poison"
)

// errStop ends a read-ahead Replay early.
var errStop = errors.New("stop replay")

// run is the sender goroutine: it sends batches in order, one at a time,
// and retries a failed one with backoff until it is confirmed, set aside
// or dropped.
func (q *Queue) run() {
	defer close(q.done)
	wait := q.opts.RetryMin
	for {
		e, rec, err := q.next()
		if e == nil {
			return
		}
		if err == nil {
			b := Batch{ID: q.batchID(e.pos), Payload: rec, Points: e.points}
			err = q.sink.Send(q.ctx, b)
			switch {
			case err == nil:
				q.finish(e, true)
				wait = q.opts.RetryMin
			case q.ctx.Err() != nil:
				return
			case errors.Is(err, ErrPermanent):
				q.poison(b, err)
				q.finish(e, false)
				err = nil
			}
		}
		if err != nil {
			q.release(e)
			q.log.Warn("forward send failed; retrying", "batch", q.batchID(e.pos), "retry_in", wait, "err", err)
			select {
			case <-q.ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, q.opts.RetryMax)
		}
		if err := q.saveCursor(false); err != nil {
			q.log.Error("save forward cursor", "err", err)
		}
	}
}

// batchID returns the stable id of the batch at pos.
func (q *Queue) batchID(pos wal.Pos) string {
	return fmt.Sprintf("%s-%d-%d", q.opts.Site, pos.Segment, pos.Offset)
}

// next waits for the oldest unsent batch, drops batches past MaxAge, marks
// the batch in flight and returns it with its bytes. It returns a nil
// entry once the queue is closed, and an error (with the entry, which the
// caller releases) when the bytes cannot be read.
func (q *Queue) next() (*entry, []byte, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.closed {
			return nil, nil, nil
		}
		cutoff := time.Now().Add(-q.opts.MaxAge).UnixMilli()
		q.dropLocked(func(e *entry) bool { return e.enq < cutoff })
		if len(q.entries) > 0 {
			break
		}
		q.cond.Wait()
	}
	e := q.entries[0]
	q.inflight = e
	if e.rec != nil {
		return e, e.rec, nil
	}
	var err error
	if e.pos.Segment >= q.liveSeg {
		// The batch was appended after the WAL was opened but did not fit
		// in memory. Replay only sees segments that existed at Open, so
		// reopen the WAL; Enqueue waits meanwhile, which is rare and short.
		err = q.reopenLocked()
	}
	if err == nil {
		// readAhead needs no lock: only this goroutine reads the WAL or
		// replaces it, and Replay does not touch the segments Append writes.
		q.mu.Unlock()
		err = q.readAhead(e.pos)
		q.mu.Lock()
	}
	if err != nil {
		return e, nil, err
	}
	if e.rec == nil {
		return e, nil, fmt.Errorf("read batch %v: not found in queue wal", e.pos)
	}
	return e, e.rec, nil
}

// reopenLocked closes and reopens the WAL so that Replay sees every
// segment. The caller holds mu.
func (q *Queue) reopenLocked() error {
	// ErrClosed: an earlier reopen closed it but could not open it again
	// (a full disk); try again now.
	if err := q.w.Close(); err != nil && !errors.Is(err, wal.ErrClosed) {
		return fmt.Errorf("close forward wal for reopen: %w", err)
	}
	q.log.Debug("reopening forward wal to read spilled batches")
	return q.openWAL()
}

// readAhead reads up to ReadAhead bytes of batches from pos on and hangs
// them on their entries.
func (q *Queue) readAhead(from wal.Pos) error {
	type rec struct {
		pos wal.Pos
		b   []byte
	}
	var recs []rec
	total := 0
	err := q.w.Replay(from, func(pos wal.Pos, b []byte) error {
		if pos.Less(from) {
			return nil
		}
		recs = append(recs, rec{pos, append([]byte(nil), b...)})
		total += len(b)
		if total >= q.opts.ReadAhead {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("read forward backlog: %w", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	j := 0
	for _, r := range recs {
		for j < len(q.entries) && q.entries[j].pos.Less(r.pos) {
			j++
		}
		if j == len(q.entries) {
			break
		}
		if e := q.entries[j]; e.pos.Equal(r.pos) && !e.done && e.rec == nil {
			e.rec = r.b
		}
	}
	return nil
}

// finish marks the in-flight batch e as gone; sent says the upstream
// confirmed it.
func (q *Queue) finish(e *entry, sent bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if sent {
		q.st.Sent += uint64(e.points)
		q.st.SentBatches++
		q.countSentLocked(e.points)
	}
	q.inflight = nil
	q.finishLocked(e)
	q.trimLocked()
}

// release gives the in-flight batch e back after a failed send, so that
// the caps may drop it while the upstream is away.
func (q *Queue) release(e *entry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.st.Errors++
	q.inflight = nil
}

// poison sets a refused batch aside in the poison directory, where an
// operator can inspect or resend it.
func (q *Queue) poison(b Batch, cause error) {
	q.mu.Lock()
	q.st.Poisoned++
	q.mu.Unlock()
	q.log.Error("upstream refused batch; set aside", "batch", b.ID, "points", b.Points, "err", cause)
	dir := filepath.Join(q.dir, poisonDir)
	path := filepath.Join(dir, b.ID+".batch")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		q.log.Error("create poison dir", "err", err)
		return
	}
	if err := atomicfile.Write(path, b.Payload, 0o644); err != nil {
		q.log.Error("write poison batch", "batch", b.ID, "err", err)
	}
}

// saveCursor writes the cursor when it moved and CursorInterval passed
// (or force is set), then deletes the WAL segments wholly before it.
// Only the sender goroutine, or Close after it stopped, calls it.
func (q *Queue) saveCursor(force bool) error {
	q.mu.Lock()
	cur := q.cursor
	q.mu.Unlock()
	if cur == q.saved || (!force && time.Since(q.savedTime) < q.opts.CursorInterval) {
		return nil
	}
	if err := walcursor.Write(vfs.OS{}, filepath.Join(q.dir, cursorFile), walcursor.Cursor{Pos: cur}); err != nil {
		return fmt.Errorf("write forward cursor: %w", err)
	}
	q.saved, q.savedTime = cur, time.Now()
	// The segment holding the cursor may hold unsent batches after it.
	if err := q.w.TruncateBefore(cur.Segment); err != nil {
		return fmt.Errorf("truncate forward wal: %w", err)
	}
	return nil
}

// readCursor reads the cursor file; a missing file is the zero cursor. A
// damaged one is an error: it was written atomically, so something else
// damaged it, and failing keeps an operator from silently resending a whole
// history.
func readCursor(path string) (wal.Pos, error) {
	c, _, err := walcursor.Read(vfs.OS{}, path)
	if err != nil {
		return wal.Pos{}, fmt.Errorf("read forward cursor: %w", err)
	}
	return c.Pos, nil
}

// abort stops the queue as a crash would: no cursor is written, and the
// WAL is closed only to release its files. Tests use it.
func (q *Queue) abort() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
	q.cancel()
	<-q.done
	q.w.Close()
}
