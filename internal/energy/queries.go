package energy

import (
	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// Queries are the reads this package needs from the store, as *store.DB
// provides them. Methods are called concurrently from many requests.
type Queries interface {
	// Aggregate splits [from, to) into n equal buckets and aggregates each,
	// exactly, from rollup cells inside buckets and raw samples at their
	// edges; store.ErrUnknownTag for a tag never seen.
	Aggregate(tag string, from, to int64, n int, agg model.Agg) ([]store.Bucket, error)
	// Raw returns at most limit stored samples in [from, to), in time order.
	Raw(tag string, from, to int64, limit int) ([]model.Sample, error)
}

var _ Queries = (*store.DB)(nil)

// hourMs is the finest energy piece: buckets are summed from pieces of an
// hour (or of equal parts near an hour when a bucket is not whole hours),
// so a day is exactly the sum of its hours and a tariff band is priced per
// hour.
const hourMs = 3_600_000
