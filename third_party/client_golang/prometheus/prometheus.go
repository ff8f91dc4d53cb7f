// Package prometheus holds the metric types of Prometheus' client library
// that the PromQL engine uses, without the exposition (see PITH.md): the
// values are kept and never gathered.
package prometheus

import (
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
)

// Desc describes a metric.
type Desc struct {
	fqName string
	help   string
}

// String is the metric's fully-qualified name.
func (d *Desc) String() string { return d.fqName }

// Metric is one metric value.
type Metric interface {
	Desc() *Desc
}

// Collector is something a registry holds.
type Collector interface {
	Describe(chan<- *Desc)
	Collect(chan<- Metric)
}

// Registerer registers collectors.
type Registerer interface {
	Register(Collector) error
	MustRegister(...Collector)
	Unregister(Collector) bool
}

// Labels are constant label pairs.
type Labels map[string]string

// Opts are the options every metric takes.
type Opts struct {
	Namespace   string
	Subsystem   string
	Name        string
	Help        string
	ConstLabels Labels
}

// CounterOpts are a counter's options.
type CounterOpts Opts

// GaugeOpts are a gauge's options.
type GaugeOpts Opts

// SummaryOpts are a summary's options; Objectives and the rest are
// accepted and not used (a summary keeps its count and sum).
type SummaryOpts struct {
	Namespace   string
	Subsystem   string
	Name        string
	Help        string
	ConstLabels Labels
	Objectives  map[float64]float64
	MaxAge      any
	AgeBuckets  uint32
	BufCap      uint32
}

// BuildFQName joins namespace, subsystem and name with underscores,
// leaving out the empty ones.
func BuildFQName(namespace, subsystem, name string) string {
	if name == "" {
		return ""
	}
	var parts []string
	for _, s := range []string{namespace, subsystem, name} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, "_")
}

// value is a float64 updated atomically.
type value struct{ bits atomic.Uint64 }

func (v *value) load() float64 { return math.Float64frombits(v.bits.Load()) }

func (v *value) set(x float64) { v.bits.Store(math.Float64bits(x)) }

func (v *value) add(x float64) {
	for {
		old := v.bits.Load()
		if v.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+x)) {
			return
		}
	}
}

// Counter only goes up.
type Counter interface {
	Metric
	Collector
	Inc()
	Add(float64)
}

// Gauge goes up and down.
type Gauge interface {
	Metric
	Collector
	Set(float64)
	Inc()
	Dec()
	Add(float64)
	Sub(float64)
}

// Observer takes observations (a summary).
type Observer interface {
	Observe(float64)
}

// metric is the shared part: a description and a value.
type metric struct {
	desc *Desc
	v    value
}

func (m *metric) Desc() *Desc              { return m.desc }
func (m *metric) Describe(ch chan<- *Desc) { ch <- m.desc }
func (m *metric) Collect(ch chan<- Metric) { ch <- m }
func (m *metric) Value() float64           { return m.v.load() }
func newDesc(ns, sub, name, help string) *Desc {
	return &Desc{fqName: BuildFQName(ns, sub, name), help: help}
}

type counter struct{ metric }

// Inc adds one.
func (c *counter) Inc() { c.v.add(1) }

// Add adds x, which must not be negative.
func (c *counter) Add(x float64) {
	if x < 0 {
		panic(errors.New("counter cannot decrease in value"))
	}
	c.v.add(x)
}

// NewCounter makes a counter.
func NewCounter(o CounterOpts) Counter {
	return &counter{metric{desc: newDesc(o.Namespace, o.Subsystem, o.Name, o.Help)}}
}

type gauge struct{ metric }

func (g *gauge) Set(x float64) { g.v.set(x) }
func (g *gauge) Inc()          { g.v.add(1) }
func (g *gauge) Dec()          { g.v.add(-1) }
func (g *gauge) Add(x float64) { g.v.add(x) }
func (g *gauge) Sub(x float64) { g.v.add(-x) }

// NewGauge makes a gauge.
func NewGauge(o GaugeOpts) Gauge {
	return &gauge{metric{desc: newDesc(o.Namespace, o.Subsystem, o.Name, o.Help)}}
}

// summary keeps the count and the sum of its observations.
type summary struct {
	metric
	count atomic.Uint64
}

// Observe records x.
func (s *summary) Observe(x float64) {
	s.count.Add(1)
	s.v.add(x)
}

// Summary is a summary metric.
type Summary interface {
	Metric
	Collector
	Observer
}

// NewSummary makes a summary.
func NewSummary(o SummaryOpts) Summary {
	return &summary{metric: metric{desc: newDesc(o.Namespace, o.Subsystem, o.Name, o.Help)}}
}

// vec hands out one metric per combination of label values.
type vec[M any] struct {
	desc   *Desc
	labels []string
	make   func() M
	mu     sync.Mutex
	byKey  map[string]M
}

func (v *vec[M]) with(values []string) M {
	if len(values) != len(v.labels) {
		panic(errors.New("inconsistent label cardinality: " + v.desc.fqName))
	}
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	m, ok := v.byKey[key]
	if !ok {
		m = v.make()
		v.byKey[key] = m
	}
	return m
}

// Describe sends the vector's description.
func (v *vec[M]) Describe(ch chan<- *Desc) { ch <- v.desc }

// Collect sends every metric of the vector.
func (v *vec[M]) Collect(ch chan<- Metric) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, m := range v.byKey {
		if m, ok := any(m).(Metric); ok {
			ch <- m
		}
	}
}

// CounterVec is a counter per label values.
type CounterVec struct{ vec[Counter] }

// NewCounterVec makes a counter vector with the given label names.
func NewCounterVec(o CounterOpts, labelNames []string) *CounterVec {
	d := newDesc(o.Namespace, o.Subsystem, o.Name, o.Help)
	return &CounterVec{vec[Counter]{desc: d, labels: labelNames, byKey: map[string]Counter{},
		make: func() Counter { return &counter{metric{desc: d}} }}}
}

// WithLabelValues is the counter for these label values.
func (v *CounterVec) WithLabelValues(values ...string) Counter { return v.with(values) }

// SummaryVec is a summary per label values.
type SummaryVec struct{ vec[Observer] }

// NewSummaryVec makes a summary vector with the given label names.
func NewSummaryVec(o SummaryOpts, labelNames []string) *SummaryVec {
	d := newDesc(o.Namespace, o.Subsystem, o.Name, o.Help)
	return &SummaryVec{vec[Observer]{desc: d, labels: labelNames, byKey: map[string]Observer{},
		make: func() Observer { return &summary{metric: metric{desc: d}} }}}
}

// WithLabelValues is the summary for these label values.
func (v *SummaryVec) WithLabelValues(values ...string) Observer { return v.with(values) }
