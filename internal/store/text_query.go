package store

import (
	"fmt"
	"strconv"

	"github.com/pith-historian/pith/internal/model"
)

// TextBucket is one bucket of a text aggregate (first or last): its start
// and, when OK, the text and its quality.
type TextBucket struct {
	T    int64
	Text string
	Q    model.Quality
	OK   bool
}

// IsText reports whether the store holds tag as a text tag.
func (db *DB) IsText(tag string) bool {
	_, text := db.series.kindOf(tag)
	return text
}

// readTextRange appends the samples of a decoded chunk in [from, to) to a
// text series. A numeric chunk meets text only when a number raced the
// tag's first text (write.go); it is read as text.
func readTextRange(d *decodedChunk, from, to int64, out *runInput) {
	if out.xs == nil {
		out.asText()
	}
	for j, t := range d.ts {
		if t >= from && t < to {
			out.ts = append(out.ts, t)
			out.vs = append(out.vs, 0)
			out.qs = append(out.qs, model.Quality(d.qs[j]))
			if d.xs != nil {
				out.xs = append(out.xs, d.xs[j])
			} else {
				out.xs = append(out.xs, strconv.FormatFloat(d.vs[j], 'g', -1, 64))
			}
		}
	}
}

// checkText resolves a text tag for a text query.
func (db *DB) checkText(tag string, from, to int64) (uint32, error) {
	id, err := db.checkWindow(tag, from, to)
	if err != nil {
		return 0, err
	}
	if exists, text := db.series.kindOf(tag); exists && !text {
		return 0, fmt.Errorf("text of %q: %w", tag, ErrKind)
	}
	return id, nil
}

// RawText returns the stored values of text tag in [from, to) in time
// order, at most limit of them (all when limit <= 0).
func (db *DB) RawText(tag string, from, to int64, limit int) ([]model.TextSample, error) {
	id, err := db.checkText(tag, from, to)
	if err != nil {
		return nil, err
	}
	q := &query{db: db, id: id}
	base := runInput{xs: []string{}}
	db.mu.RLock()
	heads := db.headPieces(id, from, to)
	db.forPartitions(from, to, nil, func(p int64, runs []*runFile, _ []runInput) bool {
		for _, x := range daySeries(runs, id, from, to) {
			q.readRange(x.r, x.s, from, to, &base)
		}
		return limit <= 0 || len(heads) > 0 || len(base.ts) < limit
	})
	db.mu.RUnlock()
	base = overlay(base, heads)
	if q.err != nil {
		db.log.Warn("query skipped damaged data", "tag", tag, "err", q.err)
	}
	base.asText()
	n := len(base.ts)
	if limit > 0 && n > limit {
		n = limit
	}
	out := make([]model.TextSample, n)
	for i := range out {
		out[i] = model.TextSample{T: base.ts[i], Text: base.xs[i], Q: base.qs[i]}
	}
	return out, nil
}

// AggregateText splits [from, to) into n equal buckets and returns the
// first or last value of each, as Aggregate does for numbers (count of a
// text tag is Aggregate's). It reads one day of the tag at a time.
func (db *DB) AggregateText(tag string, from, to int64, n int, agg model.Agg) ([]TextBucket, error) {
	if agg != model.AggFirst && agg != model.AggLast {
		return nil, fmt.Errorf("aggregate %s of text tag %q: %w", agg, tag, model.ErrTextAgg)
	}
	if n < 1 || n > MaxBuckets {
		return nil, fmt.Errorf("bucket count %d out of range 1..%d", n, MaxBuckets)
	}
	id, err := db.checkText(tag, from, to)
	if err != nil {
		return nil, err
	}
	q := &query{db: db, id: id, bb: newBounds(from, to, n)}
	out := make([]TextBucket, n)
	for i := range out {
		out[i].T = q.bb.start(i)
	}
	db.mu.RLock()
	heads := db.headPieces(id, from, to)
	db.forPartitions(from, to, heads, func(p int64, runs []*runFile, hp []runInput) bool {
		day := runInput{xs: []string{}}
		for _, x := range daySeries(runs, id, from, to) {
			q.readRange(x.r, x.s, from, to, &day)
		}
		day = overlay(day, hp)
		day.asText()
		for i, t := range day.ts {
			if t < from || t >= to {
				continue
			}
			b := &out[q.bb.index(t)]
			if agg == model.AggLast || !b.OK {
				b.Text, b.Q, b.OK = day.xs[i], day.qs[i], true
			}
		}
		return true
	})
	db.mu.RUnlock()
	if q.err != nil {
		db.log.Warn("query skipped damaged data", "tag", tag, "err", q.err)
	}
	return out, nil
}
