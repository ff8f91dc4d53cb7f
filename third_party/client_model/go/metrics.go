// Package io_prometheus_client holds the metric family types of
// Prometheus' exposition format as plain Go structs (see ../PITH.md): the
// fields and getters that prometheus/common's model package uses, without
// the protobuf runtime.
package io_prometheus_client

// MetricType is the type of a metric family.
type MetricType int32

// The metric types, numbered as in metrics.proto.
const (
	MetricType_COUNTER         MetricType = 0
	MetricType_GAUGE           MetricType = 1
	MetricType_SUMMARY         MetricType = 2
	MetricType_UNTYPED         MetricType = 3
	MetricType_HISTOGRAM       MetricType = 4
	MetricType_GAUGE_HISTOGRAM MetricType = 5
)

// LabelPair is a label name and value.
type LabelPair struct {
	Name  *string
	Value *string
}

// GetName is the name, or "".
func (x *LabelPair) GetName() string {
	if x != nil && x.Name != nil {
		return *x.Name
	}
	return ""
}

// GetValue is the value, or "".
func (x *LabelPair) GetValue() string {
	if x != nil && x.Value != nil {
		return *x.Value
	}
	return ""
}

// Gauge is a gauge's value.
type Gauge struct{ Value *float64 }

// Counter is a counter's value.
type Counter struct{ Value *float64 }

// Untyped is an untyped value.
type Untyped struct{ Value *float64 }

// Quantile is one quantile of a summary.
type Quantile struct {
	Quantile *float64
	Value    *float64
}

// Summary is a summary's count, sum and quantiles.
type Summary struct {
	SampleCount *uint64
	SampleSum   *float64
	Quantile    []*Quantile
}

// Bucket is one bucket of a classic histogram.
type Bucket struct {
	CumulativeCount *uint64
	UpperBound      *float64
}

// Histogram is a classic histogram's count, sum and buckets.
type Histogram struct {
	SampleCount *uint64
	SampleSum   *float64
	Bucket      []*Bucket
}

// Metric is one metric of a family: its labels and value.
type Metric struct {
	Label       []*LabelPair
	Gauge       *Gauge
	Counter     *Counter
	Summary     *Summary
	Untyped     *Untyped
	Histogram   *Histogram
	TimestampMs *int64
}

// GetLabel is the labels.
func (x *Metric) GetLabel() []*LabelPair {
	if x != nil {
		return x.Label
	}
	return nil
}

// MetricFamily is a named family of metrics.
type MetricFamily struct {
	Name   *string
	Help   *string
	Type   *MetricType
	Metric []*Metric
	Unit   *string
}

// GetName is the name, or "".
func (x *MetricFamily) GetName() string {
	if x != nil && x.Name != nil {
		return *x.Name
	}
	return ""
}

// GetHelp is the help text, or "".
func (x *MetricFamily) GetHelp() string {
	if x != nil && x.Help != nil {
		return *x.Help
	}
	return ""
}

// GetType is the type, COUNTER if unset.
func (x *MetricFamily) GetType() MetricType {
	if x != nil && x.Type != nil {
		return *x.Type
	}
	return MetricType_COUNTER
}

// GetMetric is the metrics.
func (x *MetricFamily) GetMetric() []*Metric {
	if x != nil {
		return x.Metric
	}
	return nil
}
