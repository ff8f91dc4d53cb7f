package store

import (
	"fmt"

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
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastRetention time.Time
	for {
		select {
		case <-db.stop:
			return
		case <-db.flushReq:
		case <-tick.C:
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
		if err := db.compact(false); err != nil && !isNoSpace(err) {
			db.log.Error("compact runs", "err", err)
		}
		if time.Since(lastRetention) >= retentionEvery {
			lastRetention = time.Now()
			if err := db.enforceRetention(); err != nil {
				db.log.Error("enforce retention", "err", err)
			}
		}
	}
}

// flushAll rotates and flushes everything; with final it also merges every
// day into a single run.
func (db *DB) flushAll(final bool) error {
	db.rotate()
	if err := db.flushFrozen(); err != nil {
		return err
	}
	return db.compact(final)
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
		if err := db.noteDisk(&db.nospace.flush, "flushes", db.flushHead(fh)); err != nil {
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
// changes only here, in commitBulk and in compact.
func (db *DB) flushHead(fh *frozenHead) error {
	runs, err := db.writeHeadRuns(fh.series)
	if err != nil {
		return err
	}
	added := make(map[int64][]*runFile, len(runs))
	for p, r := range runs {
		added[p] = []*runFile{r}
	}
	return db.installRuns(added, func() { db.frozen = db.frozen[1:] }, fh.checkpoint)
}

// writeHeadRuns writes the sorted samples of a head as one new run per day.
// The runs are not installed yet.
func (db *DB) writeHeadRuns(series []*headSeries) (map[int64]*runFile, error) {
	if err := db.series.save(db.fs, db.dir); err != nil {
		return nil, err
	}
	byPart := make(map[int64][]runInput)
	for id, s := range series {
		if s == nil || len(s.ts) == 0 {
			continue
		}
		byDay(runInput{id: uint32(id), ts: s.ts, vs: s.vs, qs: s.qs, xs: s.xs}, func(p int64, day runInput) {
			byPart[p] = append(byPart[p], day)
		})
	}
	if db.opts.RetentionRaw > 0 {
		// Samples accepted just before their day expired: that day keeps
		// only rollups now, which cannot take them exactly.
		horizon := db.opts.Now().Add(-db.opts.RetentionRaw).UnixMilli()
		for p, in := range byPart {
			if (p+1)*partitionMs <= horizon {
				n := 0
				for _, x := range in {
					n += len(x.ts)
				}
				db.log.Warn("dropped samples that expired before they were flushed", "samples", n)
				delete(byPart, p)
			}
		}
	}
	out := make(map[int64]*runFile, len(byPart))
	fail := func(err error) (map[int64]*runFile, error) {
		for _, r := range out {
			r.close()
			db.fs.Remove(r.path)
		}
		return nil, err
	}
	// Many days at once (a backfill) are made durable by one syncfs.
	batch := len(byPart) > 4 && isOS(db.fs)
	for p, in := range byPart {
		r, err := db.writeRun(p, in, !batch)
		if err != nil {
			return fail(err)
		}
		out[p] = r
	}
	if batch {
		if err := syncFS(filepath.Join(db.dir, "runs")); err != nil {
			return fail(err)
		}
	}
	return out, nil
}

// installRuns publishes new runs (per day, oldest first; they win over the
// day's existing runs on equal timestamps). A day whose runs would meet in
// time for some series, or grow past MaxRunsPerPart, is merged into one run.
func (db *DB) installRuns(added map[int64][]*runFile, swap func(), checkpoint uint32) error {
	install := make(map[int64][]*runFile, len(added))
	replaced := make(map[int64][]*runFile)
	var unused []*runFile
	for p, rs := range added {
		old := db.parts[p]
		all := append(append([]*runFile(nil), old...), rs...)
		if len(all) <= db.opts.MaxRunsPerPart && disjoint(all) {
			install[p] = rs
			continue
		}
		m, err := db.mergeRuns(p, all, false)
		if err != nil {
			db.discard(install)
			db.discard(added)
			return err
		}
		install[p] = []*runFile{m}
		replaced[p] = old
		unused = append(unused, rs...)
	}
	if err := db.install(install, replaced, swap, checkpoint); err != nil {
		db.discard(added)
		return err
	}
	for _, r := range unused {
		r.close()
		db.fs.Remove(r.path)
	}
	return nil
}

// disjoint reports whether no two runs hold samples of one series in
// overlapping time ranges.
func disjoint(runs []*runFile) bool {
	if len(runs) < 2 {
		return true
	}
	type span struct{ lo, hi int64 }
	spans := make(map[uint32][]span)
	for _, r := range runs {
		for i := range r.series {
			s := &r.series[i]
			spans[s.id] = append(spans[s.id], span{s.minT, s.maxT})
		}
	}
	for _, ss := range spans {
		if len(ss) < 2 {
			continue
		}
		sort.Slice(ss, func(i, j int) bool { return ss[i].lo < ss[j].lo })
		for i := 1; i < len(ss); i++ {
			if ss[i].lo <= ss[i-1].hi {
				return false
			}
		}
	}
	return true
}

// commitBulk publishes the private runs of a bulk transaction; txn is its
// id when its points were copied to the WAL for the followers, else 0.
func (db *DB) commitBulk(runs map[int64][]*runFile, txn uint64) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if e := db.failed.Load(); e != nil {
		return *e
	}
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	// Writes applied before this commit rank below it: when the heads hold
	// samples of the bulk's tags, they go to runs first.
	if db.headsHold(runs) {
		db.rotate()
		if err := db.flushFrozenLocked(); err != nil {
			return err
		}
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
	s := db.series
	s.mu.Lock()
	for _, rs := range runs {
		for _, r := range rs {
			for i := range r.series {
				x := &r.series[i]
				if x.fine == fineText {
					s.observeTextLocked(x.id, x.minT, "", model.QualityGood)
					s.observeTextLocked(x.id, x.last.T, x.lastText, x.last.Q)
					continue
				}
				s.observeLocked(x.id, x.minT, x.total.first, model.QualityGood)
				s.observeLocked(x.id, x.last.T, x.last.V, x.last.Q)
			}
		}
	}
	s.mu.Unlock()
	return nil
}

// headsHold reports whether the active or a frozen head has samples of a
// series in runs.
func (db *DB) headsHold(runs map[int64][]*runFile) bool {
	db.mu.RLock()
	defer db.mu.RUnlock()
	heads := []*head{db.active}
	for _, f := range db.frozen {
		heads = append(heads, f.head)
	}
	for _, h := range heads {
		h.mu.RLock()
		for _, rs := range runs {
			for _, r := range rs {
				for i := range r.series {
					id := r.series[i].id
					if int(id) < len(h.series) && h.series[id] != nil && len(h.series[id].ts) > 0 {
						h.mu.RUnlock()
						return true
					}
				}
			}
		}
		h.mu.RUnlock()
	}
	return false
}

// writeRun writes inputs as a new run of partition p (not yet installed).
func (db *DB) writeRun(p int64, in []runInput, fsync bool) (*runFile, error) {
	sort.Slice(in, func(i, j int) bool { return in[i].id < in[j].id })
	seq := db.allocSeq()
	rw, err := createRun(db.fs, filepath.Join(db.dir, "runs"), p, seq, inputsHoldText(in))
	if err != nil {
		return nil, err
	}
	for i := range in {
		rw.add(&in[i], false)
	}
	path, err := rw.finish(fsync)
	if err != nil {
		return nil, err
	}
	return db.openWritten(path)
}

func (db *DB) allocSeq() uint64 { return db.seq.Add(1) }

func (db *DB) openWritten(path string) (*runFile, error) {
	r, err := openRun(db.fs, path)
	if err != nil {
		db.fs.Remove(path)
		return nil, err
	}
	db.stats.RunBytes.Add(r.size)
	return r, nil
}

// mergeRuns writes one run holding the data of runs, given oldest first:
// on equal timestamps the newer run wins. It works one series at a time
// so memory stays bounded by the largest series of the day.
func (db *DB) mergeRuns(p int64, runs []*runFile, dropRaw bool) (*runFile, error) {
	ids := make(map[uint32]bool)
	for _, r := range runs {
		for i := range r.series {
			ids[r.series[i].id] = true
		}
	}
	order := make([]uint32, 0, len(ids))
	for id := range ids {
		order = append(order, id)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	rw, err := createRun(db.fs, filepath.Join(db.dir, "runs"), p, db.allocSeq(), runsHoldText(runs))
	if err != nil {
		return nil, err
	}
	var acc, next, tmp runInput
	for _, id := range order {
		acc.reset()
		for _, r := range runs {
			rs := r.find(id)
			if rs == nil {
				continue
			}
			next.reset()
			if err := r.readAll(rs, &next); err != nil {
				db.stats.CorruptBlocks.Add(1)
				db.log.Error("merge skips damaged data", "err", err)
			}
			if len(next.ts) == 0 {
				continue
			}
			if len(acc.ts) > 0 && (acc.xs != nil) != (next.xs != nil) {
				acc.asText()
				next.asText()
			}
			if len(acc.ts) == 0 || next.ts[0] > acc.ts[len(acc.ts)-1] {
				if next.xs != nil {
					acc.xs = append(acc.xs, next.xs...)
				}
				acc.ts = append(acc.ts, next.ts...)
				acc.vs = append(acc.vs, next.vs...)
				acc.qs = append(acc.qs, next.qs...)
				continue
			}
			mergeSamples(&tmp, &acc, &next)
			acc, tmp = tmp, acc
		}
		acc.id = id
		rw.add(&acc, dropRaw)
	}
	path, err := rw.finish(true)
	if err != nil {
		return nil, err
	}
	db.stats.Compactions.Add(1)
	return db.openWritten(path)
}

// mergeSamples merges two sorted sample sets into dst; b wins on equal times.
func mergeSamples(dst, a, b *runInput) {
	if a.xs != nil || b.xs != nil {
		mergeText(dst, a, b)
		return
	}
	dst.ts, dst.vs, dst.qs = dst.ts[:0], dst.vs[:0], dst.qs[:0]
	dst.xs = nil
	i, j := 0, 0
	for i < len(a.ts) || j < len(b.ts) {
		switch {
		case j == len(b.ts) || (i < len(a.ts) && a.ts[i] < b.ts[j]):
			dst.ts, dst.vs, dst.qs = append(dst.ts, a.ts[i]), append(dst.vs, a.vs[i]), append(dst.qs, a.qs[i])
			i++
		default:
			if i < len(a.ts) && a.ts[i] == b.ts[j] {
				i++
			}
			dst.ts, dst.vs, dst.qs = append(dst.ts, b.ts[j]), append(dst.vs, b.vs[j]), append(dst.qs, b.qs[j])
			j++
		}
	}
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
			m.Runs = append(m.Runs, filepath.Base(r.path))
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
	if swap != nil {
		swap()
	}
	for _, rs := range replaced {
		for _, r := range rs {
			db.cache.dropRun(r)
			r.close()
			db.fs.Remove(r.path)
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
		end := (p + 1) * partitionMs
		switch {
		case rollAge > 0 && end <= now.Add(-rollAge).UnixMilli():
			if err := db.install(nil, map[int64][]*runFile{p: runs}, nil, 0); err != nil {
				return err
			}
			db.log.Info("retention removed a day", "day", time.UnixMilli(p*partitionMs).UTC().Format("2006-01-02"))
		case rawAge > 0 && end <= now.Add(-rawAge).UnixMilli() && hasRaw(runs):
			m, err := db.mergeRuns(p, runs, true)
			if err != nil {
				return err
			}
			if err := db.install(map[int64][]*runFile{p: {m}}, map[int64][]*runFile{p: runs}, nil, 0); err != nil {
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
		for i := range r.series {
			if s := &r.series[i]; s.fine != noTier && s.fine != fineText && len(s.chunks) > 0 {
				return true
			}
		}
	}
	return false
}

// compact merges the runs of each day that has more than one, except the
// newest day (still being written) unless final.
func (db *DB) compact(final bool) error {
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	db.mu.RLock()
	var newest int64
	first := true
	var todo []int64
	for p, rs := range db.parts {
		if first || p > newest {
			newest, first = p, false
		}
		if len(rs) > 1 {
			todo = append(todo, p)
		}
	}
	db.mu.RUnlock()
	sort.Slice(todo, func(i, j int) bool { return todo[i] < todo[j] })
	for _, p := range todo {
		if p == newest && !final {
			continue
		}
		select {
		case <-db.stop:
			if !final {
				return nil
			}
		default:
		}
		old := db.parts[p]
		r, err := db.mergeRuns(p, old, false)
		if err != nil {
			return err
		}
		if err := db.install(map[int64][]*runFile{p: {r}}, map[int64][]*runFile{p: old}, nil, 0); err != nil {
			return err
		}
	}
	return nil
}
