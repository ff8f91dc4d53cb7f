package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/wal"
)

// Deleting samples (data correction). The design is in
// docs/design/0004-delete.md and the bytes in docs/format/store.md.
//
// A delete has two halves that must agree after a crash:
//
//  1. A delete record in the WAL marks the place of the delete among the
//     writes: records before it lose their samples in the range, records
//     after it keep theirs. The record alone commits nothing.
//  2. The day runs holding samples of the tag in the range are rewritten
//     without them (every rollup tier is rebuilt from what remains) and
//     installed with one manifest write that also lists the delete as a
//     tombstone: {tag, from, to, WAL position}. That manifest write is the
//     commit point.
//
// Replay applies a data record's samples except those a tombstone after
// it covers, so WAL records older than the delete cannot bring deleted
// samples back; a delete record whose tombstone is not in the manifest
// (the crash came before the commit point) has no effect. A tombstone
// leaves the manifest once the checkpoint passes its WAL segment, as
// nothing before it is replayed any more. Bulk loads never reach the WAL,
// so a tombstone never touches them.

// recDelete is the WAL record of a delete: id uvarint, from varint, to
// varint, tag length uvarint, tag bytes.
const recDelete byte = 'X'

// tombstone is a committed delete as the manifest lists it.
type tombstone struct {
	ID      uint64 `json:"id"`
	Tag     string `json:"tag"`
	From    int64  `json:"from"` // first deleted time, Unix ms
	To      int64  `json:"to"`   // end of the range (excluded)
	Segment uint32 `json:"segment"`
	Offset  int64  `json:"offset"` // WAL position of the delete record
}

func (t *tombstone) pos() wal.Pos { return wal.Pos{Segment: t.Segment, Offset: t.Offset} }

// liveTombstones returns the tombstones replay from checkpoint can still
// need: those whose record is in the checkpoint segment or later.
func liveTombstones(ts []tombstone, checkpoint uint32) []tombstone {
	var out []tombstone
	for _, t := range ts {
		if t.Segment >= checkpoint {
			out = append(out, t)
		}
	}
	return out
}

func appendDeleteRecord(dst []byte, id uint64, tag string, from, to int64) []byte {
	dst = append(dst, recDelete)
	dst = binary.AppendUvarint(dst, id)
	dst = binary.AppendVarint(dst, from)
	dst = binary.AppendVarint(dst, to)
	dst = binary.AppendUvarint(dst, uint64(len(tag)))
	return append(dst, tag...)
}

// Delete removes the samples of tag in [from, to) from the raw data and
// every rollup tier, and returns how many there were. It is atomic and
// durable: on return without error no query, restart or power cut brings
// them back; on error nothing changed. Writes applied before Delete are
// deleted, writes that commit after it are kept.
//
// A range reaching days whose raw samples expired (RetentionRaw) is
// refused with an error wrapping ErrTooOld: their rollups cannot be
// corrected exactly. An unknown tag is ErrUnknownTag.
func (db *DB) Delete(ctx context.Context, tag string, from, to int64) (int64, error) {
	if db.closed.Load() {
		return 0, ErrClosed
	}
	if to <= from {
		return 0, fmt.Errorf("delete: empty range: to (%d) must be after from (%d)", to, from)
	}
	if _, ok := db.series.lookup(tag); !ok {
		return 0, fmt.Errorf("delete %q: %w", tag, ErrUnknownTag)
	}
	if db.opts.RetentionRaw > 0 {
		if horizon := db.opts.Now().Add(-db.opts.RetentionRaw).UnixMilli(); partitionOf(from)*partitionMs < horizon {
			return 0, fmt.Errorf("delete from %d: %w (%s): only rollups are kept there", from, ErrTooOld, db.opts.RetentionRaw)
		}
	}
	if e := db.failed.Load(); e != nil {
		return 0, *e
	}
	if err := db.raiseVersion(formatDeletes); err != nil {
		return 0, fmt.Errorf("delete: %w", db.noteDisk(&db.nospace.flush, "deletes", err))
	}
	id := db.nextTxn.Add(1)
	rec := appendDeleteRecord(nil, id, tag, from, to)

	// Take a place in the commit order, as a write does: every earlier
	// commit is applied before the delete runs, later ones wait for it.
	pos, done, err := db.appendOrdered(rec)
	defer done()
	if err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, err // the record is not committed: it has no effect
	}

	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	t := tombstone{ID: id, Tag: tag, From: from, To: to, Segment: pos.Segment, Offset: pos.Offset}
	n, err := db.deleteLocked(t)
	if err := db.noteDisk(&db.nospace.flush, "deletes", err); err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	db.log.Info("deleted samples", "tag", tag, "from", from, "to", to, "samples", n)
	return n, nil
}

// deleteLocked applies a delete whose record is durable at t's position.
// The caller holds flushMu and the delete's place in the commit order, so
// the tag's data cannot change meanwhile.
func (db *DB) deleteLocked(t tombstone) (int64, error) {
	id, ok := db.series.lookup(t.Tag)
	if !ok {
		return 0, fmt.Errorf("delete %q: %w", t.Tag, ErrUnknownTag)
	}
	count, err := db.Aggregate(t.Tag, t.From, t.To, 1, model.AggCount)
	if err != nil {
		return 0, err
	}
	var n int64
	if count[0].OK {
		n = int64(count[0].V)
	}

	// Rewrite each day whose runs hold samples in the range as one run,
	// once no merge of one of them is in flight.
	days := db.daysHolding(id, t.From, t.To)
	for db.merging != nil && slices.ContainsFunc(days, db.merging.holds) {
		db.mergeDone.Wait()
		days = db.daysHolding(id, t.From, t.To)
	}
	added := make(map[int64][]*runFile, len(days))
	replaced := make(map[int64][]*runFile, len(days))
	for _, p := range days {
		old := db.parts[p] // db.parts changes only under flushMu, which we hold
		r, err := db.rewriteDay(p, old, id, t.From, t.To)
		if err != nil {
			db.discard(added)
			return 0, err
		}
		if r != nil { // nil: nothing is left of the day
			added[p] = []*runFile{r}
		}
		replaced[p] = old
	}
	// The manifest write installs the new runs and the tombstone at once.
	db.tombstones = append(db.tombstones, t)
	following := db.following()
	if following {
		db.addPending(t.ID) // followers deliver the delete at its commit record
	}
	if err := db.install(added, replaced, nil, 0); err != nil {
		db.tombstones = db.tombstones[:len(db.tombstones)-1]
		if following {
			db.dropPending(t.ID)
		}
		return 0, err
	}
	db.dropFromHeads(id, t.From, t.To)
	db.refreshSeries(id)
	return n, nil
}

// daysHolding returns, in order, the days whose runs hold samples of
// series id in [from, to).
func (db *DB) daysHolding(id uint32, from, to int64) []int64 {
	db.mu.RLock()
	defer db.mu.RUnlock()
	var days []int64
	for p, runs := range db.parts {
		for _, r := range runs {
			if rs := r.find(id); rs != nil && rs.minT < to && rs.maxT >= from {
				days = append(days, p)
				break
			}
		}
	}
	slices.Sort(days)
	return days
}

// rewriteDay writes one run holding the data of runs (oldest first, the
// newer winning on equal timestamps) without the samples of series id in
// [from, to), or nil when nothing is left of the day. Like mergeRuns it
// holds one series at a time in memory.
func (db *DB) rewriteDay(p int64, runs []*runFile, id uint32, from, to int64) (*runFile, error) {
	ids := make(map[uint32]bool)
	for _, r := range runs {
		for i, ss := 0, r.index(); i < len(ss); i++ {
			ids[ss[i].id] = true
		}
	}
	order := make([]uint32, 0, len(ids))
	for x := range ids {
		order = append(order, x)
	}
	sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
	rw, err := createRun(db.fs, filepath.Join(db.dir, "runs"), p, db.allocSeq(), runsHoldText(runs))
	if err != nil {
		return nil, err
	}
	var acc, next, tmp runInput
	for _, sid := range order {
		acc.reset()
		for _, r := range runs {
			rs := r.find(sid)
			if rs == nil {
				continue
			}
			next.reset()
			if err := r.readAll(rs, &next); err != nil {
				rw.abort()
				// A delete must not silently drop what it cannot read.
				db.stats.CorruptBlocks.Add(1)
				return nil, fmt.Errorf("rewrite day for delete: %w", err)
			}
			if len(next.ts) == 0 {
				continue
			}
			mergeSamples(&tmp, &acc, &next)
			acc, tmp = tmp, acc
		}
		if sid == id {
			cut(&acc, from, to)
		}
		if len(acc.ts) == 0 {
			continue
		}
		acc.id = sid
		rw.add(&acc, false)
	}
	if rw.n == 0 {
		rw.abort()
		return nil, nil
	}
	path, err := rw.finish(true)
	if err != nil {
		return nil, err
	}
	db.stats.Compactions.Add(1)
	return db.openWritten(rw, path)
}

// cut removes the samples in [from, to) from sorted in.
func cut(in *runInput, from, to int64) {
	i := sort.Search(len(in.ts), func(k int) bool { return in.ts[k] >= from })
	j := sort.Search(len(in.ts), func(k int) bool { return in.ts[k] >= to })
	if i == j {
		return
	}
	in.ts = append(in.ts[:i], in.ts[j:]...)
	in.vs = append(in.vs[:i], in.vs[j:]...)
	in.qs = append(in.qs[:i], in.qs[j:]...)
	if in.xs != nil {
		in.xs = append(in.xs[:i], in.xs[j:]...)
	}
}

// dropFromHeads removes the samples of series id in [from, to) from the
// active and frozen heads. Queries read frozen heads under db.mu for
// reading and flushes under flushMu (held by the caller), so holding
// db.mu for writing makes the change safe.
func (db *DB) dropFromHeads(id uint32, from, to int64) {
	db.mu.Lock()
	defer db.mu.Unlock()
	heads := []*head{db.active}
	for _, f := range db.frozen {
		heads = append(heads, f.head)
	}
	for _, h := range heads {
		h.mu.Lock()
		if s := h.getSorted(id); s != nil {
			h.samples -= s.dropRange(from, to)
		}
		h.mu.Unlock()
	}
}

// refreshSeries recomputes the newest sample and the first time of series
// id from the runs and heads, after a delete may have removed them.
func (db *DB) refreshSeries(id uint32) {
	var (
		has   bool
		first int64
		last  model.Sample
		ltext string
		rank  uint64 // of last: on equal times the newer run, then a head, wins
	)
	see := func(minT int64, l model.Sample, x string, r uint64) {
		if !has || minT < first {
			first = minT
		}
		if !has || l.T > last.T || (l.T == last.T && r > rank) {
			last, ltext, rank = l, x, r
		}
		has = true
	}
	db.mu.RLock()
	for _, runs := range db.parts {
		for _, r := range runs {
			if rs := r.find(id); rs != nil && rs.n > 0 {
				see(rs.minT, rs.last(), rs.lastText, r.seq)
			}
		}
	}
	heads := append([]*head(nil), db.active)
	for i := len(db.frozen) - 1; i >= 0; i-- {
		heads = append(heads, db.frozen[i].head)
	}
	for i, h := range heads {
		// The active head is the newest, then frozen heads newest first.
		r := ^uint64(0) - uint64(i)
		h.mu.Lock()
		if s := h.getSorted(id); s != nil && s.n > 0 {
			first, last, x := s.bounds()
			see(first, last, x, r)
		}
		h.mu.Unlock()
	}
	db.mu.RUnlock()
	s := db.series
	s.mu.Lock()
	if s.has[id] != has {
		s.listGen++
	}
	s.has[id] = has
	s.first[id] = first
	s.latest[id] = last
	s.ltext[id] = ltext
	s.mu.Unlock()
}

// replayRecord applies a replayed data record at pos, without the samples
// that a committed delete after it removed.
func (db *DB) replayRecord(pos wal.Pos, d *dataRecord) (int, error) {
	var live []tombstone
	for _, t := range db.tombstones {
		if pos.Less(t.pos()) {
			live = append(live, t)
		}
	}
	if len(live) == 0 {
		return db.applyRecord(d)
	}
	// Decode to points by name, then drop the deleted ones.
	pts := make([]model.Point, 0, d.n)
	var tpts []model.TextPoint
	s := db.series
	s.mu.RLock()
	for i := 0; i < d.n; i++ {
		key, t, v, q, err := d.next()
		if err != nil {
			s.mu.RUnlock()
			return 0, err
		}
		var name string
		switch sid := key - len(d.names); {
		case key < len(d.names):
			name = string(d.names[key])
		case sid < len(s.names):
			name = s.names[sid]
		default:
			s.mu.RUnlock()
			return 0, fmt.Errorf("data record names unknown series %d", sid)
		}
		if d.isText {
			tpts = append(tpts, model.TextPoint{Tag: name, T: t, Text: string(d.text), Q: q})
			continue
		}
		pts = append(pts, model.Point{Tag: name, T: t, V: v, Q: q})
	}
	s.mu.RUnlock()
	k := 0
	for _, p := range pts {
		if !deleted(live, p.Tag, p.T) {
			pts[k] = p
			k++
		}
	}
	kt := 0
	for _, p := range tpts {
		if !deleted(live, p.Tag, p.T) {
			tpts[kt] = p
			kt++
		}
	}
	// Names the record introduces get their ids even when every sample
	// of them was deleted, as the original apply gave them.
	s.mu.Lock()
	for _, n := range d.names {
		s.getOrCreateLocked(n)
	}
	s.mu.Unlock()
	n, err := db.applyPoints(pts[:k])
	if err == nil && kt > 0 {
		db.applyText(tpts[:kt])
		n += kt
	}
	return n, err
}

func deleted(ts []tombstone, tag string, t int64) bool {
	for i := range ts {
		if ts[i].Tag == tag && t >= ts[i].From && t < ts[i].To {
			return true
		}
	}
	return false
}

var errNotDelete = errors.New("not a delete record")

// decodeDeleteRecord is the inverse of appendDeleteRecord.
func decodeDeleteRecord(rec []byte) (id uint64, tag string, from, to int64, err error) {
	if len(rec) == 0 || rec[0] != recDelete {
		return 0, "", 0, 0, errNotDelete
	}
	b := rec[1:]
	id, k := binary.Uvarint(b)
	if k <= 0 {
		return 0, "", 0, 0, errShortRecord
	}
	b = b[k:]
	from, k = binary.Varint(b)
	if k <= 0 {
		return 0, "", 0, 0, errShortRecord
	}
	b = b[k:]
	to, k = binary.Varint(b)
	if k <= 0 {
		return 0, "", 0, 0, errShortRecord
	}
	b = b[k:]
	l, k := binary.Uvarint(b)
	if k <= 0 || l != uint64(len(b)-k) {
		return 0, "", 0, 0, errShortRecord
	}
	return id, string(b[k:]), from, to, nil
}
