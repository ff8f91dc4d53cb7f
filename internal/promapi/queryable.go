package promapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/pith-historian/pith/internal/model"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/util/annotations"

	"github.com/pith-historian/pith/internal/store"
)

// Store is what the PromQL layer reads from Pith's archive, as
// *store.DB implements it. Every method is called concurrently from many
// queries and must be safe for that.
type Store interface {
	// Aggregate splits [from, to) into n equal buckets and aggregates
	// each from the rollups (see docs/api.md, "Buckets").
	Aggregate(tag string, from, to int64, n int, agg model.Agg) ([]store.Bucket, error)
	// RawFunc hands fn at most limit stored samples in [from, to), in
	// time order, as arrays fn may read only while it runs.
	RawFunc(tag string, from, to int64, limit int, fn func(ts []int64, vs []float64, qs []model.Quality)) error
	// Tags lists the stored tags; the caller may not modify the slice.
	Tags() []store.TagInfo
}

var _ Store = (*store.DB)(nil)

// The series model (docs/api.md, "PromQL"): a tag whose labels hold
// __name__ (a remote_write series) is the series of exactly those labels,
// as Prometheus holds it. Every other tag is the series
// {__name__="<tag, every character outside [a-zA-Z0-9_:] replaced by _>",
// tag="<tag>"} plus its labels (a line-protocol tag's _measurement, _field
// and tag keys); the tag label keeps the exact name, so two tags whose
// metric names collide (a.b and a_b) stay two series. seriesLabels builds
// both forms (series_labels.go).
const (
	// TagLabel is the label holding the Pith tag name.
	TagLabel = "tag"
	// countLabel marks a selector rewritten from count_over_time to
	// sum_over_time: its series carry the sample count as values (see
	// rewriteCounts). It never reaches users.
	countLabel = "__pith_count__"
)

// MetricName returns the Prometheus metric name of a Pith tag.
func MetricName(tag string) string {
	ok := tag != "" && !(tag[0] >= '0' && tag[0] <= '9')
	for i := 0; ok && i < len(tag); i++ {
		ok = validNameChar(tag[i])
	}
	if ok {
		return tag
	}
	b := make([]byte, 0, len(tag)+1)
	if tag == "" || (tag[0] >= '0' && tag[0] <= '9') {
		b = append(b, '_')
	}
	for i := 0; i < len(tag); i++ {
		if c := tag[i]; validNameChar(c) {
			b = append(b, c)
		} else {
			b = append(b, '_')
		}
	}
	return string(b)
}

func validNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == ':'
}

// queryable serves the engine's reads from a Store.
type queryable struct {
	st   Store
	opts *Options
	// pushdown allows answering *_over_time windows from rollups. The
	// handler clears it for queries with subqueries, whose evaluation
	// steps the select hints do not describe.
	pushdown bool
	stats    *queryStats
}

// queryStats count how one query was answered, for tests and debug logs.
type queryStats struct {
	mu            sync.Mutex
	rollupSelects int
	rawSelects    int
	rawSamples    int
}

func (s *queryStats) add(rollup bool, raw int) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if rollup {
		s.rollupSelects++
	} else {
		s.rawSelects++
		s.rawSamples += raw
	}
	s.mu.Unlock()
}

var _ storage.Queryable = (*queryable)(nil)

// Querier returns a querier over [mint, maxt].
func (q *queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{q: q, mint: mint, maxt: maxt}, nil
}

type querier struct {
	q          *queryable
	mint, maxt int64
}

var _ storage.Querier = (*querier)(nil)

// matchingTags returns the series of the tags that match ms and whose
// data overlaps [mint, maxt], sorted by labels. count reports a countLabel
// matcher.
func matchingTags(st Store, mint, maxt int64, ms []*labels.Matcher) (out []match, count bool) {
	var rest []*labels.Matcher
	for _, m := range ms {
		if m.Name == countLabel {
			count = true
			continue
		}
		rest = append(rest, m)
	}
	for _, ti := range st.Tags() {
		if ti.Last < mint || ti.First > maxt {
			continue
		}
		if matches(ti.Name, ti.Labels, rest) {
			out = append(out, match{tag: ti.Name, lbls: seriesLabels(ti.Name, ti.Labels)})
		}
	}
	slices.SortFunc(out, func(a, b match) int { return labels.Compare(a.lbls, b.lbls) })
	return out, count
}

// countMatching returns how many tags match ms over [mint, maxt], without
// building their series (the memory estimate of a query needs no more).
func countMatching(st Store, mint, maxt int64, ms []*labels.Matcher) int {
	n := 0
	for _, ti := range st.Tags() {
		if ti.Last < mint || ti.First > maxt {
			continue
		}
		if matchesIgnoringCount(ti.Name, ti.Labels, ms) {
			n++
		}
	}
	return n
}

// match is one tag and its series labels.
type match struct {
	tag  string
	lbls labels.Labels
}

// Select returns the series of the matching tags. Their samples are read
// when the engine iterates the set, one tag at a time.
func (qr *querier) Select(ctx context.Context, _ bool, hints *storage.SelectHints, ms ...*labels.Matcher) storage.SeriesSet {
	mint, maxt := qr.mint, qr.maxt
	if hints != nil {
		mint, maxt = hints.Start, hints.End
	}
	tags, count := matchingTags(qr.q.st, mint, maxt, ms)
	plan := qr.q.plan(hints, count)
	return &seriesSet{ctx: ctx, q: qr.q, tags: tags, count: count, plan: plan, mint: mint, maxt: maxt}
}

// LabelValues returns the values of name over the matching series, sorted.
func (qr *querier) LabelValues(_ context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return labelValues(qr.q.st, qr.mint, qr.maxt, name, labelLimit(hints), ms), nil, nil
}

func labelValues(st Store, mint, maxt int64, name string, limit int, ms []*labels.Matcher) []string {
	tags, _ := matchingTags(st, mint, maxt, ms)
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if v := t.lbls.Get(name); v != "" {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// LabelNames returns the label names of the matching series, sorted.
func (qr *querier) LabelNames(_ context.Context, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	tags, _ := matchingTags(qr.q.st, qr.mint, qr.maxt, ms)
	out := labelNames(tags)
	if l := labelLimit(hints); l > 0 && len(out) > l {
		out = out[:l]
	}
	return out, nil, nil
}

// labelNames returns the sorted union of the label names of ms.
func labelNames(ms []match) []string {
	seen := map[string]struct{}{}
	for _, m := range ms {
		m.lbls.Range(func(l labels.Label) { seen[l.Name] = struct{}{} })
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func labelLimit(h *storage.LabelHints) int {
	if h == nil {
		return 0
	}
	return h.Limit
}

// Close releases nothing: a querier holds no store resources.
func (qr *querier) Close() error { return nil }

// errTooManySamples says a raw read hit Options.MaxRawSamples.
var errTooManySamples = errors.New("too many samples")

func rawLimitError(tag string, limit int) error {
	return fmt.Errorf("read %q: %w: more than %d raw samples in the window; "+
		"use avg_over_time(...[$__interval]) or a shorter range", tag, errTooManySamples, limit)
}
