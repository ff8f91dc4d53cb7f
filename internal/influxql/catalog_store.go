package influxql

import (
	"sort"
	"sync"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
)

// TagLister lists the stored tags with their labels, as *store.DB does.
// It is called concurrently.
type TagLister interface {
	Tags() []store.TagInfo
}

var _ TagLister = (*store.DB)(nil)

// StoreCatalog is the Catalog of Pith's stored tags, from their labels:
//   - a tag with the labels _measurement and _field (line protocol) is the
//     field _field of measurement _measurement, its other labels the tag
//     keys and values;
//   - a tag with __name__ (Prometheus remote_write) is the field "value"
//     of the measurement __name__, its other labels the tag keys;
//   - any other tag (Modbus, CSV import, calculated, system tags) is the
//     field "value" of a measurement named as the tag, with its labels,
//     if any, as tag keys.
//
// The index is rebuilt when the stored tags or their labels changed, so a
// new tag is queryable as soon as its first value is stored; with a store
// that says when they changed (TagsGeneration), an unchanged catalog costs
// a request no listing at all.
type StoreCatalog struct {
	src TagLister

	mu    sync.Mutex
	tags  []store.TagInfo // what idx was built from
	idx   *catalogIndex
	gen   uint64 // the store's TagsGeneration when tags was listed
	genOK bool   // gen is known
}

type catalogIndex struct {
	names  []string
	series map[string][]Series
}

var _ Catalog = (*StoreCatalog)(nil)

// NewStoreCatalog returns the catalog of src's tags.
func NewStoreCatalog(src TagLister) *StoreCatalog {
	return &StoreCatalog{src: src}
}

// Snapshot returns the catalog of the tags stored now.
func (c *StoreCatalog) Snapshot() Snapshot { return c.index() }

// Measurements returns every measurement name, sorted.
func (x *catalogIndex) Measurements() []string { return x.names }

// Series returns the series of measurement m.
func (x *catalogIndex) Series(m string) []Series { return x.series[m] }

var _ Snapshot = (*catalogIndex)(nil)

// generationer is a TagLister that says when its listing changed, as
// *store.DB does (TagsGeneration).
type generationer interface {
	TagsGeneration() uint64
}

func (c *StoreCatalog) index() *catalogIndex {
	gen, hasGen := uint64(0), false
	if g, ok := c.src.(generationer); ok {
		// Read before listing: a change in between only costs a rebuild
		// at the next request.
		gen, hasGen = g.TagsGeneration(), true
		c.mu.Lock()
		if c.idx != nil && c.genOK && c.gen == gen {
			idx := c.idx
			c.mu.Unlock()
			return idx
		}
		c.mu.Unlock()
	}
	tags := c.src.Tags()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idx == nil || !sameTags(c.tags, tags) {
		c.idx, c.tags = buildIndex(tags), tags
	}
	c.gen, c.genOK = gen, hasGen
	return c.idx
}

// sameTags reports whether two listings hold the same tags with the same
// labels. The store replaces a tag's labels with a new slice when they
// change, so comparing the slices' first elements' addresses suffices.
func sameTags(a, b []store.TagInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		la, lb := a[i].Labels, b[i].Labels
		if a[i].Name != b[i].Name || len(la) != len(lb) || len(la) > 0 && &la[0] != &lb[0] {
			return false
		}
	}
	return true
}

// SeriesOf maps one Pith tag to its InfluxDB measurement, field and tags.
func SeriesOf(tag string, ls model.Labels) Series {
	s := Series{Tag: tag, Measurement: tag, Field: "value"}
	skip := map[string]bool{}
	if m, ok := ls.Lookup(model.LabelMeasurement); ok {
		s.Measurement = m
		if f, ok := ls.Lookup(model.LabelField); ok {
			s.Field = f
		}
		skip[model.LabelMeasurement], skip[model.LabelField] = true, true
	} else if n, ok := ls.Lookup(model.LabelMetricName); ok {
		s.Measurement = n
		skip[model.LabelMetricName] = true
	}
	for _, l := range ls { // sorted by name
		if !skip[l.Name] {
			s.Keys = append(s.Keys, l.Name)
			s.Values = append(s.Values, l.Value)
		}
	}
	return s
}

func buildIndex(tags []store.TagInfo) *catalogIndex {
	idx := &catalogIndex{series: make(map[string][]Series)}
	for _, t := range tags {
		s := SeriesOf(t.Name, t.Labels)
		if _, ok := idx.series[s.Measurement]; !ok {
			idx.names = append(idx.names, s.Measurement)
		}
		idx.series[s.Measurement] = append(idx.series[s.Measurement], s)
	}
	sort.Strings(idx.names)
	return idx
}
