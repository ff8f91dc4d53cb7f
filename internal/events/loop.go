package events

import (
	"slices"
	"time"

	"github.com/pith-historian/pith/internal/store/wal"
)

// sinkLoop delivers WAL records to the file sink in order: first the
// records a previous run left undelivered (read back from the WAL), then
// the queue of records appended since. After each completed file it saves
// the cursor, drops the delivered records from memory and deletes WAL
// segments that hold only delivered records. A failure drops the open
// file and retries from the cursor with exponential backoff. At Close it
// drains the queue (for at most DrainTimeout) and returns.
func (c *Collector) sinkLoop() {
	defer close(c.sinkDone)
	replayed := false
	sent := 0 // queue entries already in the open file
	backoff := time.Duration(0)
	var drainBy time.Time
	tick := time.NewTicker(min(c.opts.RotateEvery/4+time.Millisecond, time.Second))
	defer tick.Stop()
	stopping := false
	for {
		var err error
		if !replayed {
			err = c.deliverBacklog()
			replayed = err == nil
		}
		if err == nil {
			sent, err = c.deliverQueue(sent, stopping)
		}
		if err != nil {
			c.sink.abort()
			sent = 0
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
	err := c.wal.Replay(cur.Pos, func(pos wal.Pos, rec []byte) error {
		if cur.Valid && !cur.Pos.Less(pos) {
			return nil
		}
		if err := c.sink.write(pos, rec[recHeaderSize:], c.opts.Now()); err != nil {
			return err
		}
		if c.sink.due(c.opts.Now()) {
			return c.commit()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return c.commit()
}

// deliverQueue writes the queue entries from index sent on, completes the
// file when it is due (or when stopping) and returns the new count of
// entries in the open file.
func (c *Collector) deliverQueue(sent int, stopping bool) (int, error) {
	c.mu.Lock()
	// A copy, because commit shifts the queue's entries in place.
	todo := slices.Clone(c.queue[sent:])
	c.mu.Unlock()
	for _, q := range todo {
		if err := c.sink.write(q.pos, q.rec[recHeaderSize:], c.opts.Now()); err != nil {
			return sent, err
		}
		sent++
		if c.sink.due(c.opts.Now()) {
			if err := c.commit(); err != nil {
				return sent, err
			}
			sent = 0
		}
	}
	if stopping || c.sink.due(c.opts.Now()) {
		if err := c.commit(); err != nil {
			return sent, err
		}
		sent = 0
	}
	return sent, nil
}

// commit completes the open file and then forgets what it delivered: the
// queue entries up to the new cursor and the WAL segments before the
// cursor's segment.
func (c *Collector) commit() error {
	records, events := 0, 0
	if c.sink.cur != nil {
		records, events = c.sink.cur.records, c.sink.cur.events
	}
	final, err := c.sink.commit()
	if err != nil || final == "" {
		return err
	}
	c.committedSeq.Store(c.sink.cursor.Seq)
	c.stats.files.Add(1)
	c.stats.delivered.Add(uint64(records))
	// Counted as pending upload before it leaves the WAL backlog, so
	// that the backlog never dips.
	c.addPending(final, events)
	c.backlogEvents.Add(-int64(events))
	cur := c.sink.cursor.Pos
	c.mu.Lock()
	n := 0
	var freed int64
	for n < len(c.queue) && !cur.Less(c.queue[n].pos) {
		freed += int64(len(c.queue[n].rec))
		n++
	}
	m := copy(c.queue, c.queue[n:])
	clear(c.queue[m:])
	c.queue = c.queue[:m]
	c.queueBytes -= freed
	c.mu.Unlock()
	if err := c.wal.TruncateBefore(cur.Segment); err != nil {
		// The records are delivered; old segments only cost disk space
		// and are removed at the next commit.
		c.log.Warn("remove delivered wal segments", "err", err)
	}
	return nil
}
