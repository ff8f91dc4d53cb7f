package agent

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// writer is what the import API and the push inputs write to.
type writer interface {
	api.Store
	ingest.Sink
}

// pushSource is the tag-table source of the tags that push inputs create.
const pushSource = "push"

// importSource is the tag-table source of the tags that imports create.
const importSource = "import"

// spoolMemBytes is how many encoded bytes (about 11 per point) of one
// import are held in memory before the rest goes to a temporary file.
const spoolMemBytes = 8 << 20

// storedBatch is how many points of a committed import are applied to the
// tag table under one lock round.
const storedBatch = 4096

// road is what the import API and the push inputs write to: the one road
// of a value (docs/architecture.md, "The road of a value").
//
//   - Write (line protocol, emoncms, remote_write, MQTT, event counts)
//     hands the points to the tag table's Write: stored durably and
//     atomically through the archive, then applied to the table, whose
//     subscribers (live view, alarms, calculated tags, Modbus server,
//     forwarders) see them exactly as they see acquired values.
//   - Begin (POST /api/v1/import) is the store's bulk transaction; once it
//     is committed its points are applied to the table with Stored: every
//     point when a forwarder follows the table, else each tag's newest
//     (the current values). Until the commit they are held in memory, then
//     in a temporary file under spoolDir, so that a refused import reaches
//     nobody.
type road struct {
	api.Store
	db       *store.DB
	tab      *tag.Table
	spoolDir string
	memBytes int // spoolMemBytes but in tests
	log      *slog.Logger
}

var _ writer = (*road)(nil)

func newRoad(db *store.DB, tab *tag.Table, spoolDir string, log *slog.Logger) *road {
	return &road{Store: api.WrapDB(db), db: db, tab: tab, spoolDir: spoolDir, memBytes: spoolMemBytes, log: log}
}

// Write is the road of pushed points.
func (r *road) Write(ctx context.Context, pts []model.Point) error {
	return r.tab.Write(ctx, pts, pushSource)
}

// Begin starts an import.
func (r *road) Begin() api.Tx {
	return &importTx{tx: r.db.Begin(), r: r, every: r.tab.HasEvery(), newest: make(map[string]model.Point)}
}

// importTx is one import; like store.Tx it is used by one goroutine.
type importTx struct {
	tx    *store.Tx
	r     *road
	every bool // hold every point (a forwarder follows the table), not only the newest per tag

	newest map[string]model.Point // without every: each tag's newest point
	last   string                 // the tag of the previous point, to skip most map writes

	mem   [][]byte // with every: encoded batches held in memory
	bytes int
	f     *os.File // the rest, as uvarint length and batch, once mem is full
	w     *bufio.Writer
	err   error
}

func (t *importTx) Add(pts []model.Point) error {
	if err := t.tx.Add(pts); err != nil {
		return err
	}
	if t.err != nil || len(pts) == 0 {
		return t.err
	}
	if !t.every {
		t.keepNewest(pts)
		return nil
	}
	return t.spool(pts)
}

// keepNewest records each tag's newest point.
func (t *importTx) keepNewest(pts []model.Point) {
	for i := range pts {
		p := &pts[i]
		if p.Tag == t.last {
			if n := t.newest[p.Tag]; p.T >= n.T {
				t.newest[p.Tag] = *p
			}
			continue
		}
		if n, ok := t.newest[p.Tag]; !ok || p.T >= n.T {
			t.newest[p.Tag] = *p
		}
		t.last = p.Tag
	}
}

// spool holds pts until the commit.
func (t *importTx) spool(pts []model.Point) error {
	b := forward.EncodeBatch(0, pts)
	if t.f == nil && t.bytes+len(b) <= t.r.memBytes {
		t.mem = append(t.mem, b)
		t.bytes += len(b)
		return nil
	}
	if t.f == nil {
		if err := os.MkdirAll(t.r.spoolDir, 0o755); err != nil {
			return t.fail(fmt.Errorf("create import spool dir: %w", err))
		}
		f, err := os.CreateTemp(t.r.spoolDir, "import-*.spool")
		if err != nil {
			return t.fail(fmt.Errorf("create import spool: %w", err))
		}
		// Unlinked at once: the space comes back when the import ends,
		// even after a crash.
		os.Remove(f.Name())
		t.f, t.w = f, bufio.NewWriterSize(f, 1<<20)
	}
	var hdr [binary.MaxVarintLen64]byte
	if _, err := t.w.Write(hdr[:binary.PutUvarint(hdr[:], uint64(len(b)))]); err != nil {
		return t.fail(fmt.Errorf("write import spool: %w", err))
	}
	if _, err := t.w.Write(b); err != nil {
		return t.fail(fmt.Errorf("write import spool: %w", err))
	}
	return nil
}

// fail records a spool error; the import then fails rather than be
// stored without reaching the forwarders.
func (t *importTx) fail(err error) error {
	t.err = err
	return err
}

// Commit commits the import, then applies it to the tag table.
func (t *importTx) Commit(ctx context.Context) error {
	if t.err != nil {
		t.Rollback()
		return t.err
	}
	defer t.release()
	if err := t.tx.Commit(ctx); err != nil {
		return err
	}
	if !t.every {
		pts := make([]model.Point, 0, len(t.newest))
		for _, p := range t.newest {
			pts = append(pts, p)
		}
		t.stored(pts)
		return nil
	}
	var pts []model.Point
	for _, b := range t.mem {
		var err error
		if _, pts, err = forward.DecodeBatch(pts[:0], b); err != nil {
			return t.spoolLost(err)
		}
		t.stored(pts)
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
		t.stored(pts)
	}
}

// stored applies committed points to the table in batches, so that one
// large import does not hold the table's lock for long.
func (t *importTx) stored(pts []model.Point) {
	for len(pts) > 0 {
		n := min(len(pts), storedBatch)
		t.r.tab.Stored(pts[:n], importSource)
		pts = pts[n:]
	}
}

// spoolLost logs a spool that cannot be read back after the commit: the
// points are stored, so the import still succeeds.
func (t *importTx) spoolLost(err error) error {
	t.r.log.Error("read import spool: some imported values are stored but not forwarded", "err", err)
	return nil
}

func (t *importTx) Rollback() {
	t.tx.Rollback()
	t.release()
}

func (t *importTx) release() {
	t.mem, t.bytes, t.newest = nil, 0, nil
	if t.f != nil {
		t.f.Close()
		t.f, t.w = nil, nil
	}
}
