package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/ingest"
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
