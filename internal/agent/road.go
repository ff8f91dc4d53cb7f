package agent

import (
	"context"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/archive"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/sparkplug"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
	"github.com/pith-historian/pith/internal/tagseq"
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

// storedBatch is how many points of a committed import are applied to the
// tag table under one lock round.
const storedBatch = 4096

// road is what the import API and the push inputs write to: the one road
// of a value (docs/architecture.md, "The road of a value").
//
//   - Write (line protocol, emoncms, remote_write, MQTT, event counts)
//     hands the points to the tag table's Write: stored durably and
//     atomically through the archive, then applied to the table, whose
//     subscribers (live view, alarms, calculated tags, Modbus server) see
//     them exactly as they see acquired values.
//   - Begin (POST /api/v1/import) is the store's bulk transaction; once it
//     is committed each tag's newest point (the current value) is applied
//     to the table with Stored, so that a refused import reaches nobody.
//     Forwarders read imports from the store's log (store followers), not
//     from the table.
type road struct {
	api.Store
	db  *store.DB
	tab *tag.Table
}

var _ writer = (*road)(nil)

var _ api.TextQueries = (*road)(nil)

// RawText reads a text tag's values from the store.
func (r *road) RawText(tag string, from, to int64, limit int) ([]model.TextSample, error) {
	return r.db.RawText(tag, from, to, limit)
}

// AggregateText answers first or last of a text tag per bucket.
func (r *road) AggregateText(tag string, from, to int64, n int, agg model.Agg) ([]store.TextBucket, error) {
	return r.db.AggregateText(tag, from, to, n, agg)
}

func newRoad(db *store.DB, tab *tag.Table) *road {
	return &road{Store: api.WrapDB(db), db: db, tab: tab}
}

// Write is the road of pushed points.
func (r *road) Write(ctx context.Context, pts []model.Point) error {
	return r.tab.Write(ctx, pts, pushSource)
}

// SetLabels is the road of pushed labels: the tag table keeps them on the
// tags' definitions and hands them to the store, which keeps them with its
// series (ingest.Labeler).
func (r *road) SetLabels(ctx context.Context, series []model.Series) error {
	return r.tab.Label(ctx, series)
}

var (
	_ ingest.Labeler = (*road)(nil)
	_ tag.LabelSink  = (*archive.Queue)(nil)
)

// SetUnit keeps a pushed tag's engineering unit (Sparkplug B births
// declare them) in the tag table's metadata.
func (r *road) SetUnit(tag, unit string) error {
	return r.tab.SetUnit(tag, unit, pushSource)
}

// SetUnit passes a unit to the road: chains compute values, not units.
func (w processedWriter) SetUnit(tag, unit string) error {
	if us, ok := w.writer.(sparkplug.UnitSink); ok {
		return us.SetUnit(tag, unit)
	}
	return nil
}

var (
	_ sparkplug.UnitSink = (*road)(nil)
	_ sparkplug.UnitSink = processedWriter{}
)

// WriteMixed is the road of pushed numbers with text (line-protocol
// string fields), stored together.
func (r *road) WriteMixed(ctx context.Context, pts []model.Point, texts []model.TextPoint) error {
	return r.tab.WriteMixed(ctx, pts, texts, pushSource)
}

// Begin starts an import.
func (r *road) Begin() api.Tx {
	return &importTx{tx: r.db.Begin(), r: r, slot: make(map[string]int)}
}

// importTx is one import; like store.Tx it is used by one goroutine.
type importTx struct {
	tx *store.Tx
	r  *road

	newest []model.Point  // each tag's newest point, in the order first met
	tags   []string       // newest[i].Tag, apart: the guess compares names
	slot   map[string]int // a tag's index in newest
	guess  tagseq.Guess   // saves most lookups in slot
	texts  map[string]model.TextPoint
}

// AddText stages text rows; each text tag's newest value is kept for the
// table.
func (t *importTx) AddText(pts []model.TextPoint) error {
	if err := t.tx.AddText(pts); err != nil {
		return err
	}
	if t.texts == nil {
		t.texts = make(map[string]model.TextPoint)
	}
	for _, p := range pts {
		if n, ok := t.texts[p.Tag]; !ok || p.T >= n.T {
			t.texts[p.Tag] = p
		}
	}
	return nil
}

func (t *importTx) Add(pts []model.Point) error {
	if err := t.tx.Add(pts); err != nil {
		return err
	}
	t.keepNewest(pts)
	return nil
}

// keepNewest records each tag's newest point.
func (t *importTx) keepNewest(pts []model.Point) {
	for i := range pts {
		p := &pts[i]
		k, ok := t.guess.Next(t.tags, p.Tag)
		if !ok {
			j, seen := t.slot[p.Tag]
			if !seen {
				j = len(t.newest)
				t.slot[p.Tag] = j
				t.tags = append(t.tags, p.Tag)
				t.newest = append(t.newest, *p)
			}
			k = uint32(j)
			t.guess.Learn(k)
		}
		if n := &t.newest[k]; p.T >= n.T {
			*n = *p
		}
	}
}

// Commit commits the import, then applies each tag's newest point to the
// tag table.
func (t *importTx) Commit(ctx context.Context) error {
	defer t.release()
	if err := t.tx.Commit(ctx); err != nil {
		return err
	}
	t.stored(t.newest)
	if len(t.texts) > 0 {
		tpts := make([]model.TextPoint, 0, len(t.texts))
		for _, p := range t.texts {
			tpts = append(tpts, p)
		}
		t.r.tab.StoredText(tpts, importSource)
	}
	return nil
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

func (t *importTx) Rollback() {
	t.tx.Rollback()
	t.release()
}

func (t *importTx) release() {
	t.newest, t.tags, t.slot, t.texts = nil, nil, nil, nil
}
