// Package archive is the queue between the tag table and the store.
//
// It is the tag table's Sink, with two roads to the store: Enqueue for
// acquired values (queued, batched, retried, frozen by FREEZE) and Write
// for pushed values, whose sender waits for a durable answer.
//
// Enqueue never blocks: it copies the points into memory chunks of up to
// Options.MaxBatch points, sharded by tag so that each tag always goes
// through the same writer goroutine, which keeps the per-tag order of writes
// (and so "last write wins" for a repeated timestamp) with several writers.
// Each writer takes its shard's oldest chunk when it is full, when its first
// point has waited Options.MaxDelay, or when the queue closes, and calls
// Writer.Write until it succeeds, backing off between attempts: a point is
// never dropped silently. The only loss is a batch refused by Enqueue when
// the queue already holds Options.MaxBytes (or after Close); it is counted
// in Stats and logged, and Enqueue reports it to the caller.
//
// FREEZE (Freeze) pauses the writers and keeps queueing; when it ends the
// writers drain the backlog and the drain's rate is reported in
// Stats.LastDrain and in the log.
package archive

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"sync"
	"time"
	"unsafe"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// Writer is the store side of the queue, implemented by *store.DB.
// Write must be atomic and durable on return; it is called concurrently by
// Options.Writers goroutines, each with its own slice, which the writer must
// not keep after returning. ctx is cancelled only when Close gives up.
type Writer interface {
	Write(ctx context.Context, pts []model.Point) error
}

var _ Writer = (*store.DB)(nil)

// Options tunes a Queue. Zero fields take the defaults.
type Options struct {
	MaxBatch int           // points per Write at most
	MaxDelay time.Duration // longest a point waits for its batch to fill
	Writers  int           // writer goroutines (tag shards)
	MaxBytes int64         // memory bound of queued points; beyond it Enqueue refuses
	RetryMin time.Duration // first back-off after a failed Write
	RetryMax time.Duration // longest back-off
}

// Default option values.
const (
	defaultMaxBatch = 10000                  // points
	defaultMaxDelay = 200 * time.Millisecond // per batch
	defaultWriters  = 4                      // goroutines
	defaultMaxBytes = 256 << 20              // bytes
	defaultRetryMin = 100 * time.Millisecond // first back-off
	defaultRetryMax = 10 * time.Second       // back-off ceiling
	warnEvery       = 10 * time.Second       // log rate limit for repeated problems
	freeChunks      = 4                      // spare chunks kept per writer
	firstChunk      = 256                    // points a new chunk has room for
)

// pointBytes is what one queued point costs. Tag strings are not counted:
// the tag table hands out its definitions' strings, shared by every point.
const pointBytes = int64(unsafe.Sizeof(model.Point{}))

// DefaultOptions returns the defaults: 10000 points or 200 ms per write,
// 2 writers, 256 MiB, back-off from 100 ms to 10 s.
func DefaultOptions() Options {
	return Options{
		MaxBatch: defaultMaxBatch,
		MaxDelay: defaultMaxDelay,
		Writers:  defaultWriters,
		MaxBytes: defaultMaxBytes,
		RetryMin: defaultRetryMin,
		RetryMax: defaultRetryMax,
	}
}

func (o *Options) fill() {
	d := DefaultOptions()
	if o.MaxBatch <= 0 {
		o.MaxBatch = d.MaxBatch
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = d.MaxDelay
	}
	if o.Writers <= 0 {
		o.Writers = d.Writers
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = d.MaxBytes
	}
	if o.RetryMin <= 0 {
		o.RetryMin = d.RetryMin
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(d.RetryMax, o.RetryMin)
	}
}

// chunk is one future Write.
type chunk struct {
	pts []model.Point
	t0  time.Time // arrival of the first point
}

type shard struct {
	chunks []chunk // FIFO, oldest first
	wake   chan struct{}
}

// Queue is the archive queue. Its methods are safe for concurrent use.
type Queue struct {
	w    Writer
	log  *slog.Logger
	opts Options
	seed maphash.Seed

	kill    context.Context // cancelled when Close gives up
	killFn  context.CancelFunc
	writers sync.WaitGroup

	mu       sync.Mutex
	shards   []shard
	free     [][]model.Point
	lastLen  int   // points the chunks written lately held (a decaying maximum): new chunks' room
	pending  int64 // points enqueued and not yet written
	closing  bool
	frozenTo time.Time // zero when not frozen
	drain    drainState
	lastWarn time.Time
	c        counters
}

// New starts a queue writing to w.
func New(w Writer, log *slog.Logger, opts Options) *Queue {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts.fill()
	q := &Queue{w: w, log: log, opts: opts, seed: maphash.MakeSeed()}
	q.kill, q.killFn = context.WithCancel(context.Background())
	q.shards = make([]shard, opts.Writers)
	q.c.rateT0 = time.Now()
	for i := range q.shards {
		q.shards[i].wake = make(chan struct{}, 1)
		q.writers.Add(1)
		go q.writer(i)
	}
	return q
}

// Enqueue copies pts into the queue and returns at once. It returns false,
// and counts the points as dropped, when the queue is closed or holding
// pts would exceed Options.MaxBytes; the whole batch is then refused so
// that a batch is archived entirely or not at all.
func (q *Queue) Enqueue(pts []model.Point) bool {
	if len(pts) == 0 {
		return true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := int64(len(pts))
	if q.closing || (q.pending+n)*pointBytes > q.opts.MaxBytes {
		q.c.overflows++
		q.c.dropped += uint64(n)
		if now := time.Now(); now.Sub(q.lastWarn) >= warnEvery {
			q.lastWarn = now
			q.log.Warn("archive queue refused points", "points", n, "pending", q.pending,
				"closing", q.closing, "max_bytes", q.opts.MaxBytes, "dropped_total", q.c.dropped)
		}
		return false
	}
	q.pending += n
	q.c.enqueued += uint64(n)
	if len(q.shards) == 1 {
		q.appendRun(0, pts)
		return true
	}
	// Points of one shard are usually interleaved with others', so they
	// are appended one by one; hashing costs a few ns per point.
	for i := range pts {
		s := int(maphash.String(q.seed, pts[i].Tag) % uint64(len(q.shards)))
		q.appendRun(s, pts[i:i+1])
	}
	return true
}

// Write is the road of pushed values (tag.Table.Write): it writes pts to
// the store in the caller's goroutine as one atomic, durable write and
// counts it with the queue's writes. The caller waits for its answer, so
// Write neither queues nor retries, and FREEZE, a test of the archive's
// backlog, does not hold it.
func (q *Queue) Write(ctx context.Context, pts []model.Point) error {
	if len(pts) == 0 {
		return nil
	}
	start := time.Now()
	if err := q.w.Write(ctx, pts); err != nil {
		return err
	}
	now := time.Now()
	q.mu.Lock()
	q.c.wrote(len(pts), now.Sub(start), now)
	q.mu.Unlock()
	return nil
}

// TextWriter is a Writer that stores text values, as *store.DB does.
type TextWriter interface {
	WriteMixed(ctx context.Context, pts []model.Point, texts []model.TextPoint) error
}

var _ TextWriter = (*store.DB)(nil)

// ErrNoText is returned by WriteText when the queue's Writer keeps no text.
var ErrNoText = errors.New("the archive keeps no text values")

// WriteMixed is the road of text values (tag.Table.WriteText and
// WriteMixed), as Write is for pushed numbers: numbers and text in one
// atomic, durable write in the caller's goroutine, counted with the
// queue's writes.
func (q *Queue) WriteMixed(ctx context.Context, pts []model.Point, texts []model.TextPoint) error {
	tw, ok := q.w.(TextWriter)
	if !ok {
		return ErrNoText
	}
	if len(pts)+len(texts) == 0 {
		return nil
	}
	start := time.Now()
	if err := tw.WriteMixed(ctx, pts, texts); err != nil {
		return err
	}
	now := time.Now()
	q.mu.Lock()
	q.c.wrote(len(pts)+len(texts), now.Sub(start), now)
	q.mu.Unlock()
	return nil
}

// appendRun appends pts to shard s, starting new chunks as needed and
// waking the shard's writer when a chunk starts (to arm its delay timer) or
// fills; q.mu is held.
func (q *Queue) appendRun(s int, pts []model.Point) {
	sh := &q.shards[s]
	for len(pts) > 0 {
		last := len(sh.chunks) - 1
		if last < 0 || len(sh.chunks[last].pts) == q.opts.MaxBatch {
			sh.chunks = append(sh.chunks, chunk{pts: q.newChunk(), t0: time.Now()})
			last++
			if last == 0 {
				notify(sh.wake)
			}
		}
		c := &sh.chunks[last]
		k := min(len(pts), q.opts.MaxBatch-len(c.pts))
		if need := len(c.pts) + k; need > cap(c.pts) {
			c.pts = growChunk(c.pts, need, q.opts.MaxBatch)
		}
		c.pts = append(c.pts, pts[:k]...)
		pts = pts[k:]
		if len(c.pts) == q.opts.MaxBatch && last == 0 {
			notify(sh.wake)
		}
	}
}

// chunkRoom is the room a new chunk gets: what the chunks written lately
// held (lastLen, at least firstChunk, at most MaxBatch). Chunks are as large as
// the rate needs: a box archiving a thousand values a second, a few
// dozen a batch, does not hold MaxBatch points of room in every chunk it
// has used (400 kB each at the default, which the soak saw pile up over
// half an hour as slow writes left more chunks in flight), and a bulk
// load's chunks start full size instead of growing by copies; q.mu is
// held.
func (q *Queue) chunkRoom() int {
	return min(q.opts.MaxBatch, max(firstChunk, q.lastLen))
}

func (q *Queue) newChunk() []model.Point {
	if n := len(q.free); n > 0 {
		c := q.free[n-1]
		q.free = q.free[:n-1]
		return c[:0]
	}
	return make([]model.Point, 0, q.chunkRoom())
}

// recycle keeps a written chunk as a spare, unless there are enough or
// it is much larger than the rate needs now (then it goes to the garbage
// collector, and a burst's memory with it); q.mu is held.
func (q *Queue) recycle(c []model.Point) {
	q.lastLen = max(len(c), q.lastLen-q.lastLen/8)
	if len(q.free) < freeChunks*len(q.shards) && cap(c) <= 4*q.chunkRoom() {
		q.free = append(q.free, c)
	}
}

// growChunk returns c with room for need points: doubled, at least need,
// never more than maxBatch.
func growChunk(c []model.Point, need, maxBatch int) []model.Point {
	n := min(max(need, 2*cap(c)), maxBatch)
	g := make([]model.Point, len(c), n)
	copy(g, c)
	return g
}

func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (q *Queue) wakeAll() {
	for i := range q.shards {
		notify(q.shards[i].wake)
	}
}

// Freeze pauses writes for d while Enqueue keeps queueing (up to MaxBytes).
// A new Freeze replaces the previous deadline. When the freeze ends the
// writers drain the backlog at full speed.
func (q *Queue) Freeze(d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.frozenTo = time.Now().Add(d)
	q.drain = drainState{last: q.drain.last}
	q.log.Info("archive frozen", "for", d, "pending", q.pending)
	q.wakeAll()
}

// Thaw ends a freeze early.
func (q *Queue) Thaw() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.frozenTo.IsZero() {
		q.frozenTo = time.Now()
		q.wakeAll()
	}
}

// Close stops accepting points and waits until every queued point is
// written (a freeze is lifted). If ctx ends first, the writers are
// cancelled and Close returns an error counting the points not written.
func (q *Queue) Close(ctx context.Context) error {
	q.mu.Lock()
	q.closing = true
	if !q.frozenTo.IsZero() {
		q.frozenTo = time.Now()
	}
	q.wakeAll()
	q.mu.Unlock()

	done := make(chan struct{})
	go func() { q.writers.Wait(); close(done) }()
	select {
	case <-done:
		q.killFn()
		return nil
	case <-ctx.Done():
	}
	q.killFn()
	<-done
	q.mu.Lock()
	lost := q.pending
	q.mu.Unlock()
	if lost == 0 {
		return nil
	}
	q.log.Error("archive queue closed with unwritten points", "points", lost)
	return fmt.Errorf("close archive queue: %d points not written: %w", lost, ctx.Err())
}

// errKilled ends a writer whose Close gave up.
var errKilled = errors.New("archive queue killed")

// writer is the goroutine owning shard s.
func (q *Queue) writer(s int) {
	defer q.writers.Done()
	sh := &q.shards[s]
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		c, ok := q.next(sh, timer)
		if !ok {
			return
		}
		if err := q.write(c.pts); err != nil {
			return // killed: the chunk stays counted in pending
		}
		q.mu.Lock()
		q.pending -= int64(len(c.pts))
		q.recycle(c.pts)
		q.drainProgress()
		q.mu.Unlock()
	}
}

// next waits for a chunk the writer may write, or returns false when the
// queue is closed and the shard empty (or the queue is killed).
func (q *Queue) next(sh *shard, timer *time.Timer) (chunk, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if q.kill.Err() != nil {
			return chunk{}, false
		}
		now := time.Now()
		var wait time.Duration = -1 // forever
		switch {
		case len(sh.chunks) == 0:
			if q.closing {
				return chunk{}, false
			}
		case now.Before(q.frozenTo):
			wait = q.frozenTo.Sub(now)
		default:
			if !q.frozenTo.IsZero() {
				q.endFreeze(now)
			}
			c := sh.chunks[0]
			if len(sh.chunks) > 1 || len(c.pts) >= q.opts.MaxBatch || q.closing || now.Sub(c.t0) >= q.opts.MaxDelay {
				sh.chunks[0] = chunk{}
				sh.chunks = sh.chunks[1:]
				return c, true
			}
			wait = c.t0.Add(q.opts.MaxDelay).Sub(now)
		}
		q.mu.Unlock()
		if wait >= 0 {
			timer.Reset(wait)
		}
		select {
		case <-sh.wake:
		case <-timer.C:
		case <-q.kill.Done():
		}
		timer.Stop()
		q.mu.Lock()
	}
}

// write calls the Writer until it succeeds, backing off between attempts.
func (q *Queue) write(pts []model.Point) error {
	backoff := q.opts.RetryMin
	for {
		start := time.Now()
		err := q.w.Write(q.kill, pts)
		took := time.Since(start)
		q.mu.Lock()
		if err == nil {
			q.c.wrote(len(pts), took, time.Now())
			q.mu.Unlock()
			return nil
		}
		var pe *model.PointError
		if errors.As(err, &pe) && errors.Is(err, store.ErrKind) && pe.Index >= 0 && pe.Index < len(pts) {
			// A number for a tag the store holds as text can never be
			// written: it is dropped, counted and logged, the rest goes on.
			q.c.writeErrors++
			q.c.wrongKind++
			q.mu.Unlock()
			q.log.Warn("archive drops a number for a text tag", "tag", pe.Tag, "t", pts[pe.Index].T)
			pts = append(pts[:pe.Index:pe.Index], pts[pe.Index+1:]...)
			if len(pts) == 0 {
				return nil
			}
			continue
		}
		q.c.writeErrors++
		if now := time.Now(); now.Sub(q.lastWarn) >= warnEvery {
			q.lastWarn = now
			q.log.Warn("archive write failed; retrying", "points", len(pts), "err", err,
				"backoff", backoff, "errors_total", q.c.writeErrors)
		}
		q.mu.Unlock()
		select {
		case <-time.After(backoff):
		case <-q.kill.Done():
			return errKilled
		}
		backoff = min(2*backoff, q.opts.RetryMax)
	}
}

// Labeler is the store side of tag labels, implemented by *store.DB.
type Labeler interface {
	// SetLabels makes each series' labels durable; it is called from many
	// goroutines at once and must not keep series (it may keep the Labels
	// in it, which nobody modifies).
	SetLabels(ctx context.Context, series []model.Series) error
}

var _ Labeler = (*store.DB)(nil)

// errNoLabeler is returned by SetLabels when the queue's writer keeps no
// labels.
var errNoLabeler = errors.New("the archive keeps no labels")

// SetLabels hands tag labels to the store, which keeps them durably with
// its series (no queue: labels are rare, and the caller waits).
func (q *Queue) SetLabels(ctx context.Context, series []model.Series) error {
	l, ok := q.w.(Labeler)
	if !ok {
		return errNoLabeler
	}
	return l.SetLabels(ctx, series)
}
