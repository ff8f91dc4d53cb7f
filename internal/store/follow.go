package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/wal"
)

// Followers read what the store committed from its own WAL, each keeping a
// durable cursor, so that a forwarder never misses a committed value (no
// side channel between the commit and a queue) and never sends one that a
// crash could still take back. The contract is in docs/format/store.md,
// "Followers".
//
// A follower delivers, in WAL order: the points of every small write (a
// data record that commits itself), the points of a bulk transaction or a
// delete once its commit record is read (their data and delete records
// come earlier, possibly interleaved with other writes), and nothing of a
// transaction that rolled back or died in a crash. It reads only durable
// records.
//
// Lock order: followers.retain, then follower.mu. retain is held for
// reading while records are read, and for writing while segments are
// released, so a reader never finds a segment gone under it.

// DefaultFollowMaxBytes is the default of Options.FollowMaxBytes.
const DefaultFollowMaxBytes = 1 << 30

// defaultBatchPoints bounds a batch when Next is given no limit.
const defaultBatchPoints = 1 << 14

// bulkRecordPoints is how many points of a bulk transaction one WAL data
// record copies for the followers.
const bulkRecordPoints = 1 << 14

// followersDir is the directory of the cursor files, under the data directory.
const followersDir = "followers"

// validFollowerName is what a follower's name may be: it is a file name.
var validFollowerName = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`)

// ErrFollowerOpen is returned by Follow and Unfollow for a follower that
// is already open in this process.
var ErrFollowerOpen = errors.New("follower is open")

// ErrUnknownFollower is returned by Unfollow for a name with no cursor.
var ErrUnknownFollower = errors.New("unknown follower")

// Position is a place in the store's WAL: a record's segment and offset.
// Part is used only inside a transaction's commit record: that many of the
// transaction's data records were delivered already (a large transaction
// is delivered over several batches).
type Position struct {
	Segment uint32
	Offset  int64
	Part    uint32
}

// Less reports whether p comes before q.
func (p Position) Less(q Position) bool {
	if p.Segment != q.Segment {
		return p.Segment < q.Segment
	}
	if p.Offset != q.Offset {
		return p.Offset < q.Offset
	}
	return p.Part < q.Part
}

// String formats p as "segment:offset" or "segment:offset+part".
func (p Position) String() string {
	if p.Part > 0 {
		return fmt.Sprintf("%d:%d+%d", p.Segment, p.Offset, p.Part)
	}
	return fmt.Sprintf("%d:%d", p.Segment, p.Offset)
}

func (p Position) walPos() wal.Pos { return wal.Pos{Segment: p.Segment, Offset: p.Offset} }

func position(p wal.Pos) Position { return Position{Segment: p.Segment, Offset: p.Offset} }

// EntryKind says what an Entry carries.
type EntryKind uint8

const (
	// EntryPoints is committed points.
	EntryPoints EntryKind = iota + 1
	// EntryDelete is a committed Delete(Tag, From, To).
	EntryDelete
	// EntryLabels is committed tag labels (SetLabels): Series holds each
	// tag with its new labels.
	EntryLabels
)

// Entry is one WAL record's committed effect.
type Entry struct {
	// ID is the position of the WAL record that holds the points (or the
	// delete): stable across restarts and redeliveries, so an upstream can
	// drop an entry it already has. Points are identified by ID and their
	// index in Points.
	ID     Position
	Kind   EntryKind
	Points []model.Point // EntryPoints, in write order
	// Texts are the text points of the record (EntryPoints), in write
	// order; they are identified by ID and len(Points) + their index.
	Texts  []model.TextPoint
	Tag    string // EntryDelete: the samples of Tag in [From, To)
	From   int64
	To     int64
	Series []model.Series // EntryLabels
	// Replica marks points written by WriteReplica: copies of another
	// Pith's values, which that Pith forwards itself.
	Replica bool
}

// Batch is what Next returns: entries in commit order and the position
// after them, to be given to Ack once the upstream has them.
type Batch struct {
	Entries []Entry
	Points  int      // points in Entries
	End     Position // where the follower resumes after this batch
}

// FollowStart says where a new follower starts.
type FollowStart uint8

const (
	// FollowFromEnd starts after every record written so far: the
	// follower delivers what is committed from now on.
	FollowFromEnd FollowStart = iota
	// FollowFromOldest starts at the oldest retained WAL record. Records
	// older than the last checkpoint are retained only for followers, so
	// this delivers what is still in the WAL, not the store's history.
	FollowFromOldest
)

// FollowOptions configure Follow.
type FollowOptions struct {
	Start FollowStart // where a new follower starts; an existing one resumes at its cursor
}

// Dropped counts what retention released before a follower read it.
type Dropped struct {
	Events  int64 // times segments were released under the follower
	Records int64 // committed entries lost (data records, deletes)
	Points  int64 // points in them
}

// FollowerStats describe a follower.
type FollowerStats struct {
	Name       string
	Open       bool     // a Follower is open on it in this process
	Cursor     Position // the acknowledged position: a restart resumes here
	LagRecords int64    // durable WAL records at or after Cursor
	LagBytes   int64    // durable WAL bytes at or after Cursor
	Dropped    Dropped
}

// followers is the store's registry of followers.
type followers struct {
	retain sync.RWMutex // see the lock order above
	mu     sync.Mutex   // guards byName
	byName map[string]*follower
	count  atomic.Int32 // len(byName), read without mu by writers

	// checkpoint mirrors db.lastCheckpoint for releases outside flushMu.
	checkpoint atomic.Uint32

	// pending are the ids of bulk transactions and deletes whose commit
	// point (a MANIFEST write) may be passed while their WAL commit
	// record is not durable yet. The MANIFEST lists them ("txns") so that
	// Open appends the missing record. Guarded by db.flushMu.
	pending []uint64
	// seen are the ids of commit (true) and abort records met by Open's
	// replay, and maxID the largest id it met; both serve openFollowers.
	seen  map[uint64]bool
	maxID uint64
}

// follower is the state of one named follower.
type follower struct {
	name string
	path string
	log  *slog.Logger

	mu      sync.Mutex
	acked   cursorState // what the cursor file holds
	open    bool        // a Follower is attached
	cur     Position    // the next record to read
	txns    map[uint64]*openTxn
	unacked []ackPoint  // batches handed out since the last Ack
	rd      *wal.Reader // while open: reads on where the last batch stopped
	chain   walChain    // the chained records' values up to cur
}

// openTxn is a bulk transaction or delete read but not committed yet.
type openTxn struct {
	first wal.Pos   // its first record
	recs  []txnData // its data records
	del   *Entry    // a delete's entry
}

// txnData is a data record of a transaction: where it is and its points.
type txnData struct {
	pos    wal.Pos
	points int
}

// ackPoint is the End of a batch and the hold that goes with it.
type ackPoint struct {
	end  Position
	hold wal.Pos
}

// hold returns the oldest position the follower needs from cur on: cur,
// or the first record of a transaction it read but not yet delivered.
func (f *follower) hold() wal.Pos {
	h := f.cur.walPos()
	for _, t := range f.txns {
		if t.first.Less(h) {
			h = t.first
		}
	}
	return h
}

// Follower reads a named follower's records. Next and Ack may be called
// from different goroutines, but Next from one at a time.
type Follower struct {
	db     *DB
	st     *follower
	closed atomic.Bool
}

func (db *DB) followersPath() string { return filepath.Join(db.dir, followersDir) }

// Follow opens the follower name, creating it (with a durable cursor) when
// it does not exist. An existing follower resumes after its last Ack; a
// new one starts where opts says. A follower holds the WAL segments it has
// not acknowledged (within Options.FollowMaxBytes) from the moment it is
// created until Unfollow, open or not. A bulk transaction is copied to the
// WAL only when a follower exists as it begins.
func (db *DB) Follow(name string, opts FollowOptions) (*Follower, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	if !validFollowerName.MatchString(name) {
		return nil, fmt.Errorf("follow %q: name must be 1 to 64 letters, digits, '.', '_' or '-'", name)
	}
	fl := db.follow
	fl.retain.RLock()
	defer fl.retain.RUnlock()
	fl.mu.Lock()
	defer fl.mu.Unlock()
	st := fl.byName[name]
	if st == nil {
		var start wal.Pos
		switch opts.Start {
		case FollowFromEnd:
			// Durable, not End: an out-of-space failure can hand the
			// positions after the durable end out again.
			start = db.wal.Durable()
		case FollowFromOldest:
			segs, err := db.wal.Segments()
			if err != nil {
				return nil, fmt.Errorf("follow %q: %w", name, err)
			}
			start = db.wal.Durable()
			if len(segs) > 0 {
				start = wal.Pos{Segment: segs[0].Segment, Offset: wal.FirstOffset}
			}
		default:
			return nil, fmt.Errorf("follow %q: unknown start %d", name, opts.Start)
		}
		st = db.newFollower(name, cursorState{Cursor: position(start), Hold: start})
		if err := db.fs.MkdirAll(db.followersPath(), 0o755); err != nil {
			return nil, fmt.Errorf("follow %q: create followers dir: %w", name, err)
		}
		if err := db.fs.SyncDir(db.dir); err != nil {
			return nil, fmt.Errorf("follow %q: sync data directory: %w", name, err)
		}
		if err := writeFileAtomic(db.fs, st.path, encodeCursor(st.acked)); err != nil {
			return nil, fmt.Errorf("follow %q: write cursor: %w", name, err)
		}
		fl.byName[name] = st
		fl.count.Store(int32(len(fl.byName)))
		db.log.Info("follower created", "follower", name, "cursor", st.acked.Cursor)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.open {
		return nil, fmt.Errorf("follow %q: %w", name, ErrFollowerOpen)
	}
	if err := db.resetFollower(st); err != nil {
		return nil, fmt.Errorf("follow %q: %w", name, err)
	}
	st.open = true
	st.rd = db.wal.NewReader()
	return &Follower{db: db, st: st}, nil
}

func (db *DB) newFollower(name string, c cursorState) *follower {
	return &follower{
		name:  name,
		path:  filepath.Join(db.followersPath(), name),
		log:   db.log.With("follower", name),
		acked: c,
		cur:   c.Cursor,
		txns:  make(map[uint64]*openTxn),
	}
}

// resetFollower puts st's reading state back at its acknowledged cursor:
// it reads the records between the hold and the cursor again, without
// delivering them, to learn which transactions were open there. The
// caller holds retain (either way) and st.mu.
func (db *DB) resetFollower(st *follower) error {
	st.txns = make(map[uint64]*openTxn)
	st.unacked = nil
	st.cur = position(st.acked.Hold)
	if err := db.scanFollower(st, st.acked.Cursor.walPos(), -1, nil); err != nil {
		return err
	}
	st.cur = st.acked.Cursor
	return nil
}

// errBatchFull stops a scan once a batch holds enough points.
var errBatchFull = errors.New("batch full")

// scanFollower runs st's reader over the records from st.cur up to (not
// including) to, advancing st.cur: transactions are opened, committed
// (their entries emitted) and aborted, small writes emitted. With max >= 0
// it stops before a record once the emitted entries hold max points, or
// inside a transaction's delivery (st.cur.Part). emit may be nil. The
// caller holds retain and st.mu.
func (db *DB) scanFollower(st *follower, to wal.Pos, max int, emit func(Entry)) error {
	points := 0
	full := func() bool { return max >= 0 && points >= max }
	send := func(e Entry) {
		points += len(e.Points) + len(e.Texts)
		if emit != nil {
			emit(e)
		}
	}
	if !st.cur.walPos().Less(to) {
		return nil
	}
	if err := db.primeChain(&st.chain, st.cur.walPos()); err != nil {
		return err
	}
	d := dataRecord{chain: &st.chain}
	read := db.wal.Read
	if st.rd != nil {
		read = st.rd.Read
	}
	err := read(st.cur.walPos(), to, func(pos, end wal.Pos, rec []byte) error {
		if full() {
			return errBatchFull
		}
		st.chain.enter(pos, end)
		if len(rec) == 0 {
			st.cur = position(end)
			return nil
		}
		switch rec[0] {
		case recData, recReplica, recPacked, recPackedReplica, recChained:
			if err := decodeDataRecord(rec, &d); err != nil {
				st.log.Error("follower skips undecodable wal record", "segment", pos.Segment, "offset", pos.Offset, "err", err)
				break
			}
			if d.txn != txnAuto {
				t := st.txns[d.txn]
				if t == nil {
					t = &openTxn{first: pos}
					st.txns[d.txn] = t
				}
				t.recs = append(t.recs, txnData{pos, d.n})
				break
			}
			pts, texts, err := db.followerPoints(&d)
			if err != nil {
				st.log.Error("follower skips damaged wal record", "segment", pos.Segment, "offset", pos.Offset, "err", err)
				break
			}
			send(Entry{ID: position(pos), Kind: EntryPoints, Points: pts, Texts: texts, Replica: isReplicaRecord(rec[0])})
		case recLabels, recLabelsReplica:
			series, err := decodeLabelsRecord(rec)
			if err != nil {
				st.log.Error("follower skips undecodable wal record", "segment", pos.Segment, "offset", pos.Offset, "err", err)
				break
			}
			send(Entry{ID: position(pos), Kind: EntryLabels, Series: series, Replica: rec[0] == recLabelsReplica})
		case recDelete:
			id, tag, from, to, err := decodeDeleteRecord(rec)
			if err != nil {
				st.log.Error("follower skips undecodable wal record", "segment", pos.Segment, "offset", pos.Offset, "err", err)
				break
			}
			st.txns[id] = &openTxn{first: pos, del: &Entry{ID: position(pos), Kind: EntryDelete, Tag: tag, From: from, To: to}}
		case recCommit:
			id, err := decodeTxnRecord(rec)
			t := st.txns[id]
			if err != nil || t == nil {
				break // a transaction begun before the follower, or a repeated commit
			}
			part := 0
			if st.cur.walPos().Equal(pos) {
				part = int(st.cur.Part)
			}
			if t.del != nil {
				send(*t.del)
			}
			for i := part; i < len(t.recs); i++ {
				if i > part && full() {
					st.cur = Position{Segment: pos.Segment, Offset: pos.Offset, Part: uint32(i)}
					st.chain.next = pos // the commit record is read again from its start
					return errBatchFull
				}
				e, err := db.followerTxnRecord(t.recs[i].pos)
				if err != nil {
					st.log.Error("follower skips damaged wal record", "segment", t.recs[i].pos.Segment, "offset", t.recs[i].pos.Offset, "err", err)
					continue
				}
				send(e)
			}
			delete(st.txns, id)
		case recAbort:
			if id, err := decodeTxnRecord(rec); err == nil {
				delete(st.txns, id)
			}
		case recOpen:
			// Whatever was begun before a restart and not committed by
			// the recovery that wrote this record never will be.
			clear(st.txns)
		}
		st.cur = position(end)
		return nil
	})
	if errors.Is(err, errBatchFull) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read wal: %w", err)
	}
	if st.cur.walPos().Less(to) {
		st.cur = position(to) // nothing more before to
	}
	return nil
}

// primeChain makes c hold the chained records' values up to pos: unless
// it entered every record before pos already, it reads the records of
// pos's segment before pos again. The caller holds retain.
func (db *DB) primeChain(c *walChain, pos wal.Pos) error {
	if c.at(pos) {
		return nil
	}
	c.next = wal.Pos{}
	clear(c.vals)
	d := dataRecord{chain: c}
	err := db.wal.Read(wal.Pos{Segment: pos.Segment}, pos, func(at, end wal.Pos, rec []byte) error {
		c.enter(at, end)
		if len(rec) > 0 && rec[0] == recChained {
			decodeDataRecord(rec, &d) // what fails is forgotten
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read wal: %w", err)
	}
	if !c.next.Equal(pos) {
		clear(c.vals) // pos is past a gap
	}
	c.next = pos
	return nil
}

// followerPoints decodes the numeric and text points of a data record
// with their tag names.
func (db *DB) followerPoints(d *dataRecord) ([]model.Point, []model.TextPoint, error) {
	pts := make([]model.Point, 0, d.n)
	keys := make([]int, 0, d.n)
	var texts []model.TextPoint
	var tkeys []int
	for i := 0; i < d.n; i++ {
		key, t, v, q, err := d.next()
		if err != nil {
			return nil, nil, err
		}
		if d.isText {
			tkeys = append(tkeys, key)
			texts = append(texts, model.TextPoint{T: t, Text: string(d.text), Q: q})
			continue
		}
		keys = append(keys, key)
		pts = append(pts, model.Point{T: t, V: v, Q: q})
	}
	names := make([]string, len(d.names))
	for i, n := range d.names {
		names[i] = string(n)
	}
	s := db.series
	s.mu.RLock()
	defer s.mu.RUnlock()
	name := func(key int) (string, error) {
		if key < len(names) {
			return names[key], nil
		}
		sid := key - len(names)
		if sid >= len(s.names) {
			return "", fmt.Errorf("data record names unknown series %d", sid)
		}
		return s.names[sid], nil
	}
	var err error
	for i, key := range keys {
		if pts[i].Tag, err = name(key); err != nil {
			return nil, nil, err
		}
	}
	for i, key := range tkeys {
		if texts[i].Tag, err = name(key); err != nil {
			return nil, nil, err
		}
	}
	return pts, texts, nil
}

// followerTxnRecord reads and decodes a transaction's data record.
func (db *DB) followerTxnRecord(pos wal.Pos) (Entry, error) {
	rec, err := db.wal.ReadRecord(pos)
	if err != nil {
		return Entry{}, err
	}
	var d dataRecord
	if err := decodeDataRecord(rec, &d); err != nil {
		return Entry{}, err
	}
	pts, texts, err := db.followerPoints(&d)
	if err != nil {
		return Entry{}, err
	}
	return Entry{ID: position(pos), Kind: EntryPoints, Points: pts, Texts: texts}, nil
}

// Next blocks until committed, durable records exist past the follower's
// position and returns them: whole records, at least one entry, about max
// points (a record is never split; a large transaction is split between
// its data records). max <= 0 means a default. It returns ctx's error when
// ctx ends and ErrClosed when the follower or the store is closed. Next
// moves the follower's position in memory only: a restart resumes after
// the last Ack, so unacknowledged batches are delivered again.
func (f *Follower) Next(ctx context.Context, max int) (Batch, error) {
	if max <= 0 {
		max = defaultBatchPoints
	}
	db, st := f.db, f.st
	for {
		if f.closed.Load() || db.closed.Load() {
			return Batch{}, ErrClosed
		}
		b, cur, err := db.readBatch(st, max)
		if err != nil || len(b.Entries) > 0 {
			return b, err
		}
		if _, err := db.wal.WaitDurable(ctx, cur.walPos()); err != nil {
			if errors.Is(err, wal.ErrClosed) {
				return Batch{}, ErrClosed
			}
			return Batch{}, err
		}
	}
}

// readBatch reads a batch of st's durable records and returns it with the
// follower's position after it.
func (db *DB) readBatch(st *follower, max int) (Batch, Position, error) {
	fl := db.follow
	fl.retain.RLock()
	defer fl.retain.RUnlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	var b Batch
	err := db.scanFollower(st, db.wal.Durable(), max, func(e Entry) {
		b.Entries = append(b.Entries, e)
		b.Points += len(e.Points) + len(e.Texts)
	})
	if err != nil {
		return Batch{}, st.cur, err
	}
	if len(b.Entries) > 0 {
		b.End = st.cur
		st.unacked = append(st.unacked, ackPoint{end: st.cur, hold: st.hold()})
	}
	return b, st.cur, nil
}

// Ack makes pos, the End of a batch Next returned, the follower's durable
// cursor: a restart resumes there. Call it once the upstream has the
// batch (and every one before it). Acknowledging a position already
// passed is a no-op. WAL segments no follower needs any more are released.
// The token stored with the cursor is kept (see AckToken).
func (f *Follower) Ack(pos Position) error {
	return f.ack(pos, false, 0)
}

// AckToken is Ack that also stores token with the cursor, in the same
// atomic write: the follower's note of where its upstream stood once it
// had every batch up to pos (a JetStream forwarder keeps the stream
// sequence of its last confirmed publish). Token returns it after a
// restart.
func (f *Follower) AckToken(pos Position, token uint64) error {
	return f.ack(pos, true, token)
}

// Token returns the token stored with the acknowledged cursor by the
// last AckToken, in this process or before a restart; 0 when none.
func (f *Follower) Token() uint64 {
	f.st.mu.Lock()
	defer f.st.mu.Unlock()
	return f.st.acked.Token
}

func (f *Follower) ack(pos Position, withToken bool, token uint64) error {
	if f.closed.Load() {
		return ErrClosed
	}
	db, st := f.db, f.st
	st.mu.Lock()
	if !st.acked.Cursor.Less(pos) {
		st.mu.Unlock()
		return nil
	}
	i := sort.Search(len(st.unacked), func(i int) bool { return !st.unacked[i].end.Less(pos) })
	if i == len(st.unacked) || st.unacked[i].end != pos {
		st.mu.Unlock()
		return fmt.Errorf("ack %v: not the end of a batch of follower %q", pos, st.name)
	}
	next := st.acked
	next.Cursor, next.Hold = pos, st.unacked[i].hold
	if withToken {
		next.Token = token
	}
	if err := writeFileAtomic(db.fs, st.path, encodeCursor(next)); err != nil {
		st.mu.Unlock()
		return fmt.Errorf("ack %v: write cursor: %w", pos, err)
	}
	released := st.acked.Hold.Segment < next.Hold.Segment
	st.acked = next
	st.unacked = st.unacked[i+1:]
	st.mu.Unlock()
	if released {
		return db.releaseFollowed()
	}
	return nil
}

// Close detaches the Follower; its cursor and its hold on the WAL stay
// until Unfollow. A blocked Next returns ErrClosed at its next wake-up.
func (f *Follower) Close() error {
	if !f.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	f.st.mu.Lock()
	f.st.open = false
	f.st.unacked = nil
	if f.st.rd != nil {
		f.st.rd.Close()
		f.st.rd = nil
	}
	f.st.mu.Unlock()
	return nil
}

// Unfollow removes the follower name and its cursor, releasing the WAL
// segments it held. It refuses a follower that is open.
func (db *DB) Unfollow(name string) error {
	fl := db.follow
	fl.mu.Lock()
	st := fl.byName[name]
	if st == nil {
		fl.mu.Unlock()
		return fmt.Errorf("unfollow %q: %w", name, ErrUnknownFollower)
	}
	st.mu.Lock()
	open := st.open
	st.mu.Unlock()
	if open {
		fl.mu.Unlock()
		return fmt.Errorf("unfollow %q: %w", name, ErrFollowerOpen)
	}
	if err := db.fs.Remove(st.path); err != nil {
		fl.mu.Unlock()
		return fmt.Errorf("unfollow %q: remove cursor: %w", name, err)
	}
	delete(fl.byName, name)
	fl.count.Store(int32(len(fl.byName)))
	fl.mu.Unlock()
	if err := db.fs.SyncDir(db.followersPath()); err != nil {
		return fmt.Errorf("unfollow %q: sync followers dir: %w", name, err)
	}
	db.log.Info("follower removed", "follower", name)
	return db.releaseFollowed()
}

// Followers describes every follower, sorted by name. It reads the WAL
// between each cursor and the durable end to count the lag in records, so
// it is for diagnostics, not for every write. It holds no lock while it
// reads: a scan of a long backlog (a gigabyte after an hour's outage) must
// not hold up the release of segments, behind which the store's flushes,
// hence its writers, and the followers' reads would wait. A segment
// released meanwhile is counted no more.
func (db *DB) Followers() []FollowerStats {
	fl := db.follow
	fl.mu.Lock()
	all := make([]*follower, 0, len(fl.byName))
	for _, st := range fl.byName {
		all = append(all, st)
	}
	fl.mu.Unlock()
	if len(all) == 0 {
		return nil // and no WAL listing: the forwarders' stats ask every second
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })
	durable := db.wal.Durable()
	segs, _ := db.wal.Segments()
	out := make([]FollowerStats, 0, len(all))
	for _, st := range all {
		st.mu.Lock()
		s := FollowerStats{Name: st.name, Open: st.open, Cursor: st.acked.Cursor, Dropped: st.acked.Dropped}
		st.mu.Unlock()
		from := s.Cursor.walPos()
		for _, e := range segs {
			if e.Segment < from.Segment || e.Segment > durable.Segment {
				continue
			}
			lo, hi := int64(wal.FirstOffset), e.Size
			if e.Segment == from.Segment {
				lo = max(lo, from.Offset)
			}
			if e.Segment == durable.Segment {
				hi = durable.Offset
			}
			s.LagBytes += max(0, hi-lo)
		}
		rd := db.wal.NewReader() // skips a segment released under it
		rd.Read(from, durable, func(_, _ wal.Pos, _ []byte) error {
			s.LagRecords++
			return nil
		})
		rd.Close()
		out = append(out, s)
	}
	return out
}
