// Package store is Pith's embedded time-series engine: a write-ahead log,
// an in-memory head, immutable run files of encoded chunks partitioned by
// day, and rollup tiers that answer bucketed queries exactly.
package store

// Bucket is one answer of a bucketed query. OK is false when the bucket
// holds no sample (the API writes null).
type Bucket struct {
	T  int64
	V  float64
	OK bool
}
