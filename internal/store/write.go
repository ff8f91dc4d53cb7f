package store

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store/wal"
	"github.com/pith-historian/pith/internal/tagseq"
)

// Write stores pts atomically: on return without error every point is
// durable (per the durability mode) and visible to queries; on error none is.
func (db *DB) Write(ctx context.Context, pts []model.Point) error {
	if err := db.validatePoints(pts); err != nil {
		return err
	}
	if len(pts) == 0 {
		return nil
	}
	if len(pts) > min(db.opts.BulkPoints, chainMaxPoints) {
		tx := db.Begin()
		if err := tx.Add(pts); err != nil {
			tx.Rollback()
			return noSpace(err)
		}
		return tx.Commit(ctx)
	}
	return db.commitChained(pts)
}

// commitChained commits pts (at most chainMaxPoints) as one chained
// record.
func (db *DB) commitChained(pts []model.Point) error {
	if err := db.ensureChained(); err != nil {
		return err
	}
	return db.commitBy(func() (wal.Pos, int, error) { return db.appendChained(pts) }, func() error {
		_, err := db.applyPoints(pts)
		return err
	})
}

// appendChained encodes pts as a chained record (walchain.go) and appends
// it to the WAL: against the chain of the records before it when it lands
// in that chain, else again as the start of a new one. The caller holds
// orderMu. It returns the record's position and size.
func (db *DB) appendChained(pts []model.Point) (wal.Pos, int, error) {
	c := &db.chain
	start := c.starts()
	for {
		rec := c.encode(pts, start, db.series.savedID)
		pos, ch, ok, err := db.wal.AppendChained(rec, c.chain, start)
		if err != nil {
			c.drop()
			return pos, 0, err
		}
		if ok {
			c.commit(pts, start, ch)
			return pos, len(rec), nil
		}
		start = true
	}
}

// WriteReplica stores pts copied from another Pith, the peer of a
// redundant pair, as Write does (durable and visible on return), in WAL
// records marked as replicas (docs/format/store.md) so that followers tell
// them from values this Pith produced (Entry.Replica). Writes larger than
// Options.BulkPoints are split into several records, each atomic.
func (db *DB) WriteReplica(ctx context.Context, pts []model.Point) error {
	if err := db.validatePoints(pts); err != nil {
		return err
	}
	if err := db.ensurePacked(); err != nil {
		return err
	}
	names := make(map[string]int)
	var rec []byte
	for len(pts) > 0 {
		part := pts[:min(len(pts), db.opts.BulkPoints)]
		pts = pts[len(part):]
		rec = appendPackedRecord(rec[:0], recPackedReplica, txnAuto, part, nil, names, nil, db.series.savedID)
		if err := db.commit(rec, func() error {
			_, err := db.applyPoints(part)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// ErrTooOld is wrapped by a PointError for a sample older than the raw
// retention: its day keeps only rollups, which cannot take it exactly.
var ErrTooOld = errors.New("older than the raw retention")

func (db *DB) validatePoints(pts []model.Point) error {
	oldest := int64(-1 << 63)
	if db.opts.RetentionRaw > 0 {
		oldest = db.opts.Now().Add(-db.opts.RetentionRaw).UnixMilli()
	}
	for i := range pts {
		p := &pts[i]
		var err error
		switch {
		case p.Tag == "":
			err = errors.New("empty tag")
		case p.Q > model.QualityUncertain:
			err = fmt.Errorf("bad quality %d", p.Q)
		case p.T < oldest:
			err = fmt.Errorf("time %d is %w (%s)", p.T, ErrTooOld, db.opts.RetentionRaw)
		default:
			err = model.CheckValue(p.V)
		}
		if err != nil {
			return &model.PointError{Index: i, Tag: p.Tag, Err: err}
		}
	}
	if db.series.nText.Load() > 0 {
		// Kinds are looked up only once a text series exists: a store of
		// numbers pays one atomic load per write.
		for i := range pts {
			if _, text := db.series.kindOf(pts[i].Tag); text {
				return &model.PointError{Index: i, Tag: pts[i].Tag, Err: ErrKind}
			}
		}
	}
	return nil
}

// ErrKind is wrapped by the PointError of a number written to a text tag,
// or of text written to a numeric tag: a tag holds one kind of value.
var ErrKind = errors.New("the tag holds the other kind of value (numbers or text)")

// WriteText stores text points atomically, as Write does numbers: on
// return without error every point is durable and visible; on error none
// is. A tag holds numbers or text: text for a numeric tag is refused with
// ErrKind, and so is a number for a tag that holds text.
func (db *DB) WriteText(ctx context.Context, pts []model.TextPoint) error {
	return db.WriteMixed(ctx, nil, pts)
}

// WriteMixed stores numbers and text in one atomic write (one WAL record
// when small), as a line-protocol request with string fields needs. A
// PointError's Index counts the numbers first, then the text.
func (db *DB) WriteMixed(ctx context.Context, pts []model.Point, texts []model.TextPoint) error {
	if len(texts) == 0 {
		return db.Write(ctx, pts)
	}
	tx := db.Begin()
	if err := tx.Add(pts); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.AddText(texts); err != nil {
		tx.Rollback()
		var pe *model.PointError
		if errors.As(err, &pe) {
			return &model.PointError{Index: len(pts) + pe.Index, Tag: pe.Tag, Err: pe.Err}
		}
		return err
	}
	return tx.Commit(ctx)
}

// validateText checks text points and reserves their tags as text tags.
func (db *DB) validateText(pts []model.TextPoint) error {
	oldest := int64(-1 << 63)
	if db.opts.RetentionRaw > 0 {
		oldest = db.opts.Now().Add(-db.opts.RetentionRaw).UnixMilli()
	}
	for i := range pts {
		p := &pts[i]
		var err error
		switch {
		case p.Tag == "":
			err = errors.New("empty tag")
		case p.Q > model.QualityUncertain:
			err = fmt.Errorf("bad quality %d", p.Q)
		case p.T < oldest:
			err = fmt.Errorf("time %d is %w (%s)", p.T, ErrTooOld, db.opts.RetentionRaw)
		default:
			err = model.CheckText(p.Text)
		}
		if err != nil {
			return &model.PointError{Index: i, Tag: p.Tag, Err: err}
		}
	}
	if err := db.ensureText(); err != nil {
		return err
	}
	s := db.series
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range pts {
		if id, ok := s.byName[pts[i].Tag]; ok && s.has[id] && !s.isText[id] {
			return &model.PointError{Index: i, Tag: pts[i].Tag, Err: ErrKind}
		}
	}
	// The tags are text from now on, so that a number racing this write
	// is refused.
	for i := range pts {
		s.markTextLocked(s.getOrCreateLocked([]byte(pts[i].Tag)))
	}
	return nil
}

// appendOrdered appends rec to the WAL and takes its place in the commit
// order: it returns once rec is durable (or failed) and every earlier
// commit has been applied. The caller applies rec, then calls done, which
// lets later commits go on; done must be called on error too.
func (db *DB) appendOrdered(rec []byte) (pos wal.Pos, done func(), err error) {
	return db.appendOrderedBy(db.appendRecord(rec))
}

// appendRecord is the add of appendOrderedBy and commitBy that appends rec
// as it is.
func (db *DB) appendRecord(rec []byte) func() (wal.Pos, int, error) {
	return func() (wal.Pos, int, error) {
		pos, err := db.wal.Append(rec)
		return pos, len(rec), err
	}
}

// appendOrderedBy is appendOrdered with the append done by add, under
// orderMu; add returns the record's position and size.
func (db *DB) appendOrderedBy(add func() (wal.Pos, int, error)) (pos wal.Pos, done func(), err error) {
	key := db.nextTxn.Add(1)
	db.orderMu.Lock()
	pos, size, err := add()
	if err == nil {
		// Until applied, the record must survive WAL truncation.
		db.inflight[key] = pos
	}
	prev := db.lastTicket
	mine := make(chan struct{})
	db.lastTicket = mine
	db.orderMu.Unlock()
	done = func() {
		db.orderMu.Lock()
		delete(db.inflight, key)
		db.orderMu.Unlock()
		close(mine)
	}
	if err == nil {
		db.stats.WALBytes.Add(int64(size))
		// Sync is not cancelled by the caller: a record that reached the WAL
		// must also reach the head, or a restart would disagree with now.
		err = db.wal.Sync(context.Background(), pos)
	}
	<-prev
	return pos, done, db.noteDisk(&db.nospace.wal, "writes", err)
}

// commit appends rec (which commits itself), waits until it is durable and
// applies it with apply, in WAL order relative to other commits.
func (db *DB) commit(rec []byte, apply func() error) error {
	return db.commitBy(db.appendRecord(rec), apply)
}

// commitBy is commit with the append done by add (see appendOrderedBy).
func (db *DB) commitBy(add func() (wal.Pos, int, error), apply func() error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if e := db.failed.Load(); e != nil {
		return *e
	}
	if err := db.headRoom(); err != nil {
		return err
	}
	_, done, err := db.appendOrderedBy(add)
	defer done()
	if err != nil {
		return fmt.Errorf("commit write: %w", err)
	}
	if err := apply(); err != nil {
		return err
	}
	return db.backpressure()
}

// Tx is a streaming atomic write: points staged with Add become durable and
// visible together at Commit, or not at all.
//
// A small transaction is one WAL record. A larger one is a bulk load: its
// points collect in a private head that is written, whenever it fills, to
// private run files no query sees; Commit publishes those runs with one
// manifest write, which is the commit point. Bulk data is written to disk
// once (no WAL copy), memory stays bounded, and a crash before the
// manifest write leaves only orphan files that Open removes.
type Tx struct {
	db      *DB
	pending []model.Point
	ptext   []model.TextPoint // pending text points
	names   map[string]int
	order   []string
	private *head
	runs    map[int64][]*runFile // private runs by day, oldest first
	writing chan error           // the private head being written, if any
	written *head                // that head, recycled once written
	pool    seriesPool           // series of written heads, for the next ones
	n       int
	err     error
	done    bool

	// With followers, a bulk transaction also copies its points to the
	// WAL as data records of transaction txn (0: no copy), which followers
	// deliver once the commit record after the MANIFEST write is read.
	txn     uint64
	walLast wal.Pos // the last data record appended
	walRecs int     // data records appended
	walBuf  []byte

	guess  tagseq.Guess // saves stage most lookups of names
	staged idSet        // the series of the private runs
	seen   bulkSeen     // their first and newest samples
}

// Begin starts a transaction. It must end with Commit or Rollback.
func (db *DB) Begin() *Tx {
	return &Tx{db: db, names: make(map[string]int)}
}

// Add stages points; an invalid point fails the whole transaction. Add
// does not keep pts.
func (tx *Tx) Add(pts []model.Point) error {
	if err := tx.open(); err != nil {
		return err
	}
	if err := tx.db.validatePoints(pts); err != nil {
		tx.err = err
		return err
	}
	if tx.private == nil && len(tx.pending)+len(tx.ptext)+len(pts) <= tx.db.opts.BulkPoints {
		tx.pending = append(tx.pending, pts...)
		return nil
	}
	if err := tx.goBulk(); err != nil {
		return err
	}
	if err := tx.stage(pts); err != nil {
		return tx.db.noteDisk(&tx.db.nospace.flush, "bulk writes", err)
	}
	return nil
}

// open reports why nothing more may be added: an earlier failure, a
// finished transaction or a closed store.
func (tx *Tx) open() error {
	if tx.err != nil {
		return tx.err
	}
	if tx.done {
		return errors.New("add to finished transaction")
	}
	if tx.db.closed.Load() {
		return ErrClosed
	}
	return nil
}

// goBulk turns the transaction into a bulk load, staging what is pending.
func (tx *Tx) goBulk() error {
	if tx.private != nil {
		return nil
	}
	tx.private = newRawHead(&tx.pool)
	tx.runs = make(map[int64][]*runFile)
	if tx.db.following() {
		tx.txn = tx.db.nextTxn.Add(1)
	}
	if err := tx.stage(tx.pending); err != nil {
		return err
	}
	tx.pending = nil
	if err := tx.stageText(tx.ptext); err != nil {
		return err
	}
	tx.ptext = nil
	return nil
}

// AddText stages text points, as Add does numbers; an invalid point, or
// one of a tag that holds numbers, fails the whole transaction.
func (tx *Tx) AddText(pts []model.TextPoint) error {
	if err := tx.open(); err != nil {
		return err
	}
	if err := tx.db.validateText(pts); err != nil {
		tx.err = err
		return err
	}
	if tx.private == nil && len(tx.pending)+len(tx.ptext)+len(pts) <= tx.db.opts.BulkPoints {
		tx.ptext = append(tx.ptext, pts...)
		return nil
	}
	if err := tx.goBulk(); err != nil {
		return err
	}
	if err := tx.stageText(pts); err != nil {
		return tx.db.noteDisk(&tx.db.nospace.flush, "bulk writes", err)
	}
	return nil
}

// stageText adds text points to the private head, as stage does numbers.
func (tx *Tx) stageText(pts []model.TextPoint) error {
	if len(pts) == 0 {
		return nil
	}
	db, h, s := tx.db, tx.private, tx.db.series
	if tx.txn != 0 {
		if err := db.ensurePacked(); err != nil {
			tx.err = err
			return err
		}
		for rest := pts; len(rest) > 0; {
			n := min(len(rest), bulkRecordPoints)
			tx.walBuf = appendPackedRecord(tx.walBuf[:0], recPacked, tx.txn, nil, rest[:n], tx.names, tx.order, db.series.savedID)
			pos, err := db.wal.Append(tx.walBuf)
			if err != nil {
				tx.err = fmt.Errorf("copy transaction to wal: %w", err)
				return tx.err
			}
			db.stats.WALBytes.Add(int64(len(tx.walBuf)))
			tx.walLast = pos
			tx.walRecs++
			rest = rest[n:]
		}
	}
	s.mu.Lock()
	for i := range pts {
		p := &pts[i]
		id := s.getOrCreateLocked([]byte(p.Tag))
		h.appendTextLocked(id, p.T, p.Text, p.Q, db.opts.Now)
	}
	s.mu.Unlock()
	tx.n += len(pts)
	if tx.full() {
		return tx.spill(pts[len(pts)-1].T)
	}
	return nil
}

// stage adds points to the private head, writing it out when full.
func (tx *Tx) stage(pts []model.Point) error {
	db, h, s := tx.db, tx.private, tx.db.series
	if tx.txn != 0 {
		if err := tx.copyToWAL(pts); err != nil {
			tx.err = err
			return err
		}
	}
	s.mu.Lock()
	for i := range pts {
		p := &pts[i]
		id, ok := tx.guess.Next(s.names, p.Tag)
		if !ok {
			if id, ok = s.byName[p.Tag]; !ok {
				id = s.getOrCreateLocked([]byte(p.Tag))
			}
			tx.guess.Learn(id)
		}
		h.appendLocked(id, p.T, p.V, p.Q, db.opts.Now)
	}
	s.mu.Unlock()
	tx.n += len(pts)
	if tx.full() {
		return tx.spill(pts[len(pts)-1].T)
	}
	return nil
}

// spillPerSeries is how many samples a series has, on average, before a
// private head of many series is written out: below the 64 its raw tail
// first makes room for (headSeries.grow), so waiting costs no memory,
// while every spill of a few samples a series would cost a run whose
// index and chunks the commit merges again. spillMaxHeads bounds the wait
// in heads of HeadMaxSamples.
const (
	spillPerSeries = 48
	spillMaxHeads  = 8
)

// full reports whether the private head is to be written out: at
// HeadMaxSamples samples, or, holding many series, once they average
// spillPerSeries samples.
func (tx *Tx) full() bool {
	h, most := tx.private, tx.db.opts.HeadMaxSamples
	return h.samples >= max(most, min(h.count*spillPerSeries, spillMaxHeads*most))
}

// copyToWAL appends pts to the WAL as data records of the transaction,
// for the followers. They are synced before the commit point.
func (tx *Tx) copyToWAL(pts []model.Point) error {
	db := tx.db
	if err := db.ensurePacked(); err != nil {
		return err
	}
	for len(pts) > 0 {
		n := min(len(pts), bulkRecordPoints)
		tx.walBuf = appendPackedRecord(tx.walBuf[:0], recPacked, tx.txn, pts[:n], nil, tx.names, tx.order, db.series.savedID)
		pos, err := db.wal.Append(tx.walBuf)
		if err != nil {
			return fmt.Errorf("copy transaction to wal: %w", err)
		}
		db.stats.WALBytes.Add(int64(len(tx.walBuf)))
		tx.walLast = pos
		tx.walRecs++
		pts = pts[n:]
	}
	return nil
}

// spill hands the full private head to a goroutine that writes it to
// private runs while the caller goes on staging into a new one, so parsing
// and encoding use both cores. At most one head is being written. The
// samples at t, the time of the point staged last, go to the new head
// (carry): points in time order fill a head up to the middle of one
// timestamp's tags, and its run would then meet the next in time.
func (tx *Tx) spill(t int64) error {
	if err := tx.wait(); err != nil {
		return err
	}
	if tx.written != nil {
		tx.pool.recycle(tx.written)
		tx.written = nil
	}
	h := tx.private
	if h.samples == 0 {
		return nil
	}
	next := newRawHead(&tx.pool)
	next.carry(h, t)
	for id, s := range h.series {
		if s != nil {
			tx.staged.add(uint32(id))
		}
	}
	tx.private = next
	done := make(chan error, 1)
	tx.writing, tx.written = done, h
	go func() {
		h.freeze()
		h.sortFrozen()
		runs, err := tx.db.writeHeadRuns(h.series, false)
		if err == nil {
			// Runs of one head are appended before the next head's are,
			// so a day's private runs stay oldest first. What the commit
			// needs of their indexes is taken now (seen), and the large
			// ones are dropped: held until then, the runs of an import
			// of 100,000 tags kept 190 MB of entries full of pointers
			// for the collector to scan at every cycle.
			for p, rs := range runs {
				for _, r := range rs {
					tx.seen.add(r)
					r.dropLarge()
				}
				tx.runs[p] = append(tx.runs[p], rs...)
			}
		}
		done <- err
	}()
	return nil
}

// wait waits for the private head being written, if any.
func (tx *Tx) wait() error {
	if tx.writing == nil {
		return tx.err
	}
	err := <-tx.writing
	tx.writing = nil
	if err != nil && tx.err == nil {
		tx.err = err
	}
	return tx.err
}

// Rollback drops the transaction and its private runs.
func (tx *Tx) Rollback() {
	if tx.done {
		return
	}
	tx.done = true
	tx.wait()
	tx.written, tx.pool = nil, seriesPool{}
	tx.db.discard(tx.runs)
	tx.runs = nil
	if tx.walRecs > 0 {
		// Followers drop the transaction's records here; if this record
		// is lost, the open record of the next Open does it.
		tx.db.wal.Append(appendTxnRecord(nil, recAbort, tx.txn))
	}
}

// Commit makes the transaction durable and visible.
func (tx *Tx) Commit(ctx context.Context) error {
	if tx.err != nil {
		tx.Rollback()
		return noSpace(tx.err)
	}
	if tx.done {
		return errors.New("commit of finished transaction")
	}
	db := tx.db
	if tx.private == nil {
		tx.done = true
		if len(tx.pending) == 0 && len(tx.ptext) == 0 {
			return nil
		}
		pts, tpts := tx.pending, tx.ptext
		if len(tpts) == 0 && len(pts) <= chainMaxPoints {
			return db.commitChained(pts)
		}
		if err := db.ensurePacked(); err != nil {
			return err
		}
		rec := appendPackedRecord(nil, recPacked, txnAuto, pts, tpts, tx.names, tx.order, db.series.savedID)
		return db.commit(rec, func() error {
			_, err := db.applyPoints(pts)
			if err == nil && len(tpts) > 0 {
				db.applyText(tpts)
			}
			return err
		})
	}
	if err := tx.spill(math.MaxInt64); err != nil { // the last head: nothing to carry
		tx.Rollback()
		return db.noteDisk(&db.nospace.flush, "bulk writes", err)
	}
	if err := tx.wait(); err != nil {
		tx.Rollback()
		return db.noteDisk(&db.nospace.flush, "bulk writes", err)
	}
	tx.written, tx.pool = nil, seriesPool{}
	if tx.walRecs > 0 {
		// The copy is durable before the commit point: a commit record
		// recovered at Open must find every data record.
		if err := db.wal.Sync(context.Background(), tx.walLast); err != nil {
			tx.Rollback()
			return fmt.Errorf("commit write: %w", db.noteDisk(&db.nospace.wal, "writes", err))
		}
	}
	if err := db.noteDisk(&db.nospace.flush, "bulk writes", db.commitBulk(tx.runs, tx.staged, &tx.seen, tx.txn)); err != nil {
		tx.Rollback()
		return fmt.Errorf("commit write: %w", err)
	}
	tx.done = true
	db.stats.PointsWritten.Add(int64(tx.n))
	return nil
}

// applyPoints adds points to the active head.
func (db *DB) applyPoints(pts []model.Point) (int, error) {
	s := db.series
	db.mu.RLock()
	h := db.active
	s.mu.Lock()
	h.mu.Lock()
	for i := range pts {
		p := &pts[i]
		id, ok := s.byName[p.Tag]
		if !ok {
			id = s.getOrCreateLocked([]byte(p.Tag))
		}
		h.appendLocked(id, p.T, p.V, p.Q, db.opts.Now)
		s.observeLocked(id, p.T, p.V, p.Q)
	}
	h.mu.Unlock()
	s.mu.Unlock()
	db.mu.RUnlock()
	db.stats.PointsWritten.Add(int64(len(pts)))
	return len(pts), nil
}

// applyText adds text points to the active head.
func (db *DB) applyText(pts []model.TextPoint) {
	s := db.series
	db.mu.RLock()
	h := db.active
	s.mu.Lock()
	h.mu.Lock()
	for i := range pts {
		p := &pts[i]
		id := s.getOrCreateLocked([]byte(p.Tag))
		h.appendTextLocked(id, p.T, p.Text, p.Q, db.opts.Now)
		s.observeTextLocked(id, p.T, p.Text, p.Q)
	}
	h.mu.Unlock()
	s.mu.Unlock()
	db.mu.RUnlock()
	db.stats.PointsWritten.Add(int64(len(pts)))
}

// applyRecord adds a decoded data record to the active head: all of its
// points or, when any of them does not decode, none.
func (db *DB) applyRecord(d *dataRecord) (int, error) {
	type point struct {
		key int
		t   int64
		v   float64
		q   model.Quality
	}
	pts := make([]point, d.n)
	var texts []string // by point, only when the record holds text
	var isText []bool
	for i := range pts {
		key, t, v, q, err := d.next()
		if err != nil {
			return 0, err
		}
		pts[i] = point{key, t, v, q}
		if d.isText {
			if texts == nil {
				texts, isText = make([]string, len(pts)), make([]bool, len(pts))
			}
			texts[i], isText[i] = string(d.text), true
		}
	}
	s := db.series
	db.mu.RLock()
	defer db.mu.RUnlock()
	h := db.active
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pts {
		if sid := p.key - len(d.names); sid >= len(s.names) {
			return 0, fmt.Errorf("data record names unknown series %d", sid)
		}
	}
	ids := make([]uint32, len(d.names))
	for i, n := range d.names {
		ids[i] = s.getOrCreateLocked(n)
	}
	h.mu.Lock()
	for i, p := range pts {
		id := uint32(p.key - len(d.names))
		if p.key < len(ids) {
			id = ids[p.key]
		}
		if isText != nil && isText[i] {
			h.appendTextLocked(id, p.t, texts[i], p.q, db.opts.Now)
			s.observeTextLocked(id, p.t, texts[i], p.q)
			continue
		}
		h.appendLocked(id, p.t, p.v, p.q, db.opts.Now)
		s.observeLocked(id, p.t, p.v, p.q)
	}
	h.mu.Unlock()
	db.stats.PointsWritten.Add(int64(len(pts)))
	return len(pts), nil
}

// WriteTextReplica stores text points copied from the other box of a
// redundant pair, as WriteText does, in replica records (see
// WriteReplica): followers mark them Replica and forwarders leave them out.
func (db *DB) WriteTextReplica(ctx context.Context, pts []model.TextPoint) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := db.validateText(pts); err != nil {
		return err
	}
	if err := db.ensurePacked(); err != nil {
		return err
	}
	names := make(map[string]int)
	var rec []byte
	for len(pts) > 0 {
		part := pts[:min(len(pts), db.opts.BulkPoints)]
		pts = pts[len(part):]
		rec = appendPackedRecord(rec[:0], recPackedReplica, txnAuto, nil, part, names, nil, db.series.savedID)
		if err := db.commit(rec, func() error {
			db.applyText(part)
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
