package ingest

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
)

// Labels: every tag a push input creates keeps the key/value pairs it
// arrived with, beside its name (docs/design/0002-tag-names.md, "Labels").
// A line-protocol point m,k1=v1 f=1 gives {_measurement="m", _field="f",
// k1="v1"}; a remote_write series keeps its Prometheus labels, __name__
// included. They are built once per series a request state meets
// (nameEntry.labelled), handed to the sink before the points and stored
// with the tag's metadata, never per sample.

// Labeler is a Sink that keeps tag labels; *store.DB and the agent's road
// (the tag table) implement it. With a Sink that does not, inputs store
// points only.
type Labeler interface {
	// SetLabels makes each series' labels the labels of its tag, durably,
	// before it returns. It is called from many goroutines at once and
	// must not keep series. A *model.PointError names a refused series
	// (bad name or labels over the limits of model.Labels.Check).
	SetLabels(ctx context.Context, series []model.Series) error
}

var _ Labeler = (*store.DB)(nil)

// pendingLabels collects the series of one request whose labels are to
// be stored, and the cache entries to mark once they are.
type pendingLabels struct {
	series  []model.Series
	entries []*nameEntry
}

func (p *pendingLabels) reset() {
	for _, e := range p.entries {
		e.pending = false
	}
	clear(p.series)
	p.series = p.series[:0]
	clear(p.entries)
	p.entries = p.entries[:0]
}

func (p *pendingLabels) add(e *nameEntry, ls model.Labels) {
	p.series = append(p.series, model.Series{Tag: e.name, Labels: ls})
	p.entries = append(p.entries, e)
	e.pending = true
}

// has reports whether e is pending already (a series met twice in one
// request).
func (p *pendingLabels) has(e *nameEntry) bool { return e.pending }

// done marks the entries labelled, once their labels are stored.
func (p *pendingLabels) done() {
	for _, e := range p.entries {
		e.labelled, e.pending = true, false
	}
}

// setLabels stores labels through sink when it keeps them.
func setLabels(ctx context.Context, sink any, p *pendingLabels) error {
	if p == nil || len(p.series) == 0 {
		return nil
	}
	l, ok := sink.(Labeler)
	if !ok {
		return nil
	}
	return l.SetLabels(ctx, p.series)
}

// lpLabels returns the labels of a line-protocol field: _measurement,
// _field and one label per tag key, unescaped. A tag key Pith reserves is
// refused.
func lpLabels(row *LPRow, field []byte) (model.Labels, error) {
	ls := make(model.Labels, 0, len(row.Tags)+2)
	ls = append(ls, model.Label{Name: model.LabelField, Value: unescapeLP(field)},
		model.Label{Name: model.LabelMeasurement, Value: unescapeLP(row.Measurement)})
	for _, t := range row.Tags {
		k := unescapeLP(t.Key)
		if k == model.LabelField || k == model.LabelMeasurement || k == model.LabelMetricName {
			return nil, fmt.Errorf("tag key %q is reserved (Pith gives every point the labels %s and %s; %s marks a Prometheus series)",
				k, model.LabelMeasurement, model.LabelField, model.LabelMetricName)
		}
		ls = append(ls, model.Label{Name: k, Value: unescapeLP(t.Value)})
	}
	ls = ls.Sorted()
	if err := ls.Check(); err != nil {
		return nil, err
	}
	return ls, nil
}

// unescapeLP removes line protocol's backslash escapes (`\,` `\ ` `\=`
// `\\`); a backslash before any other byte is kept, as InfluxDB does.
func unescapeLP(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+1 < len(b) {
			switch b[i+1] {
			case ',', ' ', '=', '\\':
				i++
			}
		}
		sb.WriteByte(b[i])
	}
	return sb.String()
}

// rwLabels returns the labels of a remote_write series (sorted by name
// already), empty values dropped as Prometheus does.
func rwLabels(labels []RWLabel) (model.Labels, error) {
	ls := make(model.Labels, 0, len(labels))
	for _, l := range labels {
		if len(l.Value) == 0 {
			continue
		}
		ls = append(ls, model.Label{Name: string(l.Name), Value: string(l.Value)})
	}
	if err := ls.Check(); err != nil {
		return nil, err
	}
	return ls, nil
}
