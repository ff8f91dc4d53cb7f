package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
)

// ErrUnknownTag is returned by queries that name a tag the store has never seen.
var ErrUnknownTag = errors.New("unknown tag")

// ErrClosed is returned by every call on a closed DB.
var ErrClosed = errors.New("store closed")

// Latest is the newest sample of a tag. For a text tag IsText is set,
// Text holds the value and Sample.V is 0.
type Latest struct {
	Tag string
	model.Sample
	IsText bool
	Text   string
}

// TagInfo describes a stored tag.
type TagInfo struct {
	Name  string
	First int64 // oldest sample time, Unix ms
	Last  int64 // newest sample time, Unix ms
	// Labels are the tag's labels (nil for none). The slice is shared:
	// callers must not modify it.
	Labels model.Labels
	Text   bool // the tag holds text values
}

// DB is an open store. All methods are safe for concurrent use.
//
// Lock order: db.flushMu, then db.orderMu, then db.mu, then series.mu,
// then head.mu; series.saveMu goes after db.flushMu and before series.mu,
// and is never held with db.orderMu or db.mu. db.flushMu serialises
// flushes, compactions, retention, deletes and bulk commits (only they
// change parts; a compaction's merge runs without it, see compact.go);
// backupMu serialises backups and is taken before flushMu.
//
// Each file that keeps its name has exactly one serialised writer, since
// an atomic replace goes through a fixed "NAME.tmp" that two writers
// would share:
//   - MANIFEST: only install writes it, and every caller holds flushMu.
//   - series.dat and series.copy.dat: only seriesTable.save writes them,
//     under series.saveMu (bulk transactions save without flushMu).
//   - runs/: every new run is named by a fresh sequence number (allocSeq),
//     so no two writers share a name; runs are never rewritten in place.
//   - wal/: the wal package serialises its own appends and cuts.
//   - a backup's destination: backup holds backupMu while it writes.
type DB struct {
	dir  string
	fs   vfs.FS
	lock *os.File // flock on DIR/LOCK: one process per data directory
	opts Options
	log  *slog.Logger
	wal  *wal.WAL

	series *seriesTable

	// mu guards the version: active and frozen heads and the run files.
	// Queries hold it for reading while they run, so run files replaced by
	// a flush are unmapped only once no query can use them.
	mu     sync.RWMutex
	active *head
	frozen []*frozenHead
	parts  map[int64][]*runFile // day partition -> runs, time-disjoint per series
	// span logs the days whose runs changed, for the summaries above
	// the day (span.go); guarded by mu like parts.
	span spanLog
	// touched is when each day last took a run (compact leaves a day
	// being written alone); guarded by flushMu.
	touched map[int64]time.Time
	// packs are the month packs MANIFEST lists runs of (pack.go),
	// guarded by flushMu.
	packs map[string]*packFile

	// orderMu orders commits: applies happen in WAL commit order.
	orderMu    sync.Mutex
	lastTicket chan struct{}
	chain      chainEnc           // the chained records' encoder, under orderMu
	inflight   map[uint64]wal.Pos // txn -> first record, until applied

	backupMu       sync.Mutex // one backup at a time: see backup
	flushMu        sync.Mutex
	lastCheckpoint uint32
	version        int         // the MANIFEST format version; raised to formatDeletes by the first delete
	textReady      atomic.Bool // version >= formatText: text may be written
	packedReady    atomic.Bool // version >= formatPacked: packed data records may be written
	chainedReady   atomic.Bool // version >= formatChained: chained data records may be written
	broken         []string    // unreadable runs, kept listed in the manifest
	// backups counts backups between their capture and their end; while
	// one runs, the runs that installs replace keep their names
	// (backupKept) so that it can still hard-link them. Guarded by mu.
	backups    int
	backupKept []string
	replaying  bool          // set during Open's replay, read by rotate
	replayFrom uint32        // the checkpoint replay started from
	seq        atomic.Uint64 // the last run sequence number handed out
	nextTxn    atomic.Uint64

	flushReq chan struct{}
	flushed  chan struct{} // closed and replaced after each flush

	// merging is the merge in flight (see compact.go), guarded by
	// flushMu; mergeDone (on flushMu) is broadcast when it ends.
	merging   *mergeJob
	mergeDone *sync.Cond
	mergeReq  chan struct{}
	mergeHook func(*mergeJob) // tests hold a merge here; nil otherwise

	stop   chan struct{}
	wg     sync.WaitGroup
	closed atomic.Bool
	failed atomic.Pointer[error] // a flush failure that stops writes

	cache   *caches
	stats   Stats
	nospace diskState // see diskfull.go

	// tombstones are the committed deletes whose WAL record may still be
	// replayed (see delete.go); guarded by flushMu, read alone by replay.
	tombstones []tombstone

	follow *followers // see follow.go
}

// frozenHead is a head waiting to be flushed, with the WAL segment from
// which replay must start once it is flushed.
type frozenHead struct {
	*head
	checkpoint uint32
}

// Stats are the store's counters, read with atomic loads.
type Stats struct {
	PointsWritten   atomic.Int64 // samples applied
	WALBytes        atomic.Int64 // bytes of WAL records appended
	RunBytes        atomic.Int64 // bytes of run files written
	MergeBytes      atomic.Int64 // bytes of run files written by merges (part of RunBytes)
	Flushes         atomic.Int64
	Compactions     atomic.Int64
	CorruptBlocks   atomic.Int64 // damaged blocks skipped by queries and merges
	LastFlushMillis atomic.Int64
}

type manifest struct {
	Version    int      `json:"version"`
	Checkpoint uint32   `json:"checkpoint"` // WAL segment replay starts from
	NextSeq    uint64   `json:"next_seq"`
	Runs       []string `json:"runs"`
	// Deletes are committed deletes that WAL replay must still apply to
	// the records before them (see delete.go). Omitted when empty, so a
	// manifest without deletes reads the same to older versions.
	Deletes []tombstone `json:"deletes,omitempty"`
	// Txns are bulk transactions and deletes this write commits whose WAL
	// commit record, for the followers, may not be durable yet: Open
	// appends the ones it does not find (see follow_retain.go).
	Txns []uint64 `json:"txns,omitempty"`
}

// Open opens or creates the store in dir and replays its WAL.
func Open(dir string, opts Options) (_ *DB, err error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.FS == nil {
		opts.FS = vfs.OS{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HeadMaxSamples <= 0 {
		opts.HeadMaxSamples = DefaultOptions().HeadMaxSamples
	}
	if opts.BulkPoints <= 0 {
		opts.BulkPoints = DefaultOptions().BulkPoints
	}
	if opts.FollowMaxBytes <= 0 {
		opts.FollowMaxBytes = DefaultFollowMaxBytes
	}
	if opts.MaxRunsPerPart <= 1 {
		opts.MaxRunsPerPart = DefaultOptions().MaxRunsPerPart
	}
	fs := opts.FS
	for _, d := range []string{dir, filepath.Join(dir, "runs")} {
		if err := fs.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
	}
	// A new data directory must itself survive a power cut.
	fs.SyncDir(filepath.Dir(filepath.Clean(dir)))
	if err := fs.SyncDir(dir); err != nil {
		return nil, fmt.Errorf("sync data directory: %w", err)
	}
	db := &DB{
		dir:        dir,
		fs:         fs,
		opts:       opts,
		log:        opts.Logger,
		active:     newHead(),
		parts:      make(map[int64][]*runFile),
		touched:    make(map[int64]time.Time),
		packs:      make(map[string]*packFile),
		inflight:   make(map[uint64]wal.Pos),
		lastTicket: closedChan(),
		flushReq:   make(chan struct{}, 1),
		mergeReq:   make(chan struct{}, 1),
		flushed:    make(chan struct{}),
		stop:       make(chan struct{}),
		cache:      newCaches(opts.TierCacheBytes, opts.ChunkCacheBytes, opts.Now),
		follow:     newFollowers(),
	}
	db.mergeDone = sync.NewCond(&db.flushMu)
	db.nextTxn.Store(uint64(opts.Now().UnixNano()))
	if isOS(fs) {
		if db.lock, err = lockDir(dir); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				db.lock.Close()
			}
		}()
	}
	// The manifest's format version is checked before any other file is
	// read: a newer Pith's files must be refused, not misread.
	m, err := db.loadManifest()
	if err != nil {
		return nil, err
	}
	db.version = m.Version
	db.textReady.Store(db.version >= formatText)
	db.packedReady.Store(db.version >= formatPacked)
	db.chainedReady.Store(db.version >= formatChained)
	if db.series, err = loadSeries(fs, dir, opts.Logger); err != nil {
		return nil, err
	}
	if err := db.openRuns(m); err != nil {
		db.closeRuns()
		return nil, err
	}
	wopts := wal.DefaultOptions()
	wopts.SkipCorrupt = true
	wopts.FS = fs
	if opts.walSegmentSize > 0 {
		wopts.SegmentSize = opts.walSegmentSize
	}
	if opts.Durability == DurabilityRelaxed {
		wopts.Durability = wal.DurabilityRelaxed
		wopts.CommitInterval = opts.CommitInterval
	}
	db.wal, err = wal.Open(filepath.Join(dir, "wal"), wopts, opts.Logger)
	if err != nil {
		db.closeRuns()
		return nil, fmt.Errorf("open wal: %w", err)
	}
	if err := db.replay(m.Checkpoint); err != nil {
		db.wal.Close()
		db.closeRuns()
		return nil, err
	}
	if err := db.openFollowers(m); err != nil {
		db.wal.Close()
		db.closeRuns()
		return nil, err
	}
	// The indexes were read to check the runs and find each tag's latest
	// value; queries read them again when they need them.
	if db.dropIdleIndexes(true) >= freeAfterDrop {
		debug.FreeOSMemory()
	}
	db.wg.Add(2)
	go db.maintain()
	db.requestMerge() // what the last run of the process left unmerged
	go db.mergeLoop()
	return db, nil
}

// Run indexes in memory cost about 250 bytes per series and day (more
// than everything else a tag costs), so a store of many tags keeps only
// those in use (docs/scaling.md, "Idle memory per tag").
const (
	// indexIdle is how long an unused run index stays in memory: the
	// sweep drops those untouched since the previous sweep.
	indexIdle = time.Minute
	// minDropEntries: smaller indexes stay, as reading one again costs
	// an open and a read of the file, more than the entries weigh.
	minDropEntries = 64
	// freeAfterDrop: after dropping this many entries at open, their
	// memory is given back to the system at once.
	freeAfterDrop = 16384
)

// dropIdleIndexes drops the indexes of runs not used since the last call
// (every one when all is set), and returns how many entries it dropped.
func (db *DB) dropIdleIndexes(all bool) int {
	db.mu.RLock()
	defer db.mu.RUnlock()
	n := 0
	for _, rs := range db.parts {
		for _, r := range rs {
			if r.touched.Swap(false) && !all {
				continue
			}
			n += r.dropLarge()
		}
	}
	return n
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func (db *DB) loadManifest() (*manifest, error) {
	path := filepath.Join(db.dir, "MANIFEST")
	buf, err := readFile(db.fs, path)
	if errors.Is(err, os.ErrNotExist) {
		return &manifest{Version: 1, NextSeq: 1}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	m, err := decodeManifest(buf)
	if err != nil {
		return nil, &CorruptionError{File: path, Err: err}
	}
	if err := checkFormatVersion(m.Version); err != nil {
		return nil, fmt.Errorf("open store %s: %w", db.dir, err)
	}
	return m, nil
}

// The manifest is JSON, for people, followed by a line with the CRC-32C
// of the JSON in hex, so a changed digit is caught. BACKUP is encoded the
// same way (encodeChecked, decodeChecked).
func encodeManifest(m *manifest) []byte { return encodeChecked(m) }

func decodeManifest(buf []byte) (*manifest, error) {
	var m manifest
	if err := decodeChecked(buf, "manifest ", &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// encodeChecked encodes v as indented JSON followed by a line with the
// CRC-32C of the JSON bytes.
func encodeChecked(v any) []byte {
	buf, _ := json.MarshalIndent(v, "", " ")
	return fmt.Appendf(buf, "\ncrc32c %08x\n", crc32c.Checksum(buf))
}

// decodeChecked checks and decodes what encodeChecked wrote into v;
// what prefixes the checksum errors ("manifest ").
func decodeChecked(buf []byte, what string, v any) error {
	i := bytes.LastIndex(buf, []byte("\ncrc32c "))
	if i < 0 {
		return errors.New(what + "checksum missing")
	}
	var crc uint32
	if _, err := fmt.Sscanf(string(buf[i+1:]), "crc32c %08x\n", &crc); err != nil {
		return fmt.Errorf("%schecksum unreadable: %w", what, err)
	}
	if crc32c.Checksum(buf[:i]) != crc {
		return errors.New(what + "checksum mismatch")
	}
	return json.Unmarshal(buf[:i], v)
}

// openRuns opens the runs the manifest lists and removes files a crashed
// flush left behind.
func (db *DB) openRuns(m *manifest) error {
	db.seq.Store(m.NextSeq - 1)
	db.lastCheckpoint = m.Checkpoint
	db.tombstones = m.Deletes
	live := make(map[string]bool, len(m.Runs))
	for _, name := range m.Runs {
		file, base, size, packed, err := parseListName(name)
		live[file] = true
		var r *runFile
		if err == nil {
			r, err = db.openListed(file, base, size, packed)
		} else {
			err = &CorruptionError{File: filepath.Join(db.dir, "MANIFEST"), Err: err}
		}
		if err != nil {
			var ce *CorruptionError
			if errors.As(err, &ce) {
				// An unreadable run costs its own data only.
				// It stays listed (and on disk) for a repair tool.
				db.log.Error("run file unreadable, its data is skipped", "err", err)
				db.stats.CorruptBlocks.Add(1)
				db.broken = append(db.broken, name)
				continue
			}
			return err
		}
		db.parts[r.part] = append(db.parts[r.part], r)
	}
	for p := range db.parts {
		sortRuns(db.parts[p])
	}
	// Runs a crashed flush or bulk transaction left are not in the
	// manifest: nothing refers to them.
	entries, err := db.fs.ReadDir(filepath.Join(db.dir, "runs"))
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	for _, name := range entries {
		if !live[name] {
			db.fs.Remove(filepath.Join(db.dir, "runs", name))
		}
	}
	// Latest values and first times come from the runs, oldest first.
	keys := make([]int64, 0, len(db.parts))
	for p := range db.parts {
		keys = append(keys, p)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	s := db.series
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range keys {
		for _, r := range db.parts[p] {
			for i, ss := 0, r.index(); i < len(ss); i++ {
				rs := &ss[i]
				if int(rs.id) >= len(s.names) {
					return &CorruptionError{File: r.path, Err: fmt.Errorf("series id %d not in series file", rs.id)}
				}
				if rs.fine == fineText {
					s.observeTextLocked(rs.id, rs.minT, "", model.QualityGood)
					s.observeTextLocked(rs.id, rs.maxT, rs.lastText, rs.lastQ)
					continue
				}
				s.observeLocked(rs.id, rs.minT, rs.first, model.QualityGood)
				s.observeLocked(rs.id, rs.maxT, rs.lastV, rs.lastQ)
			}
		}
	}
	return nil
}

func sortRuns(rs []*runFile) {
	sort.Slice(rs, func(i, j int) bool { return rs[i].seq < rs[j].seq })
}

func (db *DB) closeRuns() {
	for _, rs := range db.parts {
		for _, r := range rs {
			r.close()
		}
	}
}

// replay applies the WAL records after the checkpoint in order. Bulk
// transactions commit by a manifest write: their data records in the WAL
// (written only for followers) are not applied.
func (db *DB) replay(from uint32) error {
	start := wal.Pos{Segment: from}
	db.replaying, db.replayFrom = true, from
	defer func() { db.replaying = false }()
	var chain walChain
	d := dataRecord{chain: &chain}
	var recs, applied int
	err := db.wal.Replay(start, func(pos, end wal.Pos, rec []byte) error {
		recs++
		chain.enter(pos, end)
		if len(rec) > 0 && (rec[0] == recLabels || rec[0] == recLabelsReplica) {
			if err := db.replayLabels(rec); err != nil {
				db.log.Error("skipping undecodable wal record", "segment", pos.Segment, "offset", pos.Offset, "err", err)
			}
			return nil
		}
		if len(rec) == 0 || !isDataRecord(rec[0]) {
			// A delete record acts through its tombstone; the others
			// are for the followers.
			db.follow.noteReplayed(rec)
			return nil
		}
		err := decodeDataRecord(rec, &d)
		if err == nil && d.txn != txnAuto {
			// A bulk transaction's copy for the followers: its run
			// files hold the points.
			db.follow.maxID = max(db.follow.maxID, d.txn)
			return nil
		}
		if err != nil {
			db.log.Error("skipping undecodable wal record", "segment", pos.Segment, "offset", pos.Offset, "err", err)
			return nil
		}
		n, err := db.replayRecord(pos, &d)
		applied += n
		if err != nil {
			db.log.Error("skipping damaged wal record", "segment", pos.Segment, "offset", pos.Offset, "err", err)
		}
		return db.backpressure()
	})
	if err != nil {
		return fmt.Errorf("replay wal: %w", err)
	}
	if recs > 0 {
		db.log.Info("wal replayed", "records", recs, "points", applied)
	}
	return nil
}

// Close flushes everything to run files, merges each day into one run, and
// closes the store.
func (db *DB) Close() error {
	if !db.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	close(db.stop)
	db.wg.Wait()
	err := db.flushAll(true)
	for _, st := range db.follow.all() {
		st.mu.Lock()
		if st.rd != nil {
			st.rd.Close() // the segment a follower left open reads no more
			st.rd = nil
		}
		st.mu.Unlock()
	}
	if werr := db.wal.Close(); err == nil {
		err = werr
	}
	db.mu.Lock()
	db.closeRuns()
	db.mu.Unlock()
	if db.lock != nil {
		db.lock.Close() // releases the flock
	}
	return err
}

// Flush writes the head to run files now.
func (db *DB) Flush() error {
	if db.closed.Load() {
		return ErrClosed
	}
	return db.flushAll(false)
}

// Dir returns the data directory.
func (db *DB) Dir() string { return db.dir }

// Stats returns the store's live counters.
func (db *DB) Stats() *Stats { return &db.stats }

// DiskBytes returns the bytes of the data directory's files.
func (db *DB) DiskBytes() int64 {
	var total int64
	filepath.Walk(db.dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && !strings.HasSuffix(path, ".tmp") {
			total += info.Size()
		}
		return nil
	})
	return total
}

// Latest returns the newest sample of the named tags, or of all tags.
func (db *DB) Latest(tags ...string) ([]Latest, error) {
	s := db.series
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(tags) == 0 {
		out := make([]Latest, 0, len(s.names))
		for id, n := range s.names {
			if s.has[id] {
				out = append(out, Latest{Tag: n, Sample: s.latest[id], IsText: s.isText[id], Text: s.ltext[id]})
			}
		}
		return out, nil
	}
	out := make([]Latest, 0, len(tags))
	for _, t := range tags {
		id, ok := s.byName[t]
		if !ok || !s.has[id] {
			return nil, fmt.Errorf("latest %q: %w", t, ErrUnknownTag)
		}
		out = append(out, Latest{Tag: t, Sample: s.latest[id], IsText: s.isText[id], Text: s.ltext[id]})
	}
	return out, nil
}

// HasTag reports whether the store holds data of the tag.
func (db *DB) HasTag(name string) bool {
	s := db.series
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.byName[name]
	return ok && s.has[id]
}

// TagsGeneration changes whenever what Tags lists changes, but for the
// tags' first and last times: a tag gets its first sample or loses its
// last one, or its labels change. A caller that keeps an index of the tags
// and their labels rebuilds it only when this moved.
func (db *DB) TagsGeneration() uint64 {
	s := db.series
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.listGen
}

// Tags lists every tag with data.
func (db *DB) Tags() []TagInfo {
	s := db.series
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]TagInfo, 0, len(s.names))
	for id, n := range s.names {
		if s.has[id] {
			out = append(out, TagInfo{Name: n, First: s.first[id], Last: s.latest[id].T, Labels: s.labels[id], Text: s.isText[id]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
