package store

import (
	"os"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// BenchmarkQueryDataset times the standard queries Q1-Q3 in-process on a
// data directory made by `pith bench store --work DIR` (DIR/feed):
//
//	PITH_BENCH_STORE=DIR/feed go test -run '^$' -bench QueryDataset ./internal/store
func BenchmarkQueryDataset(b *testing.B) {
	dir := os.Getenv("PITH_BENCH_STORE")
	if dir == "" {
		b.Skip("set PITH_BENCH_STORE to a store holding the feed dataset")
	}
	db, err := Open(dir, testOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const t0, h = int64(1_700_000_000_000), int64(3_600_000)
	for _, q := range []struct {
		name string
		to   int64
	}{{"Q1", t0 + 5*h}, {"Q2", t0 + 2600*h}, {"Q3", t0 + 90_000_000_000}} {
		b.Run(q.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := db.Aggregate("power", t0, q.to, 1000, model.AggMean); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
