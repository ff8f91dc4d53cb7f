package promapi

import (
	"github.com/prometheus/prometheus/model/labels"

	"github.com/pith-historian/pith/internal/model"
)

// seriesLabels returns the labels of a tag's series: its own labels when
// they hold __name__ (a remote_write series, served as Prometheus holds
// it), else {__name__=MetricName(tag), tag=tag} plus its labels, the
// metric name and tag label winning over labels of the same names.
func seriesLabels(tag string, ls model.Labels) labels.Labels {
	b := labels.NewScratchBuilder(len(ls) + 2)
	if _, ok := ls.Lookup(labels.MetricName); ok {
		for _, l := range ls {
			b.Add(l.Name, l.Value)
		}
		return b.Labels() // model.Labels are sorted as labels.Labels are
	}
	b.Add(labels.MetricName, MetricName(tag))
	b.Add(TagLabel, tag)
	for _, l := range ls {
		if l.Name != labels.MetricName && l.Name != TagLabel {
			b.Add(l.Name, l.Value)
		}
	}
	b.Sort()
	return b.Labels()
}

// labelValue returns the value of the label name in the series of a tag
// with labels ls (see seriesLabels) without building the series: matchers
// run over every tag, most of which they refuse.
func labelValue(tag string, ls model.Labels, name string) string {
	if _, ok := ls.Lookup(labels.MetricName); ok {
		return ls.Get(name)
	}
	switch name {
	case labels.MetricName:
		return MetricName(tag)
	case TagLabel:
		return tag
	}
	return ls.Get(name)
}

// matches reports whether the series of a tag with labels ls satisfies
// every matcher; a label the series lacks has the empty value, as in
// Prometheus.
func matches(tag string, ls model.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if !m.Matches(labelValue(tag, ls, m.Name)) {
			return false
		}
	}
	return true
}

// matchesIgnoringCount is matches without the countLabel marker, which
// every series satisfies.
func matchesIgnoringCount(tag string, ls model.Labels, ms []*labels.Matcher) bool {
	for _, m := range ms {
		if m.Name != countLabel && !m.Matches(labelValue(tag, ls, m.Name)) {
			return false
		}
	}
	return true
}
