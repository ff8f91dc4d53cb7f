package agent

// The writers the import API and the push inputs write through, wrapped
// in this order: the store (forwarding what it stored), the [[input]]
// chains and calculated tags, then the alarm engine watching what was
// written.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"sync"

	"github.com/pith-historian/pith/internal/alarm"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/process"
	"github.com/pith-historian/pith/internal/store"
)

// spoolMemBytes is how many encoded bytes (about 11 per point) of one
// import are held in memory before the rest goes to a temporary file.
const spoolMemBytes = 8 << 20

// writer is what the import API and the push inputs write to.
type writer interface {
	api.Store
	ingest.Sink
}

// forwardingStore is the store as the import API and the push inputs see
// it: after a write is durable in the store, its points are enqueued into
// every forwarder's queue. An import's points are held (in memory, then in
// a temporary file under spoolDir) until its commit, so that a refused
// import forwards nothing.
//
// A crash between the store's commit and the enqueue loses the forwarding
// of that one write (the store keeps it): the queue's own WAL is the only
// record a forwarder has.
type forwardingStore struct {
	api.Store
	db       *store.DB
	fw       *forwarders
	spoolDir string
	memBytes int // spoolMemBytes but in tests
}

var _ writer = (*forwardingStore)(nil)

// newWriter returns db itself without forwarders, else a forwardingStore
// (which passes writes straight through while a reload left no forwarder
// running).
func newWriter(db *store.DB, fw *forwarders, spoolDir string) writer {
	if fw == nil {
		return plainStore{api.WrapDB(db), db}
	}
	return &forwardingStore{Store: api.WrapDB(db), db: db, fw: fw, spoolDir: spoolDir, memBytes: spoolMemBytes}
}

// plainStore is the store without forwarding.
type plainStore struct {
	api.Store
	db *store.DB
}

func (s plainStore) Write(ctx context.Context, pts []model.Point) error { return s.db.Write(ctx, pts) }

// Write stores pts, then forwards them.
func (s *forwardingStore) Write(ctx context.Context, pts []model.Point) error {
	if err := s.db.Write(ctx, pts); err != nil {
		return err
	}
	s.fw.Enqueue(context.WithoutCancel(ctx), pts)
	return nil
}

// Begin starts an import whose points are forwarded once committed.
func (s *forwardingStore) Begin() api.Tx {
	if !s.fw.active() {
		return s.Store.Begin()
	}
	return &forwardingTx{tx: s.db.Begin(), s: s}
}

// forwardingTx is one import; like store.Tx it is used by one goroutine.
type forwardingTx struct {
	tx    *store.Tx
	s     *forwardingStore
	mem   [][]byte // encoded batches held in memory
	bytes int
	f     *os.File // the rest, as uvarint length and batch, once mem is full
	w     *bufio.Writer
	err   error
}

func (t *forwardingTx) Add(pts []model.Point) error {
	if err := t.tx.Add(pts); err != nil {
		return err
	}
	if t.err != nil || len(pts) == 0 {
		return t.err
	}
	b := forward.EncodeBatch(0, pts)
	if t.f == nil && t.bytes+len(b) <= t.s.memBytes {
		t.mem = append(t.mem, b)
		t.bytes += len(b)
		return nil
	}
	if t.f == nil {
		if err := os.MkdirAll(t.s.spoolDir, 0o755); err != nil {
			return t.fail(fmt.Errorf("create forward spool dir: %w", err))
		}
		f, err := os.CreateTemp(t.s.spoolDir, "import-*.spool")
		if err != nil {
			return t.fail(fmt.Errorf("create forward spool: %w", err))
		}
		// Unlinked at once: the space comes back when the import ends,
		// even after a crash.
		os.Remove(f.Name())
		t.f, t.w = f, bufio.NewWriterSize(f, 1<<20)
	}
	var hdr [binary.MaxVarintLen64]byte
	if _, err := t.w.Write(hdr[:binary.PutUvarint(hdr[:], uint64(len(b)))]); err != nil {
		return t.fail(fmt.Errorf("write forward spool: %w", err))
	}
	if _, err := t.w.Write(b); err != nil {
		return t.fail(fmt.Errorf("write forward spool: %w", err))
	}
	return nil
}

// fail records a spool error; the import then fails rather than be
// stored without being forwarded.
func (t *forwardingTx) fail(err error) error {
	t.err = err
	return err
}

func (t *forwardingTx) Commit(ctx context.Context) error {
	if t.err != nil {
		t.Rollback()
		return t.err
	}
	defer t.release()
	if err := t.tx.Commit(ctx); err != nil {
		return err
	}
	// The client's answer waits for the queues, but a client that goes
	// away must not cut the forwarding short.
	ctx = context.WithoutCancel(ctx)
	var pts []model.Point
	for _, b := range t.mem {
		var err error
		if _, pts, err = forward.DecodeBatch(pts[:0], b); err != nil {
			return fmt.Errorf("read forward spool: %w", err)
		}
		t.s.fw.Enqueue(ctx, pts)
	}
	if t.f == nil {
		return nil
	}
	if err := t.w.Flush(); err != nil {
		return t.spoolLost(err)
	}
	if _, err := t.f.Seek(0, io.SeekStart); err != nil {
		return t.spoolLost(err)
	}
	r := bufio.NewReaderSize(t.f, 1<<20)
	var b []byte
	for {
		n, err := binary.ReadUvarint(r)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return t.spoolLost(err)
		}
		if uint64(cap(b)) < n {
			b = make([]byte, n)
		}
		b = b[:n]
		if _, err := io.ReadFull(r, b); err != nil {
			return t.spoolLost(err)
		}
		if _, pts, err = forward.DecodeBatch(pts[:0], b); err != nil {
			return t.spoolLost(err)
		}
		t.s.fw.Enqueue(ctx, pts)
	}
}

// spoolLost logs a spool that cannot be read back after the commit: the
// points are stored, so the import still succeeds.
func (t *forwardingTx) spoolLost(err error) error {
	t.s.fw.log.Error("read forward spool: some imported values are stored but not forwarded", "err", err)
	return nil
}

func (t *forwardingTx) Rollback() {
	t.tx.Rollback()
	t.release()
}

func (t *forwardingTx) release() {
	t.mem, t.bytes = nil, 0
	if t.f != nil {
		t.f.Close()
		t.f, t.w = nil, nil
	}
}

// processedWriter is the writer the import API and the push inputs see
// when [[input]] chains or [[calc]] tags are configured:
//   - Write (push inputs: emoncms, line protocol, remote_write, MQTT) runs
//     the chains and stores their outputs in the same atomic write, then
//     hands what it wrote to the engine of calculated tags (which do not
//     see the push inputs in the tag table otherwise); points older than
//     their tag's newest sample are late and trigger a recompute as an
//     import does;
//   - Begin (POST /api/v1/import, a backfill) is not run through the
//     chains; once an import is committed, what depends on its tags
//     (their chains' outputs and the calculated tags reading them) is
//     recomputed from the store over the imported range.
type processedWriter struct {
	writer
	push   *process.Sink
	rc     *process.Recomputer
	log    *slog.Logger
	newest *newest
}

// newest is the newest time seen per tag with dependents, to tell late
// push samples; a tag's entry starts from the store's newest sample.
type newest struct {
	db *store.DB
	mu sync.Mutex
	t  map[string]int64
}

// late returns the spans of the points older than their tag's newest
// sample, and records the newer ones.
func (n *newest) late(rc *process.Recomputer, pts []model.Point) map[string]process.Range {
	var out map[string]process.Range
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range pts {
		if !rc.Affects(p.Tag) {
			continue
		}
		t, ok := n.t[p.Tag]
		if !ok {
			t = int64(math.MinInt64)
			if l, err := n.db.Latest(p.Tag); err == nil && len(l) == 1 {
				t = l[0].T
			}
		}
		if p.T >= t {
			n.t[p.Tag] = p.T
			continue
		}
		if out == nil {
			out = make(map[string]process.Range)
		}
		r, ok := out[p.Tag]
		if !ok {
			r = process.Range{From: p.T, To: p.T}
		}
		r.From, r.To = min(r.From, p.T), max(r.To, p.T)
		out[p.Tag] = r
	}
	return out
}

// Write runs the chains, stores inputs and outputs atomically, feeds the
// calculated tags (Sink.After) and recomputes what late points affect.
func (w processedWriter) Write(ctx context.Context, pts []model.Point) error {
	late := w.newest.late(w.rc, pts)
	if err := w.push.Write(ctx, pts); err != nil {
		return err
	}
	if len(late) > 0 {
		if n, err := w.rc.Recompute(ctx, late); err != nil {
			w.log.Warn("recompute after late push input", "err", err, "written", n)
		}
	}
	return nil
}

func (w processedWriter) Begin() api.Tx {
	return &recomputeTx{Tx: w.writer.Begin(), w: w, late: make(map[string]process.Range)}
}

// recomputeTx records the span of each staged tag that has dependents.
type recomputeTx struct {
	api.Tx
	w    processedWriter
	late map[string]process.Range
}

func (t *recomputeTx) Add(pts []model.Point) error {
	if err := t.Tx.Add(pts); err != nil {
		return err
	}
	for _, p := range pts {
		r, ok := t.late[p.Tag]
		if !ok {
			if !t.w.rc.Affects(p.Tag) {
				continue
			}
			r = process.Range{From: p.T, To: p.T}
		}
		r.From, r.To = min(r.From, p.T), max(r.To, p.T)
		t.late[p.Tag] = r
	}
	return nil
}

// Commit commits the import, then recomputes. A failed recompute is
// logged, not returned: the import itself is durable.
func (t *recomputeTx) Commit(ctx context.Context) error {
	if err := t.Tx.Commit(ctx); err != nil {
		return err
	}
	if len(t.late) == 0 {
		return nil
	}
	n, err := t.w.rc.Recompute(ctx, t.late)
	if err != nil {
		t.w.log.Warn("recompute after import", "err", err, "written", n)
		return nil
	}
	t.w.log.Info("recomputed after import", "tags", len(t.late), "points", n)
	return nil
}

// withInputChains wraps wr with the [[input]] chains and the import
// recompute; with neither chains nor calcs it returns wr unchanged.
// Running totals continue from the store's newest values.
func withInputChains(wr writer, cfg *config.Config, db *store.DB, eng *process.Engine, log *slog.Logger) (writer, error) {
	if len(cfg.Input) == 0 && len(cfg.Calc) == 0 {
		return wr, nil
	}
	push, err := process.NewSink(wr, cfg.Input, process.SeedFrom(db))
	if err != nil {
		return nil, err
	}
	if eng != nil {
		push.After = func(written []model.Point) { eng.Feed(written) }
	}
	rc, err := process.NewRecomputer(cfg.Input, cfg.Calc, db, wr, process.Linear, process.DefaultLookback)
	if err != nil {
		return nil, err
	}
	rc.Shift = push.Shift // a backfill moved a running total: the live chains follow
	return processedWriter{writer: wr, push: push, rc: rc, log: log.With("part", "process"),
		newest: &newest{db: db, t: make(map[string]int64)}}, nil
}

// wrapWriter lets the alarm engine e see the points the push inputs write
// (they reach the store without the tag table); nil e returns w. Imports
// are backfill and are not watched.
func wrapWriter(w writer, e *alarm.Engine) writer {
	if e == nil {
		return w
	}
	return alarmWriter{writer: w, alarms: e}
}

// alarmWriter passes written points to the alarm engine.
type alarmWriter struct {
	writer
	alarms *alarm.Engine
}

// Write stores pts, then lets the alarms judge them.
func (a alarmWriter) Write(ctx context.Context, pts []model.Point) error {
	if err := a.writer.Write(ctx, pts); err != nil {
		return err
	}
	a.alarms.ObservePoints(pts)
	return nil
}
