package promapi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// Raw returns at most limit stored samples in [from, to), in time order.
	Raw(tag string, from, to int64, limit int) ([]model.Sample, error)
	// Tags lists the stored tags; the caller may not modify the slice.
	Tags() []store.TagInfo
}

var _ Store = (*store.DB)(nil)

// The series model: every Pith tag is one series
// {__name__="<tag, every character outside [a-zA-Z0-9_:] replaced by _>",
// tag="<tag>"}. The tag label keeps the exact name, so two tags whose
// metric names collide (a.b and a_b) stay two series.
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

// seriesLabels returns the labels of tag's series.
func seriesLabels(tag string) labels.Labels {
	return labels.FromStrings(labels.MetricName, MetricName(tag), TagLabel, tag)
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

// matchingTags returns the tags whose series match ms and whose data
// overlaps [mint, maxt], sorted by series labels. count reports a
// countLabel matcher.
func matchingTags(st Store, mint, maxt int64, ms []*labels.Matcher) (tags []string, count bool) {
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
		if matches(ti.Name, rest) {
			tags = append(tags, ti.Name)
		}
	}
	// Series order is by labels: metric name first, then the tag.
	slices.SortFunc(tags, func(a, b string) int {
		if c := strings.Compare(MetricName(a), MetricName(b)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return tags, count
}

// matches reports whether tag's series satisfies every matcher; a label
// the series lacks has the empty value, as in Prometheus.
func matches(tag string, ms []*labels.Matcher) bool {
	for _, m := range ms {
		var v string
		switch m.Name {
		case labels.MetricName:
			v = MetricName(tag)
		case TagLabel:
			v = tag
		}
		if !m.Matches(v) {
			return false
		}
	}
	return true
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

// LabelValues returns the values of name (__name__ or tag) over the
// matching series, sorted.
func (qr *querier) LabelValues(_ context.Context, name string, hints *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return labelValues(qr.q.st, qr.mint, qr.maxt, name, labelLimit(hints), ms), nil, nil
}

func labelValues(st Store, mint, maxt int64, name string, limit int, ms []*labels.Matcher) []string {
	if name != labels.MetricName && name != TagLabel {
		return []string{}
	}
	tags, _ := matchingTags(st, mint, maxt, ms)
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if name == labels.MetricName {
			t = MetricName(t)
		}
		out = append(out, t)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// LabelNames returns __name__ and tag when any series matches.
func (qr *querier) LabelNames(_ context.Context, _ *storage.LabelHints, ms ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	if tags, _ := matchingTags(qr.q.st, qr.mint, qr.maxt, ms); len(tags) == 0 {
		return []string{}, nil, nil
	}
	return []string{labels.MetricName, TagLabel}, nil, nil
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
