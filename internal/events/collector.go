package events

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/pith-historian/pith/internal/clock"
	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
)

// Defaults of Options.
const (
	DefaultSegmentSize      = 16 << 20         // bytes per WAL segment; delivered segments are deleted whole
	DefaultMaxQueueBytes    = 8 << 20          // acknowledged bytes in memory not yet written to the sink
	DefaultMaxInflightBytes = 16 << 20         // request bodies being read at once
	DefaultMaxRequestBytes  = 4 << 20          // one request body
	DefaultMaxEvents        = 10000            // events in one request
	DefaultDedupWindow      = 10 * time.Minute // how long an id is remembered
	DefaultMaxDedupIDs      = 1 << 20          // ids remembered at most; the oldest go first
	DefaultDedupWALBytes    = 1 << 30          // delivered WAL bytes kept at most for confirming duplicates
	DefaultGzipLevel        = gzip.BestSpeed   // sink compression: on a Pi, CPU is scarcer than disk
	DefaultRotateEvery      = time.Minute      // age of a sink file before it is closed
	DefaultMaxFileBytes     = 64 << 20         // uncompressed bytes of a sink file before it is closed
	DefaultRetryMin         = 100 * time.Millisecond
	DefaultRetryMax         = 30 * time.Second
	DefaultDrainTimeout     = 10 * time.Second // how long Close retries a failing sink
	DefaultRecentEvents     = 10000            // events kept for GET /api/v1/events
	DefaultRetryAfter       = time.Second      // Retry-After of a 503
	DefaultBacklogEvery     = 10 * time.Second // period of Options.OnBacklog
)

// Options configure a Collector.
type Options struct {
	FS                  vfs.FS                                           // filesystem; nil means the real one
	Durability          wal.Durability                                   // when an acknowledgement is sent
	SegmentSize         int64                                            // WAL segment size
	MaxQueueBytes       int64                                            // over it, POST answers 503
	MaxInflightBytes    int64                                            // over it, POST answers 503 before reading
	MaxRequestBytes     int64                                            // larger bodies get 413
	MaxEventsPerRequest int                                              // more events get 400
	DedupWindow         time.Duration                                    // duplicates by id within it are dropped
	MaxDedupIDs         int                                              // bound on remembered ids
	DedupMemory         int64                                            // bound on the bytes remembering ids and signatures takes
	DedupWALBytes       int64                                            // bound on the delivered WAL segments kept for the dedup window
	RotateEvery         time.Duration                                    // sink file age limit
	MaxFileBytes        int64                                            // sink file size limit (uncompressed)
	GzipLevel           int                                              // gzip level of sink files (1 fastest .. 9 smallest)
	Format              string                                           // sink file format: FormatNDJSON (default) or FormatCSV
	Compression         string                                           // sink file compression: CompressGzip (default) or CompressZstd
	Upload              Uploader                                         // when set, complete files are uploaded and then deleted locally
	OnBacklog           func(now time.Time, b Backlog)                   // called every BacklogEvery with what is not in its final place yet; may be nil
	BacklogEvery        time.Duration                                    // period of OnBacklog
	RetryMin            time.Duration                                    // first sink retry delay
	RetryMax            time.Duration                                    // longest sink retry delay
	DrainTimeout        time.Duration                                    // Close gives up on a failing sink after it
	RecentEvents        int                                              // events in the in-memory ring served by GET (fewer when their lines average over 512 bytes)
	RetryAfter          time.Duration                                    // sent with 503
	OnCounts            func(minute time.Time, counts map[string]uint64) // per-name counts of each minute; may be nil
	Secret              []byte                                           // HMAC-SHA256 key for SignatureHeader; nil disables signatures
	RequireSignature    bool                                             // refuse POSTs without a good signature (else unsigned ones pass to the caller's auth)
	Now                 func() time.Time                                 // clock; nil means time.Now

	dedupHash func(seed maphash.Seed, id []byte) uint64 // the dedup table's hash; nil means maphash.Bytes (tests force collisions)
}

// DefaultOptions returns the options of a collector acknowledging after
// fsync on the real filesystem.
func DefaultOptions() Options {
	return Options{
		FS:                  vfs.OS{},
		Durability:          wal.DurabilityFsync,
		SegmentSize:         DefaultSegmentSize,
		MaxQueueBytes:       DefaultMaxQueueBytes,
		MaxInflightBytes:    DefaultMaxInflightBytes,
		MaxRequestBytes:     DefaultMaxRequestBytes,
		MaxEventsPerRequest: DefaultMaxEvents,
		DedupWindow:         DefaultDedupWindow,
		MaxDedupIDs:         DefaultMaxDedupIDs,
		DedupMemory:         DefaultDedupMemory,
		DedupWALBytes:       DefaultDedupWALBytes,
		RotateEvery:         DefaultRotateEvery,
		MaxFileBytes:        DefaultMaxFileBytes,
		GzipLevel:           DefaultGzipLevel,
		Format:              FormatNDJSON,
		Compression:         CompressGzip,
		BacklogEvery:        DefaultBacklogEvery,
		RetryMin:            DefaultRetryMin,
		RetryMax:            DefaultRetryMax,
		DrainTimeout:        DefaultDrainTimeout,
		RecentEvents:        DefaultRecentEvents,
		RetryAfter:          DefaultRetryAfter,
	}
}

// fill replaces zero fields with defaults.
func (o *Options) fill() {
	d := DefaultOptions()
	if o.FS == nil {
		o.FS = d.FS
	}
	setDefault(&o.SegmentSize, d.SegmentSize)
	setDefault(&o.MaxQueueBytes, d.MaxQueueBytes)
	setDefault(&o.MaxInflightBytes, d.MaxInflightBytes)
	setDefault(&o.MaxRequestBytes, d.MaxRequestBytes)
	setDefault(&o.MaxEventsPerRequest, d.MaxEventsPerRequest)
	setDefault(&o.DedupWindow, d.DedupWindow)
	setDefault(&o.MaxDedupIDs, d.MaxDedupIDs)
	setDefault(&o.DedupMemory, d.DedupMemory)
	setDefault(&o.DedupWALBytes, d.DedupWALBytes)
	setDefault(&o.RotateEvery, d.RotateEvery)
	setDefault(&o.MaxFileBytes, d.MaxFileBytes)
	if o.GzipLevel < gzip.BestSpeed || o.GzipLevel > gzip.BestCompression {
		o.GzipLevel = d.GzipLevel
	}
	if o.Format == "" {
		o.Format = d.Format
	}
	if o.Compression == "" {
		o.Compression = d.Compression
	}
	setDefault(&o.BacklogEvery, d.BacklogEvery)
	setDefault(&o.RetryMin, d.RetryMin)
	setDefault(&o.RetryMax, d.RetryMax)
	setDefault(&o.DrainTimeout, d.DrainTimeout)
	setDefault(&o.RecentEvents, d.RecentEvents)
	setDefault(&o.RetryAfter, d.RetryAfter)
	if o.Now == nil {
		o.Now = time.Now
	}
}

func setDefault[T int | int64 | time.Duration](p *T, d T) {
	if *p <= 0 {
		*p = d
	}
}

// Stats are the collector's counters for diagnostics.
type Stats struct {
	Accepted       uint64    // events acknowledged
	Duplicates     uint64    // events dropped as duplicates by id
	Rejected       uint64    // requests refused as invalid (400, 413)
	Overloaded     uint64    // requests refused for lack of memory or while closing (503)
	Delivered      uint64    // WAL records delivered to the sink (and cursor saved)
	Files          uint64    // sink files written
	SinkErrors     uint64    // failed sink attempts (each retried)
	Uploaded       uint64    // files uploaded (and deleted locally)
	UploadErrors   uint64    // failed upload passes (each retried)
	Backlog        Backlog   // acknowledged, not in the final place yet
	BacklogBytes   int64     // acknowledged bytes in memory not yet delivered
	BacklogRecords int       // acknowledged records in memory not yet delivered
	DedupIDs       int       // ids (and signatures) remembered for dedup
	DedupBytes     int64     // memory the remembered ids take (outside the Go heap on Unix)
	WAL            wal.Stats // the durable queue's counters
}

// queued is a WAL record waiting for the sink.
type queued struct {
	pos wal.Pos
	rec []byte // header and NDJSON lines, as in the WAL
}

// Collector accepts events, keeps them in a WAL until its file sink has
// them, and serves the recent ones. All methods are safe for concurrent
// use.
type Collector struct {
	dir  string
	opts Options
	log  *slog.Logger
	wal  *wal.WAL
	sink *fileSink

	// mu guards the fields below. It is held across wal.Append, and
	// across the reads (and the rare Sync) that confirm a duplicate, so
	// that the WAL order, the queue order and the dedup decisions agree.
	mu         sync.Mutex
	closed     bool
	ids        *idTable  // client ids of the dedup window
	sigs       *sigTable // signatures of signed requests of the window
	lastPos    wal.Pos   // the last record appended
	readBuf    []byte    // a record read back to confirm a duplicate
	queue      []queued  // appended, not yet written to the sink, in WAL order
	spare      []queued  // the sink loop's emptied queue, for reuse
	queueBytes int64
	sinceWake  int // record bytes appended since the sink was last woken
	recent     ring
	counts     map[string]uint64
	countMin   int64 // the minute (Unix ms) counts are for

	inflight atomic.Int64 // bytes of request bodies being read

	// names holds the event names counted in the last complete minute,
	// each mapped to itself, so that decoding a known name costs no
	// allocation. Replaced whole by flushCounts; read without mu.
	names   atomic.Pointer[map[string]string]
	batches sync.Pool // *batch, reused across requests

	backlogEvents atomic.Int64  // events acknowledged and not yet in a complete sink file
	committedSeq  atomic.Uint64 // the cursor's Seq: files numbered up to it are recorded

	// The uploader's state (Options.Upload).
	upMu     sync.Mutex
	pending  []pendingFile // complete files not yet uploaded, oldest first
	upNotify chan struct{} // wakes the upload loop; buffered 1
	upStop   chan struct{} // closed by Close after the sink loop ended
	upDone   chan struct{}

	notify   chan struct{} // wakes the sink loop; buffered 1
	stop     chan struct{} // closed by Close
	sinkDone chan struct{}
	tickDone chan struct{}

	// The sink loop's own state.
	inFile lostRange // this run's queue records in the open sink file
	lost   lostRange // records of a dropped file, to write again from the WAL

	stats struct {
		accepted, dups, rejected, overloaded, delivered, files, sinkErrors, uploaded, uploadErrors atomic.Uint64
	}
}

// sinkWakeBytes is how many record bytes accept appends before it wakes
// the sink loop, which otherwise delivers on its ticker.
const sinkWakeBytes = 256 << 10

// recHeaderSize is the bytes before the NDJSON lines in a WAL record: the
// arrival time in Unix ms, little endian.
const recHeaderSize = 8

// New opens (or creates) the collector in dir: it opens the WAL, rebuilds
// the dedup map and the recent ring from the records not yet delivered,
// and starts the sink loop, which first delivers that backlog.
func New(dir string, opts Options, log *slog.Logger) (*Collector, error) {
	opts.fill()
	if opts.Format != FormatNDJSON && opts.Format != FormatCSV {
		return nil, fmt.Errorf("events sink format %q: want %q or %q", opts.Format, FormatNDJSON, FormatCSV)
	}
	if opts.Compression != CompressGzip && opts.Compression != CompressZstd {
		return nil, fmt.Errorf("events sink compression %q: want %q or %q", opts.Compression, CompressGzip, CompressZstd)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "events")
	if opts.SegmentSize > math.MaxUint32 {
		// The dedup table keeps a record's offset in 32 bits.
		return nil, fmt.Errorf("events wal segment size %d: at most %d", opts.SegmentSize, int64(math.MaxUint32))
	}
	wo := wal.DefaultOptions()
	wo.FS = opts.FS
	wo.Durability = opts.Durability
	wo.SegmentSize = opts.SegmentSize
	// The canonical form can be several times the body (an assigned id
	// and time, "<" escaped as six bytes), so leave ample room.
	wo.MaxRecordSize = int(opts.MaxRequestBytes)*16 + recHeaderSize
	w, err := wal.Open(filepath.Join(dir, "wal"), wo, log)
	if err != nil {
		return nil, fmt.Errorf("open events wal: %w", err)
	}
	sink, err := newFileSink(opts.FS, dir, opts, log)
	if err != nil {
		w.Close()
		return nil, err
	}
	c := &Collector{
		dir:      dir,
		opts:     opts,
		log:      log,
		wal:      w,
		sink:     sink,
		ids:      newIDTable(idTableCap(opts.DedupMemory-opts.DedupMemory/sigMemoryShare, opts.MaxDedupIDs)),
		sigs:     newSigTable(int(opts.DedupMemory / sigMemoryShare / sigKeyBytes)),
		recent:   newRing(opts.RecentEvents),
		counts:   map[string]uint64{},
		notify:   make(chan struct{}, 1),
		stop:     make(chan struct{}),
		sinkDone: make(chan struct{}),
		tickDone: make(chan struct{}),
		upNotify: make(chan struct{}, 1),
		upStop:   make(chan struct{}),
		upDone:   make(chan struct{}),
	}
	if opts.dedupHash != nil {
		c.ids.hash = opts.dedupHash
	}
	c.committedSeq.Store(sink.cursor.Seq)
	if err := c.rebuild(); err != nil {
		w.Close()
		return nil, err
	}
	go c.sinkLoop()
	go c.tickLoop()
	if opts.Upload != nil {
		go c.uploadLoop()
	} else {
		close(c.upDone)
	}
	return c, nil
}

// rebuild reads every record left in the WAL (the undelivered ones and
// the delivered ones whose segment is not deleted yet) to remember their
// ids (those within the dedup window) and to refill the recent ring.
func (c *Collector) rebuild() error {
	now := c.opts.Now().UnixMilli()
	window := c.opts.DedupWindow.Milliseconds()
	n := 0
	err := c.wal.Replay(wal.Pos{}, func(pos, _ wal.Pos, rec []byte) error {
		if len(rec) < recHeaderSize {
			return fmt.Errorf("decode events record at %v: %d bytes", pos, len(rec))
		}
		arrival := int64(binary.LittleEndian.Uint64(rec))
		undelivered := !c.sink.cursor.Valid || c.sink.cursor.Pos.Less(pos)
		for line := range bytes.Lines(rec[recHeaderSize:]) {
			if undelivered {
				c.backlogEvents.Add(1)
			}
			// Only the id is needed, as the line writes it. Assigned ids
			// cannot be told from client ids here, so they are
			// remembered too, until the window ends.
			id, ok := lineID(line)
			if !ok {
				return fmt.Errorf("decode event at %v: no id at the start of %.40q", pos, line)
			}
			if arrival+window > now {
				c.ids.add(c.ids.sum(id), pos, arrival+window)
			}
			c.recent.add(bytes.TrimSuffix(line, []byte{'\n'}))
			n++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("replay events wal: %w", err)
	}
	if n > 0 {
		c.log.Info("events wal replayed", "events", n, "remembered_ids", c.ids.len())
	}
	return nil
}

// Errors of Accept.
var (
	// ErrOverloaded means the memory bound is reached: retry later.
	ErrOverloaded = errors.New("event collector overloaded")
	// ErrClosed means the collector is closing or closed.
	ErrClosed = errors.New("event collector closed")
)

// Accept makes evs durable, dropping those whose id was seen within the
// dedup window (also within evs), and returns how many were new and how
// many were duplicates. When it returns nil every event of evs is
// durable (the duplicates' originals too). arrival is the Unix ms time of
// the request. It returns ErrOverloaded or ErrClosed without storing
// anything.
func (c *Collector) Accept(ctx context.Context, evs []Event, arrival int64) (accepted, dups int, err error) {
	b := c.getBatch()
	defer c.putBatch(b)
	b.addEvents(evs)
	return c.accept(ctx, b, arrival, "")
}

// getBatch returns an empty batch, reused when one is free.
func (c *Collector) getBatch() *batch {
	b, ok := c.batches.Get().(*batch)
	if !ok {
		b = &batch{}
	}
	b.reset()
	return b
}

// putBatch lets the next request reuse b, unless it grew large.
func (c *Collector) putBatch(b *batch) {
	if cap(b.buf) <= maxPooledBatch && cap(b.raw) <= maxPooledBatch {
		b.reset() // not to keep the request's strings alive
		c.batches.Put(b)
	}
}

// accept makes the events of b durable: it is Accept for a batch, the
// one path of every event. The WAL record is b.buf minus the lines of
// the duplicates, with the arrival time in its header. A non-empty
// sigKey names a signed request, whose repetition within the dedup
// window is answered as all duplicates (a client's retry or an
// attacker's replay alike).
func (c *Collector) accept(ctx context.Context, b *batch, arrival int64, sigKey string) (accepted, dups int, err error) {
	evs := b.evs
	binary.LittleEndian.PutUint64(b.buf, uint64(arrival))
	exp := arrival + c.opts.DedupWindow.Milliseconds()
	// Duplicates inside the request depend on nothing shared, so they
	// are found before taking the lock, and so are the hashes.
	dup := requestDups(evs)
	b.hashes = slices.Grow(b.hashes[:0], len(evs))[:len(evs)]
	start := recHeaderSize
	for i := range evs {
		if !evs[i].assigned {
			id, _ := lineID(b.buf[start:evs[i].end])
			b.hashes[i] = c.ids.sum(id)
		}
		start = evs[i].end
	}
	var sig *[32]byte
	if sigKey != "" {
		k := sha256.Sum256([]byte(sigKey))
		sig = &k
	}
	// The record is a copy, made outside the lock, because b is reused
	// once accept returns while the record stays in the queue until
	// delivered; its exact size also keeps the queue's memory what
	// queueBytes counts.
	rec := bytes.Clone(b.buf)

	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, 0, ErrClosed
	}
	if c.queueBytes+int64(len(b.buf)) > c.opts.MaxQueueBytes && len(c.queue) > 0 {
		c.mu.Unlock()
		return 0, 0, ErrOverloaded
	}
	var waitFor wal.Pos
	replayed := false
	if sig != nil {
		waitFor, replayed = c.sigs.get(*sig, arrival)
	}
	start = recHeaderSize
	for i := range evs {
		line := b.buf[start:evs[i].end]
		start = evs[i].end
		if dup != nil && dup[i] {
			continue // a duplicate within the request
		}
		var at wal.Pos
		ok := false
		if !evs[i].assigned {
			id, _ := lineID(line)
			at, ok = c.duplicate(b.hashes[i], id, arrival)
		}
		if !replayed && !ok {
			continue
		}
		if dup == nil {
			dup = make([]bool, len(evs))
		}
		dup[i] = true
		if ok && waitFor.Less(at) {
			waitFor = at
		}
	}
	for i := range dup {
		if dup[i] {
			dups++
		}
	}
	accepted = len(evs) - dups
	var pos wal.Pos
	if accepted > 0 {
		if dups > 0 {
			// Cut the duplicates out of the copy.
			n, start := recHeaderSize, recHeaderSize
			for i := range evs {
				if !dup[i] {
					n += copy(rec[n:], b.buf[start:evs[i].end])
				}
				start = evs[i].end
			}
			rec = rec[:n]
		}
		var err error
		pos, err = c.wal.Append(rec)
		if err != nil {
			c.mu.Unlock()
			return 0, 0, fmt.Errorf("append events: %w", err)
		}
		if waitFor.Less(pos) {
			waitFor = pos
		}
		c.lastPos = pos
		c.queue = append(c.queue, queued{pos: pos, rec: rec})
		c.queueBytes += int64(len(rec))
		if sig != nil {
			c.sigs.add(*sig, pos, arrival+max(c.opts.DedupWindow, 2*SignatureWindow).Milliseconds())
		}
		c.backlogEvents.Add(int64(accepted))
		start := recHeaderSize
		for i := range evs {
			line := b.buf[start : evs[i].end-1] // without its '\n'
			start = evs[i].end
			if dup != nil && dup[i] {
				continue
			}
			if !evs[i].assigned {
				c.ids.add(b.hashes[i], pos, exp)
			}
			c.recent.add(line)
			// Counted by arrival into the open minute; the ticker hands
			// a minute out within a second of its end, so an event may
			// land in the minute before its arrival by up to a second.
			c.counts[evs[i].name]++
		}
	}
	// The sink is woken once per sinkWakeBytes, not per request: the
	// records are durable in the WAL already, and its ticker delivers
	// the rest; waking it for every small request costs more than the
	// delivery.
	wake := false
	if accepted > 0 {
		c.sinceWake += len(rec)
		if c.sinceWake >= sinkWakeBytes {
			c.sinceWake, wake = 0, true
		}
	}
	c.mu.Unlock()
	if wake {
		select {
		case c.notify <- struct{}{}:
		default:
		}
	}
	if waitFor != (wal.Pos{}) {
		if err := c.wal.Sync(ctx, waitFor); err != nil {
			if accepted > 0 && wal.IsNoSpace(err) {
				c.unremember(b, dup, sig, pos)
			}
			return 0, 0, fmt.Errorf("sync events: %w", err)
		}
	}
	c.stats.accepted.Add(uint64(accepted))
	c.stats.dups.Add(uint64(dups))
	return accepted, dups, nil
}

// requestDups marks the events whose client id an earlier event of the
// same request has; it returns nil when there are none.
func requestDups(evs []canonEvent) []bool {
	n := 0
	for i := range evs {
		if !evs[i].assigned {
			n++
		}
	}
	if n < 2 {
		return nil
	}
	var dup []bool
	mark := func(i int) {
		if dup == nil {
			dup = make([]bool, len(evs))
		}
		dup[i] = true
	}
	if n <= smallRequest {
		// Comparing each id with the ones before it costs less than a
		// map for a few ids.
		for i := range evs {
			if evs[i].assigned {
				continue
			}
			for j := range i {
				if !evs[j].assigned && evs[j].id == evs[i].id {
					mark(i)
					break
				}
			}
		}
		return dup
	}
	seen := make(map[string]struct{}, n)
	for i := range evs {
		if evs[i].assigned {
			continue
		}
		if _, ok := seen[evs[i].id]; ok {
			mark(i)
			continue
		}
		seen[evs[i].id] = struct{}{}
	}
	return dup
}

// smallRequest is the count of client ids up to which requestDups
// compares them pairwise rather than through a map.
const smallRequest = 16

// tickLoop hands out per-minute counts and forgets expired ids.
func (c *Collector) tickLoop() {
	defer close(c.tickDone)
	t := clock.NewAligned(time.Second)
	defer t.Stop()
	var lastBacklog time.Time
	for {
		select {
		case <-c.stop:
			c.flushCounts(true)
			return
		case <-t.C:
			t.Next()
			if c.opts.OnBacklog != nil {
				if now := c.opts.Now(); now.Sub(lastBacklog) >= c.opts.BacklogEvery {
					lastBacklog = now
					c.opts.OnBacklog(now, c.Backlog())
				}
			}
			now := c.opts.Now().UnixMilli()
			c.mu.Lock()
			c.ids.expire(now)
			c.sigs.expire(now, false)
			c.mu.Unlock()
			c.flushCounts(false)
		}
	}
}

// flushCounts hands the counts of the minute that ended (or, at close, of
// the current one) to OnCounts.
func (c *Collector) flushCounts(final bool) {
	now := c.opts.Now().UnixMilli()
	minute := now - now%60000
	c.mu.Lock()
	if c.countMin == 0 {
		c.countMin = minute
	}
	if minute == c.countMin && !final {
		c.mu.Unlock()
		return
	}
	counts, at := c.counts, c.countMin
	c.counts, c.countMin = map[string]uint64{}, minute
	c.mu.Unlock()
	// The names of the minute that ended are most likely those of the
	// next one. Built before OnCounts gets counts, which it may keep.
	names := make(map[string]string, len(counts))
	for k := range counts {
		names[k] = k
	}
	c.names.Store(&names)
	if c.opts.OnCounts != nil && len(counts) > 0 {
		c.opts.OnCounts(time.UnixMilli(at).UTC(), counts)
	}
}

// Close stops accepting events, delivers what is queued to the sink
// (retrying for at most DrainTimeout; anything left stays in the WAL for
// the next start), hands out the last counts and closes the WAL.
func (c *Collector) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	c.closed = true
	c.mu.Unlock()
	close(c.stop)
	<-c.sinkDone
	<-c.tickDone
	close(c.upStop)
	<-c.upDone
	// Nothing reads the dedup tables any more; the id table's memory may
	// be outside the Go heap, so it is given back here.
	c.mu.Lock()
	c.ids.release()
	c.mu.Unlock()
	if cl, ok := c.opts.Upload.(interface{ Close() }); ok {
		cl.Close()
	}
	if err := c.wal.Close(); err != nil {
		return fmt.Errorf("close events wal: %w", err)
	}
	return nil
}

// Stats returns the counters.
func (c *Collector) Stats() Stats {
	c.mu.Lock()
	s := Stats{BacklogBytes: c.queueBytes, BacklogRecords: len(c.queue), DedupIDs: c.ids.len() + len(c.sigs.seen), DedupBytes: c.ids.memory()}
	c.mu.Unlock()
	s.Accepted = c.stats.accepted.Load()
	s.Duplicates = c.stats.dups.Load()
	s.Rejected = c.stats.rejected.Load()
	s.Overloaded = c.stats.overloaded.Load()
	s.Delivered = c.stats.delivered.Load()
	s.Files = c.stats.files.Load()
	s.SinkErrors = c.stats.sinkErrors.Load()
	s.Uploaded = c.stats.uploaded.Load()
	s.UploadErrors = c.stats.uploadErrors.Load()
	s.Backlog = c.Backlog()
	s.WAL = c.wal.Stats()
	return s
}
