package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/pith-historian/pith/internal/store/wal"
)

// The store side of followers that is not reading: which WAL segments are
// kept for them, what is lost past the disk budget, the commit records of
// bulk transactions and deletes, and the recovery of both at Open.

func newFollowers() *followers {
	return &followers{byName: make(map[string]*follower), seen: make(map[uint64]bool)}
}

// following reports whether a follower exists, so that bulk transactions
// and deletes write what the followers need.
func (db *DB) following() bool { return db.follow.count.Load() > 0 }

// releaseFollowed releases the segments no follower needs any more,
// after an Ack or an Unfollow moved a hold.
func (db *DB) releaseFollowed() error {
	cp := db.follow.checkpoint.Load()
	if cp == 0 || db.closed.Load() {
		return nil
	}
	return db.releaseWAL(cp)
}

// releaseWAL deletes the WAL segments that neither replay (segments below
// checkpoint are in run files) nor any follower needs. Past
// Options.FollowMaxBytes of WAL, the oldest segments below checkpoint are
// released even so, and every follower that still needed them counts the
// loss and resumes at the oldest retained record.
func (db *DB) releaseWAL(checkpoint uint32) error {
	fl := db.follow
	fl.retain.Lock()
	defer fl.retain.Unlock()
	keep := checkpoint
	all := fl.all()
	for _, st := range all {
		st.mu.Lock()
		keep = min(keep, st.acked.Hold.Segment)
		st.mu.Unlock()
	}
	if keep < checkpoint {
		segs, err := db.wal.Segments()
		if err != nil {
			return fmt.Errorf("release wal: %w", err)
		}
		var total int64
		for _, e := range segs {
			total += e.Size
		}
		for _, e := range segs {
			if total <= db.opts.FollowMaxBytes || e.Segment >= checkpoint {
				break
			}
			total -= e.Size
			keep = max(keep, e.Segment+1)
		}
		for _, st := range all {
			db.dropFollower(st, keep)
		}
	}
	return db.wal.TruncateBefore(keep)
}

// all returns the followers.
func (fl *followers) all() []*follower {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	out := make([]*follower, 0, len(fl.byName))
	for _, st := range fl.byName {
		out = append(out, st)
	}
	return out
}

// dropFollower moves st past the segments below keep when it still needs
// them: what it had not acknowledged there is counted as dropped (entries
// of small writes and committed transactions, and the points of
// transactions begun there, committed or not later), logged, and the
// cursor file rewritten at the oldest retained record. An open follower
// delivers again what it had not acknowledged from there on. The caller
// holds retain for writing.
func (db *DB) dropFollower(st *follower, keep uint32) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.acked.Hold.Segment >= keep {
		return
	}
	start := wal.Pos{Segment: keep, Offset: wal.FirstOffset}
	var lost Dropped
	count := func(e Entry) {
		lost.Records++
		lost.Points += int64(len(e.Points) + len(e.Texts))
	}
	if err := db.resetFollower(st); err != nil {
		st.log.Error("follower state unreadable while releasing wal", "err", err)
		st.txns = make(map[uint64]*openTxn)
		st.cur = st.acked.Cursor
	}
	if err := db.scanFollower(st, start, -1, count); err != nil {
		st.log.Error("follower counts released records", "err", err)
	}
	if st.cur.walPos().Less(start) {
		st.cur = position(start)
	}
	for id, t := range st.txns {
		if t.del != nil && t.first.Less(start) {
			lost.Records++
			delete(st.txns, id)
			continue
		}
		var kept []txnData
		for _, r := range t.recs {
			if r.pos.Less(start) {
				lost.Records++
				lost.Points += int64(r.points)
			} else {
				kept = append(kept, r)
			}
		}
		if len(kept) == 0 {
			delete(st.txns, id)
			continue
		}
		t.recs, t.first = kept, kept[0].pos
	}
	lost.Events = 1
	next := cursorState{Cursor: st.cur, Hold: st.hold(), Dropped: st.acked.Dropped}
	next.Dropped.Events += lost.Events
	next.Dropped.Records += lost.Records
	next.Dropped.Points += lost.Points
	st.log.Warn("wal over the follower budget: records released before the follower acknowledged them",
		"records", lost.Records, "points", lost.Points, "resumes_at", st.cur, "budget_bytes", db.opts.FollowMaxBytes)
	if err := writeFileAtomic(db.fs, st.path, encodeCursor(next)); err != nil {
		st.log.Error("write follower cursor", "err", err)
	}
	st.acked = next
	st.unacked = nil
}

// addPending lists id (a bulk transaction or a delete with a WAL record)
// as committed by the next MANIFEST write; commitPending writes its commit
// record after it. The caller holds flushMu.
func (db *DB) addPending(id uint64) { db.follow.pending = append(db.follow.pending, id) }

// dropPending takes id back after its MANIFEST write failed. The caller
// holds flushMu.
func (db *DB) dropPending(id uint64) {
	db.follow.pending = slices.DeleteFunc(db.follow.pending, func(x uint64) bool { return x == id })
}

// commitPending appends and syncs the commit records of the pending ids,
// whose MANIFEST write is done. On failure they stay listed in the
// MANIFEST, so the next write or Open tries again. The caller holds
// flushMu, so no MANIFEST write can drop them before the records are
// durable.
func (db *DB) commitPending() {
	fl := db.follow
	if len(fl.pending) == 0 {
		return
	}
	var last wal.Pos
	var err error
	for _, id := range fl.pending {
		if last, err = db.wal.Append(appendTxnRecord(nil, recCommit, id)); err != nil {
			break
		}
	}
	if err == nil {
		err = db.wal.Sync(context.Background(), last)
	}
	if err != nil {
		db.log.Warn("write commit records for followers; retried at the next manifest write", "err", err)
		return
	}
	fl.pending = nil
}

// noteReplayed records, during Open's replay, the ids of the records that
// are not data for the head: commit records (so that recovery knows which
// are missing) and every id, so that new ids stay above them.
func (fl *followers) noteReplayed(rec []byte) {
	if len(rec) == 0 {
		return
	}
	switch rec[0] {
	case recCommit, recAbort:
		if id, err := decodeTxnRecord(rec); err == nil {
			fl.seen[id] = rec[0] == recCommit
			fl.maxID = max(fl.maxID, id)
		}
	case recDelete:
		if id, _, _, _, err := decodeDeleteRecord(rec); err == nil {
			fl.maxID = max(fl.maxID, id)
		}
	}
}

// openFollowers runs at Open after the replay: it appends the commit
// record of every transaction the MANIFEST committed whose record the WAL
// lacks (a crash between the two), loads the followers' cursors, and,
// when there are followers, appends an open record: a transaction begun
// before it and not committed by then never will be.
func (db *DB) openFollowers(m *manifest) error {
	fl := db.follow
	fl.checkpoint.Store(m.Checkpoint)
	top := fl.maxID
	for _, id := range m.Txns {
		top = max(top, id)
	}
	for _, t := range m.Deletes {
		top = max(top, t.ID)
	}
	if db.nextTxn.Load() < top {
		db.nextTxn.Store(top)
	}
	if err := db.loadFollowers(); err != nil {
		return err
	}
	var recs [][]byte
	for _, id := range m.Txns {
		if !fl.seen[id] {
			db.log.Info("recovering the commit record of a committed transaction", "id", id)
			recs = append(recs, appendTxnRecord(nil, recCommit, id))
		}
	}
	fl.seen = nil
	if len(recs) == 0 && fl.count.Load() == 0 {
		return nil
	}
	recs = append(recs, []byte{recOpen})
	var last wal.Pos
	for _, rec := range recs {
		var err error
		if last, err = db.wal.Append(rec); err != nil {
			return fmt.Errorf("append recovery records: %w", err)
		}
	}
	if err := db.wal.Sync(context.Background(), last); err != nil {
		// The MANIFEST keeps listing the transactions: the next Open
		// tries again.
		fl.pending = m.Txns
		db.log.Warn("sync recovery records", "err", err)
	}
	return nil
}

// loadFollowers reads the cursor files. A damaged one resumes at the
// oldest retained record (deliveries again, never losses beyond what
// retention released), a cursor into released segments resumes there
// too, counted as dropped; both are logged.
func (db *DB) loadFollowers() error {
	fl := db.follow
	names, err := db.fs.ReadDir(db.followersPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list followers: %w", err)
	}
	segs, err := db.wal.Segments()
	if err != nil {
		return fmt.Errorf("list wal: %w", err)
	}
	oldest := wal.Pos{Segment: segs[0].Segment, Offset: wal.FirstOffset}
	for _, name := range names {
		if !validFollowerName.MatchString(name) || filepath.Ext(name) == ".tmp" {
			continue
		}
		path := filepath.Join(db.followersPath(), name)
		buf, err := readFile(db.fs, path)
		if err != nil {
			return fmt.Errorf("read follower cursor: %w", err)
		}
		c, err := decodeCursor(buf)
		rewrite := false
		switch {
		case err != nil:
			db.log.Error("follower cursor damaged; it resumes at the oldest retained record", "follower", name, "err", &CorruptionError{File: path, Err: err})
			c = cursorState{Cursor: position(oldest), Hold: oldest}
			rewrite = true
		case c.Hold.Less(oldest):
			db.log.Warn("follower cursor points into released wal segments; it resumes at the oldest retained record", "follower", name, "cursor", c.Cursor)
			c.Dropped.Events++
			if c.Cursor.walPos().Less(oldest) {
				c.Cursor = position(oldest)
			}
			c.Hold = oldest
			rewrite = true
		}
		st := db.newFollower(name, c)
		if rewrite {
			if err := writeFileAtomic(db.fs, path, encodeCursor(c)); err != nil {
				return fmt.Errorf("rewrite follower cursor: %w", err)
			}
		}
		fl.byName[name] = st
	}
	fl.count.Store(int32(len(fl.byName)))
	return nil
}
