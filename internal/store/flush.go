package store

import (
	"errors"
	"fmt"
	"slices"

	"github.com/pith-historian/pith/internal/clock"
	"github.com/pith-historian/pith/internal/model"

	"path/filepath"
	"sort"
	"time"
)

// rotate freezes the active head and starts a new one. The WAL is cut so
// that the frozen head's records end in whole segments; replay must still
// start at the first record of any transaction not yet applied.
func (db *DB) rotate() {
	db.orderMu.Lock()
	defer db.orderMu.Unlock()
	db.mu.RLock()
	n, _ := db.active.size()
	db.mu.RUnlock()
	empty := n == 0
	if empty {
		return
	}
	seg, err := db.wal.Cut()
	if err != nil {
		// The WAL is failed; writes report it, and the head stays active.
		db.log.Error("cut wal segment", "err", err)
		return
	}
	cp := seg
	if db.replaying {
		// Records after the replay position are not all applied yet.
		cp = db.replayFrom
	}
	for _, pos := range db.inflight {
		if pos.Segment < cp {
			cp = pos.Segment
		}
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	h := db.active
	// Not sorted here: the flush does it (sortFrozen), outside the locks
	// every commit takes. No write reaches h any more: applies hold db.mu
	// for reading, and the next finds the new active head.
	h.freeze()
	db.frozen = append(db.frozen, &frozenHead{head: h, checkpoint: cp})
	db.active = newHead()
	select {
	case db.flushReq <- struct{}{}:
	default:
	}
}

// waitFlushed flushes frozen heads in the caller's goroutine; writers that
// outrun the flusher pay for it themselves.
func (db *DB) waitFlushed() error {
	return db.flushFrozen()
}

// retentionEvery is how often expired days are looked for.
const retentionEvery = time.Minute

// maintain flushes heads by size and age and merges closed days.
func (db *DB) maintain() {
	defer db.wg.Done()
	tick := clock.NewAligned(time.Second)
	defer tick.Stop()
	var lastRetention time.Time
	lastSweep := time.Now()
	for {
		select {
		case <-db.stop:
			return
		case <-db.flushReq:
		case <-tick.C:
			tick.Next()
			db.mu.RLock()
			n, born := db.active.size()
			db.mu.RUnlock()
			old := n > 0 && db.opts.HeadMaxAge > 0 && db.opts.Now().Sub(born) >= db.opts.HeadMaxAge
			if old {
				db.rotate()
			}
			// New tags reach the series file within a second, after which
			// WAL records name them by id (a few bytes) instead of by name.
			db.flushMu.Lock()
			if err := db.series.save(db.fs, db.dir); err != nil && !isNoSpace(err) {
				db.log.Warn("save series", "err", err)
			}
			db.flushMu.Unlock()
		}
		if err := db.flushFrozen(); err != nil {
			if !isNoSpace(err) { // logged once by noteDisk
				db.log.Error("flush head", "err", err)
			}
			continue
		}
		if time.Since(lastSweep) >= indexIdle {
			lastSweep = time.Now()
			db.dropIdleIndexes(false)
		}
		if time.Since(lastRetention) >= retentionEvery {
			lastRetention = time.Now()
			if err := db.enforceRetention(); err != nil {
				db.log.Error("enforce retention", "err", err)
			}
		}
	}
}

// flushAll rotates and flushes everything; with final (Close, after the
// merge loop stopped) it also merges every day into a single run.
func (db *DB) flushAll(final bool) error {
	db.rotate()
	if err := db.flushFrozen(); err != nil {
		return err
	}
	if !final {
		return nil
	}
	return db.compactAll()
}

// flushFrozen writes every frozen head to run files, oldest first.
func (db *DB) flushFrozen() error {
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	return db.flushFrozenLocked()
}

func (db *DB) flushFrozenLocked() error {
	for {
		db.mu.RLock()
		if len(db.frozen) == 0 {
			db.mu.RUnlock()
			return nil
		}
		fh := db.frozen[0]
		db.mu.RUnlock()
		start := time.Now()
		err := db.flushHead(fh)
		if errors.Is(err, errMergeMet) {
			continue // the head may be flushed by now: look again
		}
		if err := db.noteDisk(&db.nospace.flush, "flushes", err); err != nil {
			e := fmt.Errorf("flush head: %w", err)
			if !isNoSpace(err) {
				db.failed.Store(&e)
			}
			// Out of space, the head stays frozen in memory with its WAL
			// and the flush is retried.
			return e
		}
		db.stats.Flushes.Add(1)
		db.stats.LastFlushMillis.Store(time.Since(start).Milliseconds())
	}
}

// flushHead writes one frozen head. The caller holds flushMu, so db.parts
// changes only here, in commitBulk and in compact.go. Runs that meet the
// merge in flight wait for it (mergeMeets), releasing flushMu: if another
// flusher wrote the head meanwhile, the runs are removed and errMergeMet
// tells the caller to look again.
func (db *DB) flushHead(fh *frozenHead) error {
	fh.sortFrozen()
	added, err := db.writeHeadRuns(fh.series, true)
	if err != nil {
		return err
	}
	for db.mergeMeets(added) {
		db.mergeDone.Wait()
		db.mu.RLock()
		first := len(db.frozen) > 0 && db.frozen[0] == fh
		db.mu.RUnlock()
		if !first {
			db.discard(added)
			return errMergeMet
		}
	}
	return db.installRuns(added, func() {
		// Cleared before it is sliced off: frozen[1:] of a one-element
		// slice keeps the array, and the array kept the whole flushed
		// head alive until the next rotation, doubling the head's memory.
		db.frozen[0] = nil
		db.frozen = db.frozen[1:]
	}, fh.checkpoint)
}

// writeHeadRuns writes the sorted samples of a head as one new run per day.
// The runs are not installed yet. A day's run is written one series at a
// time, each decoded from the head's blocks into one reused buffer, so a
// flush holds no more than one series of one day decoded.
//
// With split, the samples of a series that are not newer than the newest
// one the day's runs hold of it (late: a central Pith's consumers deliver
// messages a little out of order) go to a run of their own, written
// first, so that installRuns merges only them with the runs they meet
// while the rest, newer than anything stored, is added as it is.
func (db *DB) writeHeadRuns(series []*headSeries, split bool) (map[int64][]*runFile, error) {
	if err := db.series.save(db.fs, db.dir); err != nil {
		return nil, err
	}
	byPart := make(map[int64][]uint32) // day -> ids with samples in it, increasing
	text := make(map[int64]bool)       // days that get a text series
	for id, s := range series {
		if s == nil || s.n == 0 {
			continue
		}
		for _, p := range s.days() {
			byPart[p] = append(byPart[p], uint32(id))
			text[p] = text[p] || s.text
		}
	}
	if db.opts.RetentionRaw > 0 {
		// Samples accepted just before their day expired: that day keeps
		// only rollups now, which cannot take them exactly.
		horizon := db.opts.Now().Add(-db.opts.RetentionRaw).UnixMilli()
		for p, ids := range byPart {
			if (p+1)*partitionMs <= horizon {
				n := 0
				for _, id := range ids {
					var in runInput
					series[id].read(p*partitionMs, (p+1)*partitionMs, &in)
					n += len(in.ts)
				}
				db.log.Warn("dropped samples that expired before they were flushed", "samples", n)
				delete(byPart, p)
			}
		}
	}
	out := make(map[int64][]*runFile, len(byPart))
	fail := func(err error) (map[int64][]*runFile, error) {
		db.discard(out)
		return nil, err
	}
	// Many days at once (a backfill) are made durable by one syncfs.
	batch := len(byPart) > 4 && isOS(db.fs)
	var buf, view runInput
	for p, ids := range byPart {
		from, to := p*partitionMs, (p+1)*partitionMs
		var front map[uint32]int64 // id -> newest time in the day's runs
		if split {
			front = db.frontier(p)
		}
		// read returns the samples of ids[i] in [lo, hi), clipped to the
		// day.
		read := func(ids []uint32, i int, lo, hi int64) *runInput {
			s := series[ids[i]]
			lo, hi = max(lo, from), min(hi, to)
			if v, ok := s.view(lo, hi); ok {
				// Not into buf: its arrays are reused for decoding, and
				// these are the head's own.
				view = v
				view.id = ids[i]
				return &view
			}
			buf.reset()
			buf.id = ids[i]
			n := s.count(lo, hi)
			buf.ts, buf.vs, buf.qs = slices.Grow(buf.ts, n), slices.Grow(buf.vs, n), slices.Grow(buf.qs, n)
			s.read(lo, hi, &buf)
			return &buf
		}
		var late []uint32
		for _, id := range ids {
			if f, ok := front[id]; ok && series[id].count(from, f+1) > 0 {
				late = append(late, id)
			}
		}
		if len(late) > 0 {
			r, err := db.writeRunFrom(p, len(late), func(i int) *runInput {
				return read(late, i, from, front[late[i]]+1)
			}, text[p], !batch)
			if err != nil {
				return fail(err)
			}
			if r.samples() == 0 {
				r.close()
				db.fs.Remove(r.path)
			} else {
				out[p] = append(out[p], r)
			}
		}
		r, err := db.writeRunFrom(p, len(ids), func(i int) *runInput {
			lo := from
			if f, ok := front[ids[i]]; ok {
				lo = f + 1
			}
			return read(ids, i, lo, to)
		}, text[p], !batch)
		if err != nil {
			return fail(err)
		}
		out[p] = append(out[p], r)
	}
	if batch {
		if err := syncFS(filepath.Join(db.dir, "runs")); err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// installRuns publishes new runs (per day, oldest first; they win over the
// day's existing runs on equal timestamps). The runs of a day are kept
// disjoint (no series of one meets in time the same series of another):
// new runs that meet some of the day's are merged with those (see
// mergeMeeting), which late data alone does. A day that grows past
// MaxRunsPerPart is merged in the background (see compact.go), not here:
// a flush that merged the hours a day holds would hold up the writers
// waiting for it. The caller has waited for a merge in flight that the
// runs meet (mergeMeets).
func (db *DB) installRuns(added map[int64][]*runFile, swap func(), checkpoint uint32) error {
	install := make(map[int64][]*runFile, len(added))
	replaced := make(map[int64][]*runFile)
	var unused []*runFile // new runs merged into others: removed once installed
	// fail removes every run this call wrote or was given (closing and
	// removing twice is harmless).
	var made []*runFile // merges of this call
	fail := func(err error) error {
		db.discard(added)
		db.discard(map[int64][]*runFile{0: made})
		return err
	}
	for p, rs := range added {
		db.touched[p] = time.Now()
		old := db.parts[p]
		all := append(append([]*runFile(nil), old...), rs...)
		if disjoint(all) {
			install[p] = rs
			continue
		}
		mt, err := db.mergeMeeting(p, old, rs)
		if err != nil {
			return fail(err)
		}
		if mt == nil {
			// Runs of an older release that meet: the day is merged
			// whole.
			m, err := db.mergeRuns(p, all, false, nil)
			if err != nil {
				return fail(err)
			}
			made = append(made, m)
			install[p], replaced[p] = []*runFile{m}, old
			unused = append(unused, rs...)
			continue
		}
		made = append(made, mt.merged)
		unused = append(unused, mt.used...)
		install[p], replaced[p] = append(mt.fresh, mt.merged), mt.gone
	}
	if err := db.install(install, replaced, swap, checkpoint); err != nil {
		return fail(err)
	}
	for _, r := range unused {
		r.close()
		db.fs.Remove(r.path)
	}
	db.requestMerge()
	return nil
}

// commitBulk publishes the private runs of a bulk transaction, whose
// series staged holds and whose first and newest samples seen holds;
// txn is its id when its points were copied to the WAL for the
// followers, else 0.
func (db *DB) commitBulk(runs map[int64][]*runFile, staged idSet, seen *bulkSeen, txn uint64) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if e := db.failed.Load(); e != nil {
		return *e
	}
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	for {
		// Writes applied before this commit rank below it: when the heads
		// hold samples of the bulk's tags, they go to runs first.
		if db.headsHold(staged) {
			db.rotate()
			if err := db.flushFrozenLocked(); err != nil {
				return err
			}
		}
		// Waited for before the transaction is pending: the merge's
		// MANIFEST would list it as committed without its runs.
		if !db.mergeMeets(runs) {
			break
		}
		db.mergeDone.Wait() // the heads may hold more now: look again
	}
	if err := db.series.save(db.fs, db.dir); err != nil {
		return err
	}
	if txn != 0 {
		db.addPending(txn)
	}
	if err := db.installRuns(runs, nil, 0); err != nil {
		if txn != 0 {
			db.dropPending(txn)
		}
		return err
	}
	seen.observe(db.series)
	return nil
}

// bulkSeen is what the private runs of a bulk transaction hold of each
// series: its first and its newest sample. The commit makes them known
// to the series table (first times, latest values) from here, so it reads
// no run's index again: the spill that wrote a run dropped its index (40
// MB for a run of 100,000 series).
type bulkSeen struct {
	num  []seenSeries // by series id
	text map[uint32]seenText
}

type seenSeries struct {
	minT, maxT  int64
	first, last float64
	q           model.Quality
	has         bool
}

type seenText struct {
	minT, maxT int64
	last       string
	q          model.Quality
}

// add takes in the series of run r, written after those added before:
// of equal newest times, r's sample is the newer.
func (sn *bulkSeen) add(r *runFile) {
	ss := r.index()
	for i := range ss {
		x := &ss[i]
		if x.fine == fineText {
			if sn.text == nil {
				sn.text = make(map[uint32]seenText)
			}
			t, ok := sn.text[x.id]
			if !ok || x.minT < t.minT {
				t.minT = x.minT
			}
			if !ok || x.maxT >= t.maxT {
				t.maxT, t.last, t.q = x.maxT, x.lastText, x.lastQ
			}
			sn.text[x.id] = t
			continue
		}
		if int(x.id) >= len(sn.num) {
			sn.num = append(sn.num, make([]seenSeries, int(x.id)+1-len(sn.num))...)
		}
		n := &sn.num[x.id]
		if !n.has || x.minT < n.minT {
			n.minT, n.first = x.minT, x.first
		}
		if !n.has || x.maxT >= n.maxT {
			n.maxT, n.last, n.q = x.maxT, x.lastV, x.lastQ
		}
		n.has = true
	}
}

// observe makes the samples seen known to the series table s.
func (sn *bulkSeen) observe(s *seriesTable) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range sn.num {
		if n := &sn.num[id]; n.has {
			s.observeLocked(uint32(id), n.minT, n.first, model.QualityGood)
			s.observeLocked(uint32(id), n.maxT, n.last, n.q)
		}
	}
	for id, t := range sn.text {
		s.observeTextLocked(id, t.minT, "", model.QualityGood)
		s.observeTextLocked(id, t.maxT, t.last, t.q)
	}
}

// headsHold reports whether the active or a frozen head has samples of a
// series that staged holds (the series of a bulk transaction's runs),
// without reading the runs' indexes.
func (db *DB) headsHold(staged idSet) bool {
	db.mu.RLock()
	defer db.mu.RUnlock()
	heads := []*head{db.active}
	for _, f := range db.frozen {
		heads = append(heads, f.head)
	}
	for _, h := range heads {
		h.mu.RLock()
		if h.samples > 0 {
			for id, s := range h.series {
				if s != nil && s.n > 0 && staged.has(uint32(id)) {
					h.mu.RUnlock()
					return true
				}
			}
		}
		h.mu.RUnlock()
	}
	return false
}

// idSet is a set of series ids.
type idSet []uint64

func (s *idSet) add(id uint32) {
	if w := int(id / 64); w >= len(*s) {
		*s = append(*s, make([]uint64, w+1-len(*s))...)
	}
	(*s)[id/64] |= 1 << (id % 64)
}

func (s idSet) has(id uint32) bool {
	w := int(id / 64)
	return w < len(s) && s[w]&(1<<(id%64)) != 0
}

// writeRunFrom writes n series as a new run of partition p (not yet
// installed): next(i) returns the i-th, in increasing id order, valid
// until the next call. text says whether any of them is a text series.
func (db *DB) writeRunFrom(p int64, n int, next func(i int) *runInput, text, fsync bool) (*runFile, error) {
	seq := db.allocSeq()
	rw, err := createRun(db.fs, filepath.Join(db.dir, "runs"), p, seq, text)
	if err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		rw.add(next(i), false)
	}
	path, err := rw.finish(fsync)
	if err != nil {
		return nil, err
	}
	return db.openWritten(rw, path)
}

func (db *DB) allocSeq() uint64 { return db.seq.Add(1) }

func (db *DB) openWritten(rw *runWriter, path string) (*runFile, error) {
	r, err := openRunIndexed(db.fs, path, 0, -1, rw)
	if err != nil {
		db.fs.Remove(path)
		return nil, err
	}
	db.stats.RunBytes.Add(r.size)
	return r, nil
}

// install makes new runs durable in the manifest, swaps them in, and
// removes what they replace and the WAL they cover.
func (db *DB) install(added, replaced map[int64][]*runFile, swap func(), checkpoint uint32) error {
	if err := db.fs.SyncDir(filepath.Join(db.dir, "runs")); err != nil {
		db.discard(added)
		return fmt.Errorf("sync runs: %w", err)
	}
	db.mu.Lock()
	next := make(map[int64][]*runFile, len(db.parts)+len(added))
	for p, rs := range db.parts {
		next[p] = rs
	}
	for p, rs := range replaced {
		gone := make(map[*runFile]bool, len(rs))
		for _, r := range rs {
			gone[r] = true
		}
		var keep []*runFile
		for _, r := range next[p] {
			if !gone[r] {
				keep = append(keep, r)
			}
		}
		next[p] = keep
	}
	for p, rs := range added {
		next[p] = append(append([]*runFile(nil), next[p]...), rs...)
		sortRuns(next[p])
	}
	m := manifest{Version: db.version, NextSeq: db.seq.Load() + 1, Checkpoint: checkpoint}
	if checkpoint == 0 {
		m.Checkpoint = db.lastCheckpoint
	}
	for _, rs := range next {
		for _, r := range rs {
			m.Runs = append(m.Runs, r.listName())
		}
	}
	m.Runs = append(m.Runs, db.broken...)
	sort.Strings(m.Runs)
	m.Deletes = liveTombstones(db.tombstones, m.Checkpoint)
	m.Txns = db.follow.pending
	buf := encodeManifest(&m)
	if err := writeFileAtomic(db.fs, filepath.Join(db.dir, "MANIFEST"), buf); err != nil {
		db.mu.Unlock()
		db.discard(added)
		return fmt.Errorf("write manifest: %w", err)
	}
	db.lastCheckpoint = m.Checkpoint
	db.tombstones = m.Deletes
	db.parts = next
	db.span.changed(changedDays(added, replaced))
	if swap != nil {
		swap()
	}
	for _, rs := range replaced {
		for _, r := range rs {
			db.cache.dropRun(r)
			r.close()
			path := db.releaseRun(r)
			switch {
			case path == "": // its pack holds other runs still
			case db.backups > 0:
				db.backupKept = append(db.backupKept, path) // removed when it ends
			default:
				db.fs.Remove(path)
			}
		}
	}
	db.mu.Unlock()
	if db.replaying {
		return nil
	}
	db.commitPending()
	db.follow.checkpoint.Store(m.Checkpoint)
	if checkpoint > 0 {
		if err := db.releaseWAL(checkpoint); err != nil {
			db.log.Warn("truncate wal", "err", err)
		}
	}
	return nil
}

// discard removes runs written by a flush that could not be installed.
func (db *DB) discard(added map[int64][]*runFile) {
	for _, rs := range added {
		for _, r := range rs {
			r.close()
			db.fs.Remove(r.path)
		}
	}
}

// enforceRetention rewrites days older than the raw retention without
// their raw chunks, and removes days older than the rollup retention.
func (db *DB) enforceRetention() error {
	rawAge, rollAge := db.opts.RetentionRaw, db.opts.RetentionRollups
	if rawAge <= 0 && rollAge <= 0 {
		return nil
	}
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	now := db.opts.Now()
	for p, runs := range db.parts {
		if db.merging != nil && db.merging.holds(p) {
			continue // the next round
		}
		end := (p + 1) * partitionMs
		switch {
		case rollAge > 0 && end <= now.Add(-rollAge).UnixMilli():
			if err := db.install(nil, map[int64][]*runFile{p: runs}, nil, 0); err != nil {
				return err
			}
			db.log.Info("retention removed a day", "day", time.UnixMilli(p*partitionMs).UTC().Format("2006-01-02"))
		case rawAge > 0 && end <= now.Add(-rawAge).UnixMilli() && hasRaw(runs):
			m, err := db.mergeRuns(p, runs, true, nil)
			if err != nil {
				return err
			}
			if err := db.replaceRuns(p, runs, m); err != nil {
				return err
			}
			db.log.Info("retention dropped raw samples of a day", "day", time.UnixMilli(p*partitionMs).UTC().Format("2006-01-02"))
		}
	}
	return nil
}

// hasRaw reports whether a run still holds raw chunks of a series that
// has rollups.
func hasRaw(runs []*runFile) bool {
	for _, r := range runs {
		if r.rawTiered {
			return true
		}
	}
	return false
}

// frontier returns, for each series in day p's runs, the time of its
// newest sample there.
func (db *DB) frontier(p int64) map[uint32]int64 {
	db.mu.RLock()
	runs := db.parts[p]
	db.mu.RUnlock()
	if len(runs) == 0 {
		return nil
	}
	out := map[uint32]int64{}
	for _, r := range runs {
		for i, ss := 0, r.index(); i < len(ss); i++ {
			s := &ss[i]
			if t, ok := out[s.id]; !ok || s.maxT > t {
				out[s.id] = s.maxT
			}
		}
	}
	return out
}
