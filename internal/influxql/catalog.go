package influxql

import (
	"sort"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
)

// Series is one Pith tag seen as an InfluxDB series field. A line-protocol
// point `m,k1=v1,k2=v2 f=1` stores its value in a Pith tag whose labels
// are {_measurement="m", _field="f", k1="v1", k2="v2"}; the catalog turns
// those labels into a Series.
type Series struct {
	Tag         string   // the Pith tag holding the values
	Measurement string   // _measurement
	Field       string   // _field
	Keys        []string // the InfluxDB tag keys, sorted
	Values      []string // their values, in the order of Keys
}

// Get returns the value of tag key k, "" when the series has none.
func (s *Series) Get(k string) string {
	i := sort.SearchStrings(s.Keys, k)
	if i < len(s.Keys) && s.Keys[i] == k {
		return s.Values[i]
	}
	return ""
}

// has reports whether the series carries tag key k.
func (s *Series) has(k string) bool {
	i := sort.SearchStrings(s.Keys, k)
	return i < len(s.Keys) && s.Keys[i] == k
}

var _ Labels = (*Series)(nil)

// Catalog lists what InfluxQL can read: measurements and their series.
// Snapshot is called once per request, concurrently with other requests.
type Catalog interface {
	// Snapshot returns the measurements and series as they are now.
	Snapshot() Snapshot
}

// Snapshot is a catalog at one moment, used by one request. The returned
// slices are not modified by the caller.
type Snapshot interface {
	// Measurements returns every measurement name, sorted.
	Measurements() []string
	// Series returns the series of one measurement, nil when it has none.
	Series(measurement string) []Series
}

// Store is what InfluxQL reads from Pith's archive, as *store.DB
// implements it. Every method is called concurrently.
type Store interface {
	// Aggregate splits [from, to) into n equal buckets and aggregates
	// each from the rollups (see docs/api.md, "Buckets").
	Aggregate(tag string, from, to int64, n int, agg model.Agg) ([]store.Bucket, error)
	// Raw returns at most limit stored samples in [from, to), in time order.
	Raw(tag string, from, to int64, limit int) ([]model.Sample, error)
}

var _ Store = (*store.DB)(nil)
