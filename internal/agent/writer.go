package agent

// The [[input]] chains of the push inputs, in front of the road
// (road.go), and the recompute of what late data and imports change.

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/archive"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/process"
	"github.com/pith-historian/pith/internal/store"
)

// processedWriter is the writer the import API and the push inputs see
// when [[input]] chains or [[calc]] tags are configured:
//   - Write (push inputs: emoncms, line protocol, remote_write, MQTT) runs
//     the chains and hands inputs and outputs to the road in one atomic
//     write (the calculated tags then see them in the tag table, as every
//     value); points older than their tag's newest sample are late and
//     trigger a recompute as an import does;
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
func withInputChains(wr writer, cfg *config.Config, db *store.DB, log *slog.Logger) (writer, error) {
	if len(cfg.Input) == 0 && len(cfg.Calc) == 0 {
		return wr, nil
	}
	push, err := process.NewSink(wr, cfg.Input, process.SeedFrom(db))
	if err != nil {
		return nil, err
	}
	rc, err := process.NewRecomputer(cfg.Input, cfg.Calc, db, wr, process.Linear, process.DefaultLookback)
	if err != nil {
		return nil, err
	}
	rc.Shift = push.Shift // a backfill moved a running total: the live chains follow
	return processedWriter{writer: wr, push: push, rc: rc, log: log.With("part", "process"),
		newest: &newest{db: db, t: make(map[string]int64)}}, nil
}

// WriteMixed stores a push request's numbers through the chains, then its
// text values (chains compute numbers only) on the road. With chains the
// two are separate writes: a request whose text is refused keeps its
// numbers (without chains the road stores both atomically).
func (w processedWriter) WriteMixed(ctx context.Context, pts []model.Point, texts []model.TextPoint) error {
	if err := w.Write(ctx, pts); err != nil || len(texts) == 0 {
		return err
	}
	ts, ok := w.writer.(ingest.TextSink)
	if !ok {
		return archive.ErrNoText
	}
	err := ts.WriteMixed(ctx, nil, texts)
	var pe *model.PointError
	if errors.As(err, &pe) {
		// The caller names the line by index: text follows the numbers.
		return &model.PointError{Index: len(pts) + pe.Index, Tag: pe.Tag, Err: pe.Err}
	}
	return err
}

// RawText and AggregateText read text from the road's store.
func (w processedWriter) RawText(tag string, from, to int64, limit int) ([]model.TextSample, error) {
	return w.writer.(api.TextQueries).RawText(tag, from, to, limit)
}

func (w processedWriter) AggregateText(tag string, from, to int64, n int, agg model.Agg) ([]store.TextBucket, error) {
	return w.writer.(api.TextQueries).AggregateText(tag, from, to, n, agg)
}

// AddText stages an import's text values; chains compute numbers only,
// so nothing is recomputed for them.
func (t *recomputeTx) AddText(pts []model.TextPoint) error {
	tt, ok := t.Tx.(api.TextTx)
	if !ok {
		return archive.ErrNoText
	}
	return tt.AddText(pts)
}

// SetLabels hands pushed labels to the writer behind the chains (the
// road keeps them): a Pith with calculated tags or input chains keeps its
// pushed labels too.
func (w processedWriter) SetLabels(ctx context.Context, series []model.Series) error {
	if l, ok := w.writer.(ingest.Labeler); ok {
		return l.SetLabels(ctx, series)
	}
	return nil
}

var _ ingest.Labeler = processedWriter{}
