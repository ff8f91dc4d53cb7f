package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/wal"
)

// Sink sends batches to one upstream. The queue calls Send from a single
// goroutine, one batch at a time, in queue order.
type Sink interface {
	// Send delivers b and returns nil only once the upstream confirmed
	// it. A resent batch carries the same ID, which the sink must pass on
	// so that the upstream drops the duplicate. An error wrapping
	// ErrPermanent sets the batch aside; any other error is retried. Send
	// returns early with ctx's error when the queue closes.
	Send(ctx context.Context, b Batch) error
}

// Batch is one queued batch as handed to a Sink.
type Batch struct {
	ID      string // stable across retries and restarts: "<site>-<segment>-<offset>"
	Payload []byte // the encoded points (docs/format/forward.md); valid only during Send
	Points  int    // number of points in Payload
}

// ErrPermanent is wrapped by sink errors that retrying cannot cure (the
// upstream refused the batch itself); such a batch is set aside.
var ErrPermanent = errors.New("refused permanently")

// ErrQueueFull is returned by Enqueue under OverflowRejectNew when the
// queue is at its byte cap.
var ErrQueueFull = errors.New("forward queue full")

// ErrClosed is returned by calls on a closed queue.
var ErrClosed = errors.New("forward queue closed")

// Overflow says what Enqueue does when the queue would pass MaxBytes.
type Overflow uint8

const (
	// OverflowDropOldest drops the oldest unsent batches to make room;
	// their points are counted in Stats.Dropped.
	OverflowDropOldest Overflow = iota
	// OverflowRejectNew refuses the new points with ErrQueueFull; they
	// are counted in Stats.Rejected.
	OverflowRejectNew
)

// String returns the configuration name of o.
func (o Overflow) String() string {
	switch o {
	case OverflowDropOldest:
		return "drop_oldest"
	case OverflowRejectNew:
		return "reject_new"
	}
	return fmt.Sprintf("overflow(%d)", uint8(o))
}

// ParseOverflow is the inverse of Overflow.String.
func ParseOverflow(s string) (Overflow, error) {
	switch s {
	case "drop_oldest", "":
		return OverflowDropOldest, nil
	case "reject_new":
		return OverflowRejectNew, nil
	}
	return 0, fmt.Errorf("unknown overflow policy %q (want drop_oldest or reject_new)", s)
}

// Defaults of Options.
const (
	DefaultMaxBytes       = 1 << 30                // bytes of queued batches before the overflow policy applies
	DefaultMaxAge         = 7 * 24 * time.Hour     // age at which an unsent batch is dropped
	DefaultMaxBatchPoints = 10000                  // points per batch; Enqueue splits larger writes
	DefaultMemoryBytes    = 32 << 20               // bytes of new batches also kept in memory
	DefaultReadAhead      = 4 << 20                // bytes read from disk at once when catching up
	DefaultCursorInterval = 500 * time.Millisecond // longest wait before a confirmed batch is recorded on disk
	DefaultRetryMin       = 100 * time.Millisecond // first wait after a failed send
	DefaultRetryMax       = 15 * time.Second       // longest wait between retries
	DefaultSegmentSize    = 16 << 20               // bytes per queue WAL segment: the unit of reclaiming space
)

// Options configure a Queue.
type Options struct {
	Site           string        // site name, the first part of batch ids; required
	WAL            wal.Options   // the queue's log; its Durability says when Enqueue returns
	MaxBytes       int64         // cap on the encoded bytes of unsent batches
	MaxAge         time.Duration // unsent batches older than this are dropped and counted
	Overflow       Overflow      // what happens at MaxBytes
	MaxBatchPoints int           // points per batch
	MemoryBytes    int64         // new batches up to this many bytes are sent from memory, later ones from disk
	ReadAhead      int           // bytes read from disk per catch-up read
	CursorInterval time.Duration // confirmed progress is written at least this often; keep it well under the upstream's dedup window
	RetryMin       time.Duration // first wait after a failed send; doubles up to RetryMax
	RetryMax       time.Duration // longest wait between retries
}

// DefaultOptions returns the options of a queue with relaxed WAL
// durability (an enqueued batch survives a crash of the process, and a
// power cut loses at most the last second) that skips damaged records.
func DefaultOptions() Options {
	w := wal.DefaultOptions()
	w.Durability = wal.DurabilityRelaxed
	w.SegmentSize = DefaultSegmentSize
	// A damaged batch is logged and skipped: stopping the whole forwarder
	// for it would lose far more.
	w.SkipCorrupt = true
	return Options{
		WAL:            w,
		MaxBytes:       DefaultMaxBytes,
		MaxAge:         DefaultMaxAge,
		Overflow:       OverflowDropOldest,
		MaxBatchPoints: DefaultMaxBatchPoints,
		MemoryBytes:    DefaultMemoryBytes,
		ReadAhead:      DefaultReadAhead,
		CursorInterval: DefaultCursorInterval,
		RetryMin:       DefaultRetryMin,
		RetryMax:       DefaultRetryMax,
	}
}

// Stats describe a queue. Counters only grow; the rest are gauges.
type Stats struct {
	Backlog      int64   // points not yet confirmed by the upstream
	BacklogBytes int64   // encoded bytes of those points
	Batches      int     // batches not yet confirmed
	OldestS      float64 // seconds since the oldest unconfirmed batch was enqueued; 0 when none
	SentPerS     float64 // points confirmed per second over the last few seconds
	Sent         uint64  // points confirmed
	SentBatches  uint64  // batches confirmed
	Errors       uint64  // failed sends (each is retried)
	Dropped      uint64  // points dropped by the byte cap or the age cap
	Rejected     uint64  // points refused by Enqueue under OverflowRejectNew
	Poisoned     uint64  // batches refused permanently and set aside in poison/
}

// entry is one unconfirmed batch in the in-memory index of the queue.
type entry struct {
	pos    wal.Pos
	size   int    // encoded bytes
	points int    // points in the batch
	enq    int64  // enqueue time, Unix ms
	rec    []byte // the encoded batch when held in memory
	mem    bool   // rec counts towards Queue.memBytes (else it was read ahead from disk)
	done   bool   // confirmed, set aside or dropped
}

// rateSlots is the number of one-second buckets behind SentPerS.
const rateSlots = 6

// Queue is a disk-backed forwarding queue feeding one Sink. Enqueue and
// Stats are safe for concurrent use.
//
// Every batch is a record of the queue's WAL, so its position is a stable
// id. A cursor file holds the position of the last batch that left the
// queue; segments wholly before it are deleted. New batches are also kept
// in memory (up to MemoryBytes) so that a healthy queue never reads its
// disk; a backlog beyond that is read back from the WAL.
type Queue struct {
	dir  string
	opts Options
	log  *slog.Logger
	sink Sink

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// mu guards the fields below. It is held during WAL Append (which may
	// wait for the writer) but never during a Send or a disk read.
	mu       sync.Mutex
	cond     *sync.Cond // signalled when a batch is added or the queue closes
	w        *wal.WAL
	liveSeg  uint32   // batches in segments from here on were appended since the WAL was last opened
	entries  []*entry // unconfirmed batches, oldest first; done ones are trimmed off the front
	bytes    int64
	points   int64
	memBytes int64
	spilled  bool // a batch appended since the WAL was opened is not in memory
	closed   bool
	inflight *entry
	cursor   wal.Pos // position of the last batch that left the queue
	tags     map[string]uint64
	order    []string
	buf      []byte
	rate     [rateSlots]struct{ sec, n int64 }
	st       Stats // counters only

	// Owned by the sender goroutine.
	saved     wal.Pos
	savedTime time.Time
}

// Open opens (or creates) the queue in dir and starts sending its backlog
// to sink.
func Open(dir string, opts Options, sink Sink, log *slog.Logger) (*Queue, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Site == "" {
		return nil, errors.New("open forward queue: site name is empty")
	}
	def := DefaultOptions()
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = def.MaxBytes
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = def.MaxAge
	}
	if opts.MaxBatchPoints <= 0 {
		opts.MaxBatchPoints = def.MaxBatchPoints
	}
	if opts.MemoryBytes <= 0 {
		opts.MemoryBytes = def.MemoryBytes
	}
	if opts.ReadAhead <= 0 {
		opts.ReadAhead = def.ReadAhead
	}
	if opts.CursorInterval <= 0 {
		opts.CursorInterval = def.CursorInterval
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = def.RetryMin
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = max(def.RetryMax, opts.RetryMin)
	}
	q := &Queue{
		dir:  dir,
		opts: opts,
		log:  log.With("forward_queue", dir),
		sink: sink,
		done: make(chan struct{}),
		tags: map[string]uint64{},
	}
	q.cond = sync.NewCond(&q.mu)
	if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o755); err != nil {
		return nil, fmt.Errorf("create forward queue dir: %w", err)
	}
	cur, err := readCursor(filepath.Join(dir, cursorFile))
	if err != nil {
		return nil, err
	}
	q.cursor, q.saved, q.savedTime = cur, cur, time.Now()
	if err := q.openWAL(); err != nil {
		return nil, err
	}
	if err := q.scan(); err != nil {
		q.w.Close()
		return nil, err
	}
	q.log.Info("opened forward queue", "batches", len(q.entries), "points", q.points, "bytes", q.bytes)
	q.ctx, q.cancel = context.WithCancel(context.Background())
	go q.run()
	return q, nil
}

// openWAL opens the queue's WAL and notes where its new segments start.
func (q *Queue) openWAL() error {
	w, err := wal.Open(filepath.Join(q.dir, "wal"), q.opts.WAL, q.log)
	if err != nil {
		return fmt.Errorf("open forward wal: %w", err)
	}
	// Right after Open the current segment is empty, so Cut only returns
	// its number: the first segment Replay cannot see.
	seg, err := w.Cut()
	if err != nil {
		w.Close()
		return fmt.Errorf("find live forward segment: %w", err)
	}
	q.w, q.liveSeg, q.spilled = w, seg, false
	return nil
}

// scan rebuilds the index of unconfirmed batches from the WAL.
func (q *Queue) scan() error {
	return q.w.Replay(q.cursor, func(pos wal.Pos, rec []byte) error {
		if !q.cursor.Less(pos) {
			return nil
		}
		enq, n, err := batchHeader(rec)
		if err != nil {
			// The WAL checksum passed, so this is a record we did not
			// write; keep going rather than block the queue for ever.
			q.log.Error("skipping undecodable queue record", "pos", pos, "err", err)
			return nil
		}
		q.entries = append(q.entries, &entry{pos: pos, size: len(rec), points: n, enq: enq})
		q.bytes += int64(len(rec))
		q.points += int64(n)
		return nil
	})
}

// Enqueue appends pts to the queue, in batches of at most MaxBatchPoints,
// and returns once they are durable under the WAL's durability mode.
func (q *Queue) Enqueue(ctx context.Context, pts []model.Point) error {
	now := time.Now().UnixMilli()
	for len(pts) > 0 {
		n := min(len(pts), q.opts.MaxBatchPoints)
		if err := q.enqueueBatch(ctx, now, pts[:n]); err != nil {
			return err
		}
		pts = pts[n:]
	}
	return nil
}

func (q *Queue) enqueueBatch(ctx context.Context, now int64, pts []model.Point) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.buf = appendBatch(q.buf[:0], now, pts, q.tags, q.order)
	size := int64(len(q.buf))
	if q.bytes+size > q.opts.MaxBytes {
		if q.opts.Overflow == OverflowRejectNew {
			q.st.Rejected += uint64(len(pts))
			q.mu.Unlock()
			return fmt.Errorf("enqueue %d points: %w (%d bytes queued)", len(pts), ErrQueueFull, q.bytes)
		}
		q.dropLocked(func(e *entry) bool { return q.bytes+size > q.opts.MaxBytes })
	}
	pos, err := q.w.Append(q.buf)
	if err != nil {
		q.mu.Unlock()
		return fmt.Errorf("append batch: %w", err)
	}
	e := &entry{pos: pos, size: int(size), points: len(pts), enq: now}
	if !q.spilled && q.memBytes+size <= q.opts.MemoryBytes {
		e.rec = append([]byte(nil), q.buf...)
		e.mem = true
		q.memBytes += size
	} else {
		q.spilled = true
	}
	q.entries = append(q.entries, e)
	q.bytes += size
	q.points += int64(len(pts))
	w := q.w
	q.cond.Signal()
	q.mu.Unlock()
	// Sync outside mu so that concurrent enqueuers share one fsync. If the
	// sender reopened the WAL meanwhile, Close made the record durable and
	// Sync on the old WAL reports just that.
	if err := w.Sync(ctx, pos); err != nil && !errors.Is(err, wal.ErrClosed) {
		if wal.IsNoSpace(err) {
			q.unqueue(e)
		}
		return fmt.Errorf("sync batch: %w", err)
	}
	return nil
}

// unqueue takes out a batch whose record the WAL dropped for lack of
// space (the WAL hands its position out again), unless the sender already
// has it. It leaves the index without marking it done, so the cursor
// never names the dropped record's position.
func (q *Queue) unqueue(e *entry) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e.done || e == q.inflight {
		return
	}
	for i, x := range q.entries {
		if x == e {
			q.finishLocked(e)
			q.entries = append(q.entries[:i], q.entries[i+1:]...)
			return
		}
	}
}

// dropLocked drops unsent batches from the oldest on while drop says so,
// never the one being sent, and counts their points. The caller holds mu.
func (q *Queue) dropLocked(drop func(*entry) bool) {
	for _, e := range q.entries {
		if e.done || e == q.inflight {
			continue
		}
		if !drop(e) {
			break
		}
		q.st.Dropped += uint64(e.points)
		q.finishLocked(e)
	}
	q.trimLocked()
}

// finishLocked takes e out of the backlog. The caller holds mu and calls
// trimLocked afterwards.
func (q *Queue) finishLocked(e *entry) {
	e.done = true
	q.bytes -= int64(e.size)
	q.points -= int64(e.points)
	if e.mem {
		q.memBytes -= int64(e.size)
	}
	e.rec, e.mem = nil, false
}

// trimLocked removes done batches from the front of the index and moves
// the cursor past them. The caller holds mu.
func (q *Queue) trimLocked() {
	i := 0
	for i < len(q.entries) && q.entries[i].done {
		q.cursor = q.entries[i].pos
		q.entries[i] = nil
		i++
	}
	q.entries = q.entries[i:]
	if len(q.entries) == 0 {
		q.entries = q.entries[:0:0]
	}
}

// Stats returns the queue's gauges and counters.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.st
	s.Backlog, s.BacklogBytes, s.Batches = q.points, q.bytes, 0
	now := time.Now()
	for _, e := range q.entries {
		if e.done {
			continue
		}
		if s.Batches == 0 {
			s.OldestS = max(0, float64(now.UnixMilli()-e.enq)/1000)
		}
		s.Batches++
	}
	// Average over the last full seconds, leaving out the current one.
	sec := now.Unix()
	var n int64
	for _, r := range q.rate {
		if r.sec < sec && r.sec >= sec-(rateSlots-1) {
			n += r.n
		}
	}
	s.SentPerS = float64(n) / (rateSlots - 1)
	return s
}

// countSentLocked adds n confirmed points to the rate buckets. The caller
// holds mu.
func (q *Queue) countSentLocked(n int) {
	sec := time.Now().Unix()
	r := &q.rate[sec%rateSlots]
	if r.sec != sec {
		r.sec, r.n = sec, 0
	}
	r.n += int64(n)
}

// Close stops sending (a send in flight is abandoned and resent after the
// next Open), records the confirmed progress and closes the WAL.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
	q.cancel()
	<-q.done
	err := q.saveCursor(true)
	if cerr := q.w.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close forward wal: %w", cerr)
	}
	return err
}
