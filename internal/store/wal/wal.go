package wal

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// Durability says when Sync returns.
type Durability uint8

const (
	// DurabilityFsync makes Sync return only after an fsync covering the
	// record: an acknowledged record survives a power cut.
	DurabilityFsync Durability = iota
	// DurabilityRelaxed makes Sync return once the record is written to
	// the operating system; a background fsync runs every CommitInterval.
	// An acknowledged record survives a crash of the process, but a power
	// cut loses up to CommitInterval (plus one fsync) of them.
	DurabilityRelaxed
)

// String returns the configuration name of d.
func (d Durability) String() string {
	switch d {
	case DurabilityFsync:
		return "fsync"
	case DurabilityRelaxed:
		return "relaxed"
	}
	return fmt.Sprintf("durability(%d)", uint8(d))
}

// Defaults of Options.
const (
	DefaultSegmentSize    = 64 << 20        // bytes per segment before a cut
	DefaultMaxRecordSize  = 64 << 20        // bytes of the largest payload
	DefaultBufferSize     = 4 << 20         // bytes appended but not yet written
	DefaultCommitInterval = 1 * time.Second // background fsync period in relaxed mode
)

// Options configure a WAL.
type Options struct {
	FS             vfs.FS        // filesystem; nil means the real one
	Durability     Durability    // when Sync returns
	CommitInterval time.Duration // background fsync period in relaxed mode
	SegmentSize    int64         // a segment is cut before a record would pass this size
	MaxRecordSize  int           // larger records are refused by Append and seen as damage by Replay
	BufferSize     int           // appended bytes held in memory before Append blocks for the writer
	SkipCorrupt    bool          // Replay logs and skips damaged records instead of failing
}

// DefaultOptions returns the options of a WAL in fsync mode on the real
// filesystem.
func DefaultOptions() Options {
	return Options{
		FS:             vfs.OS{},
		Durability:     DurabilityFsync,
		CommitInterval: DefaultCommitInterval,
		SegmentSize:    DefaultSegmentSize,
		MaxRecordSize:  DefaultMaxRecordSize,
		BufferSize:     DefaultBufferSize,
	}
}

// Stats are counters for diagnostics. They only grow.
type Stats struct {
	Records        uint64        // records appended
	BytesWritten   uint64        // framed bytes written to segment files
	Fsyncs         uint64        // fsyncs of segment files
	FsyncTime      time.Duration // total time spent in those fsyncs
	FsyncMax       time.Duration // the slowest fsync
	Segments       uint64        // segment files created
	TornBytes      uint64        // bytes cut from torn tails at open
	CorruptSkipped uint64        // damaged regions skipped by Replay
	NoSpace        uint64        // write rounds lost to a full filesystem
	PadBytes       uint64        // bytes of padding appended (pad.go)
}

// WAL is a write-ahead log in one directory. Append, Sync, Cut and Stats
// are safe for concurrent use; Replay and TruncateBefore must not run
// concurrently with each other.
//
// A single committer goroutine does all writing and fsyncing, so that
// concurrent Syncs share one fsync (group commit). Once a write or fsync
// fails the WAL is failed for good: every later call returns that error,
// because the kernel may have dropped the unsynced data and a retried
// fsync could falsely succeed.
//
// Running out of space (ENOSPC, EDQUOT) while writing is the exception: no
// data the kernel accepted is in doubt, so the WAL cuts the segment back to
// the end of its last whole record, fails the Syncs of every record from
// there on, and takes new records again at that place (see nospace.go).
type WAL struct {
	dir  string
	fs   vfs.FS
	opts Options
	log  *slog.Logger

	oldSegs []uint32 // segments that existed at Open, oldest first

	// mu guards the fields below. Lock order: mu is never held during I/O.
	mu           sync.Mutex
	room         *sync.Cond    // signalled when pending bytes are taken or the WAL fails or closes
	next         Pos           // where the next record goes
	pending      []chunk       // appended, not yet written; one chunk per segment
	spare        []chunk       // recycled chunk slice with its buffers
	pendingBytes int           // bytes in pending
	written      Pos           // everything before it is written to the OS
	durable      Pos           // everything before it is fsynced
	fileSeg      uint32        // segment of the file the committer writes
	round        chan struct{} // closed when the current commit round ends
	syncReq      bool          // a Sync waits for an fsync
	closed       bool          // Close was called
	stopped      bool          // the committer has exited
	err          error         // sticky failure
	epoch        uint32        // out-of-space failures so far (see Pos.epoch)
	lostFrom     []Pos         // by epoch-lostBase: where the records of that epoch stopped being written
	lostBase     uint32        // the epoch of lostFrom[0]
	nospace      error         // the last out-of-space failure

	kick chan struct{} // wakes the committer; buffered 1
	done chan struct{} // closed when the committer exits

	// Owned by the committer goroutine (and by Open before it starts).
	f    vfs.File
	fseg uint32
	foff int64 // bytes of f that hold whole records
	// writeFailed is set when the last writeChunks failed writing or
	// creating segment writeFailedSeg (not syncing): only then may an
	// out-of-space failure be recovered from.
	writeFailed    bool
	writeFailedSeg uint32
	syncedTo       Pos

	stats struct {
		records, bytes, fsyncs, fsyncNanos, fsyncMax, segments, torn, skipped, nospace, pad atomic.Uint64
	}
}

// chunk is appended bytes destined for one segment.
type chunk struct {
	seg uint32
	buf []byte
}

// Open opens the WAL in dir, creating the directory when needed. It cuts
// a torn tail off the last segment, then starts a new segment for writing;
// the records already in dir can then be read with Replay.
func Open(dir string, opts Options, log *slog.Logger) (*WAL, error) {
	if opts.FS == nil {
		opts.FS = vfs.OS{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	def := DefaultOptions()
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = def.SegmentSize
	}
	if opts.MaxRecordSize <= 0 {
		opts.MaxRecordSize = def.MaxRecordSize
	}
	if opts.BufferSize <= 0 {
		opts.BufferSize = def.BufferSize
	}
	if opts.CommitInterval <= 0 {
		opts.CommitInterval = def.CommitInterval
	}
	w := &WAL{
		dir:   dir,
		fs:    opts.FS,
		opts:  opts,
		log:   log.With("wal", dir),
		round: make(chan struct{}),
		kick:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	w.room = sync.NewCond(&w.mu)
	if err := w.makeDir(); err != nil {
		return nil, err
	}
	segs, err := w.listSegments()
	if err != nil {
		return nil, err
	}
	if segs, err = w.repairTail(segs); err != nil {
		return nil, err
	}
	w.oldSegs = segs
	first := uint32(1)
	if len(segs) > 0 {
		first = segs[len(segs)-1] + 1
	}
	if err := w.switchTo(first); err != nil {
		return nil, err
	}
	w.next = Pos{Segment: first, Offset: headerSize}
	w.written, w.durable, w.fileSeg = w.next, w.next, first
	go w.run()
	return w, nil
}

// makeDir creates the WAL directory and its missing parents, and syncs the
// parent of each one created so that the directories survive a power cut.
func (w *WAL) makeDir() error {
	var created []string
	for d := filepath.Clean(w.dir); filepath.Dir(d) != d; d = filepath.Dir(d) {
		if _, err := w.fs.ReadDir(d); err == nil {
			break
		}
		created = append(created, d)
	}
	if err := w.fs.MkdirAll(w.dir, 0o755); err != nil {
		return fmt.Errorf("create wal dir: %w", err)
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := w.fs.SyncDir(filepath.Dir(created[i])); err != nil {
			return fmt.Errorf("sync parent of wal dir: %w", err)
		}
	}
	return nil
}

// Dir returns the WAL's directory.
func (w *WAL) Dir() string { return w.dir }

// listSegments returns the numbers of the segment files in dir, sorted.
func (w *WAL) listSegments() ([]uint32, error) {
	names, err := w.fs.ReadDir(w.dir)
	if err != nil {
		return nil, fmt.Errorf("list wal dir: %w", err)
	}
	var segs []uint32
	for _, name := range names {
		if n, ok := parseSegmentName(name); ok {
			segs = append(segs, n)
		}
	}
	return segs, nil
}

func (w *WAL) path(seg uint32) string { return filepath.Join(w.dir, segmentName(seg)) }

// Append adds a record to the log and returns its position. The record is
// copied; it is durable only after a Sync covering the position returns.
// Append blocks while BufferSize bytes wait for the writer.
func (w *WAL) Append(rec []byte) (Pos, error) {
	pos, _, _, err := w.appendIn(rec, nil)
	return pos, err
}

// Chain names the records that a record encoded against earlier ones may
// refer back to: those appended to one segment since the last
// out-of-space rewind. Readers meet a chain's records in order from the
// start of its segment, and a rewind drops records they would never see.
// The zero Chain names none.
type Chain struct {
	seg, epoch uint32
	ok         bool
}

// Valid reports whether c names a chain (the zero Chain names none).
func (c Chain) Valid() bool { return c.ok }

// AppendChained appends rec as Append does if it lands in chain c, and
// returns c with ok true. Otherwise it appends nothing and returns the
// chain that a record appended now starts, with ok false: the caller
// encodes the record again without reference to earlier ones and appends
// it with start true, which appends it wherever it lands and returns the
// chain it is in.
func (w *WAL) AppendChained(rec []byte, c Chain, start bool) (Pos, Chain, bool, error) {
	if start {
		return w.appendIn(rec, nil)
	}
	return w.appendIn(rec, &c)
}

// appendIn is Append, and AppendChained with want non-nil.
func (w *WAL) appendIn(rec []byte, want *Chain) (Pos, Chain, bool, error) {
	if len(rec) > w.opts.MaxRecordSize {
		return Pos{}, Chain{}, false, fmt.Errorf("append record of %d bytes: %w (max %d)", len(rec), ErrRecordTooLarge, w.opts.MaxRecordSize)
	}
	size := recordSize(len(rec))
	w.mu.Lock()
	for {
		if w.err != nil {
			w.mu.Unlock()
			return Pos{}, Chain{}, false, w.err
		}
		if w.closed {
			w.mu.Unlock()
			return Pos{}, Chain{}, false, ErrClosed
		}
		if w.pendingBytes == 0 || w.pendingBytes+int(size) <= w.opts.BufferSize {
			break
		}
		w.wake()
		w.room.Wait()
	}
	if w.next.Offset > headerSize && w.next.Offset+size > w.opts.SegmentSize {
		w.cutLocked()
	}
	in := Chain{seg: w.next.Segment, epoch: w.epoch, ok: true}
	if want != nil && *want != in {
		w.mu.Unlock()
		return Pos{}, in, false, nil
	}
	pos := w.next
	pos.epoch = w.epoch
	c := w.chunkFor(pos.Segment)
	c.buf = appendRecord(c.buf, rec)
	w.next.Offset += size
	w.pendingBytes += int(size)
	flush := w.pendingBytes >= w.opts.BufferSize/4
	w.mu.Unlock()
	w.stats.records.Add(1)
	if flush {
		// Hand full buffers to the OS early so that Sync finds less to do.
		w.wake()
	}
	return pos, in, true, nil
}

// chunkFor returns the pending chunk of segment seg, reusing a recycled
// buffer when one is there. The caller holds mu.
func (w *WAL) chunkFor(seg uint32) *chunk {
	n := len(w.pending)
	if n > 0 && w.pending[n-1].seg == seg {
		return &w.pending[n-1]
	}
	if n < cap(w.pending) {
		w.pending = w.pending[:n+1]
	} else {
		w.pending = append(w.pending, chunk{})
	}
	c := &w.pending[n]
	c.seg, c.buf = seg, c.buf[:0]
	return c
}

// cutLocked ends the current segment: later records go to the next one.
// The caller holds mu.
func (w *WAL) cutLocked() {
	w.next = Pos{Segment: w.next.Segment + 1, Offset: headerSize}
	// An empty chunk makes the committer create the file even when no
	// record follows.
	w.chunkFor(w.next.Segment)
}

// wake asks the committer for a round without blocking.
func (w *WAL) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// Sync waits until the record at pos (and every record before it) is
// durable: fsynced in fsync mode, written to the OS in relaxed mode.
// Concurrent Syncs share one fsync. It returns early with ctx's error.
func (w *WAL) Sync(ctx context.Context, pos Pos) error {
	// This is waitFor specialised by hand: a closure capturing pos would
	// cost an allocation per call on the hottest path.
	for {
		w.mu.Lock()
		switch {
		case w.err != nil:
			w.mu.Unlock()
			return w.err
		case w.lostLocked(pos):
			err := w.nospace
			w.mu.Unlock()
			return err
		case w.covered(pos):
			w.mu.Unlock()
			return nil
		case !pos.Less(w.next):
			next := w.next
			w.mu.Unlock()
			return fmt.Errorf("sync %v: position not appended (next is %v)", pos, next)
		case w.stopped:
			w.mu.Unlock()
			return ErrClosed
		}
		if w.opts.Durability == DurabilityFsync {
			w.syncReq = true
		}
		ch := w.round
		w.mu.Unlock()
		if err := w.awaitRound(ctx, ch); err != nil {
			return err
		}
	}
}

// awaitRound wakes the committer and waits until the round ch stands for
// ends, or ctx does.
func (w *WAL) awaitRound(ctx context.Context, ch <-chan struct{}) error {
	w.wake()
	done := ctx.Done()
	if done == nil {
		<-ch // a context never done: no select
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-done:
		return ctx.Err()
	}
}

// Commit appends rec and waits until it is durable.
func (w *WAL) Commit(ctx context.Context, rec []byte) (Pos, error) {
	pos, err := w.Append(rec)
	if err != nil {
		return pos, err
	}
	return pos, w.Sync(ctx, pos)
}

// covered reports whether the record at pos is durable under the mode.
// The caller holds mu.
func (w *WAL) covered(pos Pos) bool {
	if w.opts.Durability == DurabilityRelaxed {
		return pos.Less(w.written)
	}
	return pos.Less(w.durable)
}

// waitFor runs check under mu until it reports done, waiting for a commit
// round between tries. check may request an fsync for the next round.
func (w *WAL) waitFor(ctx context.Context, check func() (bool, error)) error {
	for {
		w.mu.Lock()
		if w.err != nil {
			w.mu.Unlock()
			return w.err
		}
		ok, err := check()
		if ok || err != nil {
			w.mu.Unlock()
			return err
		}
		if w.stopped {
			w.mu.Unlock()
			return ErrClosed
		}
		ch := w.round
		w.mu.Unlock()
		if err := w.awaitRound(ctx, ch); err != nil {
			return err
		}
	}
}

// Cut ends the current segment (when it holds records) and returns the
// number of the segment that later records go to. On return every earlier
// segment is written and fsynced, so a checkpoint of the state up to the
// cut may call TruncateBefore with the returned number.
func (w *WAL) Cut() (uint32, error) {
	w.mu.Lock()
	if w.err != nil || w.closed {
		err := w.err
		w.mu.Unlock()
		if err == nil {
			err = ErrClosed
		}
		return 0, err
	}
	if w.next.Offset > headerSize {
		w.cutLocked()
	}
	seg := w.next.Segment
	epoch := w.epoch
	w.mu.Unlock()
	err := w.waitFor(context.Background(), func() (bool, error) {
		if w.epoch != epoch {
			// The new segment could not be created: out of space.
			return false, w.nospace
		}
		return w.fileSeg >= seg, nil
	})
	return seg, err
}

// TruncateBefore deletes the segments older than seg, never the one being
// written. Call it after a checkpoint made every record before segment seg
// redundant.
func (w *WAL) TruncateBefore(seg uint32) error {
	w.mu.Lock()
	cur := w.fileSeg
	w.mu.Unlock()
	segs, err := w.listSegments()
	if err != nil {
		return err
	}
	removed := 0
	for _, n := range segs {
		if n >= seg || n >= cur {
			break
		}
		if err := w.fs.Remove(w.path(n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove segment: %w", err)
		}
		removed++
	}
	if removed == 0 {
		return nil
	}
	w.log.Debug("removed old segments", "count", removed, "before", seg)
	if err := w.fs.SyncDir(w.dir); err != nil {
		return fmt.Errorf("sync wal dir: %w", err)
	}
	return nil
}

// Close writes and fsyncs every appended record, stops the committer and
// closes the segment file. It returns the WAL's sticky error if it failed.
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return ErrClosed
	}
	w.closed = true
	w.room.Broadcast()
	w.mu.Unlock()
	w.wake()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stats returns the counters.
func (w *WAL) Stats() Stats {
	return Stats{
		Records:        w.stats.records.Load(),
		BytesWritten:   w.stats.bytes.Load(),
		Fsyncs:         w.stats.fsyncs.Load(),
		FsyncTime:      time.Duration(w.stats.fsyncNanos.Load()),
		FsyncMax:       time.Duration(w.stats.fsyncMax.Load()),
		Segments:       w.stats.segments.Load(),
		TornBytes:      w.stats.torn.Load(),
		CorruptSkipped: w.stats.skipped.Load(),
		NoSpace:        w.stats.nospace.Load(),
		PadBytes:       w.stats.pad.Load(),
	}
}

// openRead opens a segment for reading and returns it with its size.
func (w *WAL) openRead(seg uint32) (vfs.File, int64, error) {
	f, err := w.fs.OpenFile(w.path(seg), os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("open segment: %w", err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return nil, 0, fmt.Errorf("stat segment: %w", err)
	}
	return f, size, nil
}
