package events

import (
	"context"
	"fmt"
	"time"

	"github.com/pith-historian/pith/internal/clock"
	"github.com/pith-historian/pith/internal/store/wal"
)

// sinkLoop delivers WAL records to the file sink in order: first the
// records a previous run left undelivered (read back from the WAL), then
// the queue of records appended since, each leaving the queue (and
// memory) as it is written to the open file. After each completed file
// it saves the cursor and deletes WAL segments that hold only delivered
// records. A failure drops the open file and retries with exponential
// backoff, first writing again, read back from the WAL, the records the
// dropped file held. At Close it drains the queue (for at most
// DrainTimeout) and returns.
func (c *Collector) sinkLoop() {
	defer close(c.sinkDone)
	replayed := false
	backoff := time.Duration(0)
	var drainBy time.Time
	tick := clock.NewAligned(min(c.opts.RotateEvery/4+time.Millisecond, time.Second))
	defer tick.Stop()
	stopping := false
	for {
		var err error
		if !replayed {
			err = c.deliverBacklog()
			replayed = err == nil
		}
		if err == nil && c.lost.Valid {
			err = c.deliverLost()
		}
		if err == nil {
			err = c.deliverQueue(stopping)
		}
		if err != nil {
			c.abortFile()
			c.stats.sinkErrors.Add(1)
			backoff = min(max(backoff*2, c.opts.RetryMin), c.opts.RetryMax)
			c.log.Error("deliver events; retrying", "err", err, "in", backoff)
		} else {
			backoff = 0
		}
		if stopping {
			c.mu.Lock()
			left := len(c.queue)
			c.mu.Unlock()
			if err == nil && left == 0 && c.sink.cur == nil {
				return
			}
			if time.Now().After(drainBy) {
				c.log.Warn("giving up draining events; they stay in the wal", "records", left)
				c.sink.abort()
				return
			}
		}
		var retry <-chan time.Time
		if backoff > 0 {
			retry = time.After(backoff)
		}
		select {
		case <-c.notify:
			if backoff > 0 {
				<-retry
			}
		case <-tick.C:
			tick.Next()
			if backoff > 0 {
				<-retry
			}
		case <-retry:
		case <-c.stopCh(stopping):
			stopping = true
			drainBy = time.Now().Add(c.opts.DrainTimeout)
		}
	}
}

// lostRange is the records of this run that a dropped sink file held:
// those after the cursor up to Last. They are no longer in the queue and
// are read back from the WAL.
type lostRange struct {
	Valid bool
	Last  wal.Pos
}

// abortFile drops the open sink file. The queue records it held (after
// the cursor, up to the last one written) are to be written again.
func (c *Collector) abortFile() {
	if c.inFile.Valid && (!c.lost.Valid || c.lost.Last.Less(c.inFile.Last)) {
		c.lost = c.inFile
	}
	c.inFile = lostRange{}
	c.sink.abort()
}

// deliverLost writes again the records of a dropped file, read back from
// the WAL, then forgets them.
func (c *Collector) deliverLost() error {
	last := c.lost.Last
	after := wal.Pos{}
	if c.sink.cursor.Valid {
		after = c.sink.cursor.Pos
	}
	if !after.Less(last) {
		c.lost = lostRange{} // delivered since (by the backlog's replay)
		return nil
	}
	// The records reached the sink from memory, possibly before the
	// committer wrote them: wait until it has. Records a full disk cut
	// from the WAL were never acknowledged; what remains is read.
	if err := c.wal.Sync(context.Background(), last); err != nil && !wal.IsNoSpace(err) {
		return fmt.Errorf("read back events: %w", err)
	}
	err := c.wal.ReadWritten(after, last, func(pos wal.Pos, rec []byte) error {
		_, err := c.writeRecord(pos, rec, c.opts.Now())
		return err
	})
	if err != nil {
		return fmt.Errorf("read back events: %w", err)
	}
	c.lost = lostRange{}
	return nil
}

// writeRecord writes one record to the open file (opening one when
// none is) and completes the file when it is due. written says whether
// the record reached the file: then a failure to complete it leaves the
// record to the lost range, not to the caller.
func (c *Collector) writeRecord(pos wal.Pos, rec []byte, now time.Time) (written bool, err error) {
	if err := c.sink.write(pos, rec[recHeaderSize:], now); err != nil {
		return false, err
	}
	c.inFile = lostRange{Valid: true, Last: pos}
	if c.sink.due(now) {
		return true, c.commit()
	}
	return true, nil
}

// stopCh returns the stop channel until stopping, then nil (a closed
// channel would spin the select).
func (c *Collector) stopCh(stopping bool) <-chan struct{} {
	if stopping {
		return nil
	}
	return c.stop
}

// deliverBacklog writes the records that the WAL held at open and that
// are after the cursor, then completes the file, so that a later failure
// never needs to read them again.
func (c *Collector) deliverBacklog() error {
	cur := c.sink.cursor
	err := c.wal.Replay(cur.Pos, func(pos, _ wal.Pos, rec []byte) error {
		if cur.Valid && !cur.Pos.Less(pos) {
			return nil
		}
		_, err := c.writeRecord(pos, rec, c.opts.Now())
		return err
	})
	if err != nil {
		return err
	}
	return c.commit()
}

// deliverQueue writes the queued records to the open file, taking them
// out of the queue, and completes the file when it is due (or when
// stopping).
func (c *Collector) deliverQueue(stopping bool) error {
	for {
		c.mu.Lock()
		todo := c.queue
		c.queue = c.spare[:0]
		c.spare = nil
		c.mu.Unlock()
		if len(todo) == 0 {
			c.spare = todo
			break
		}
		var done int64      // bytes written
		now := c.opts.Now() // the records came within the last tick
		for i, q := range todo {
			written, err := c.writeRecord(q.pos, q.rec, now)
			if written {
				done += int64(len(q.rec))
				i++
			}
			if err != nil {
				// What was not written goes back in front of the
				// queue; what was is in the lost range now.
				c.mu.Lock()
				c.queue = append(todo[i:len(todo):len(todo)], c.queue...)
				c.queueBytes -= done
				c.mu.Unlock()
				return err
			}
		}
		c.mu.Lock()
		c.queueBytes -= done
		c.mu.Unlock()
		clear(todo)
		c.spare = todo[:0]
	}
	if stopping || c.sink.due(c.opts.Now()) {
		return c.commit()
	}
	return nil
}

// commit completes the open file, records the new cursor and deletes the
// WAL segments before the cursor's segment that no remembered id needs.
func (c *Collector) commit() error {
	records, events := 0, 0
	if c.sink.cur != nil {
		records, events = c.sink.cur.records, c.sink.cur.events
	}
	final, err := c.sink.commit()
	if err != nil || final == "" {
		return err
	}
	c.inFile = lostRange{}
	c.committedSeq.Store(c.sink.cursor.Seq)
	c.stats.files.Add(1)
	c.stats.delivered.Add(uint64(records))
	// Counted as pending upload before it leaves the WAL backlog, so
	// that the backlog never dips.
	c.addPending(final, events)
	c.backlogEvents.Add(-int64(events))
	if err := c.wal.TruncateBefore(c.keepFrom(c.sink.cursor.Pos.Segment)); err != nil {
		// The records are delivered; old segments only cost disk space
		// and are removed at the next commit.
		c.log.Warn("remove delivered wal segments", "err", err)
	}
	return nil
}
