package archive

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/tag"
)

// countStore is a store that only counts, so that the benchmarks measure
// the queue itself.
type countStore struct{ n atomic.Int64 }

func (c *countStore) Write(_ context.Context, pts []model.Point) error {
	c.n.Add(int64(len(pts)))
	return nil
}

// BenchmarkEnqueue measures values/s from Enqueue of 100-point batches
// until the (counting) store has them all, Close's drain included.
// Run: go test -run '^$' -bench . ./internal/archive/
func BenchmarkEnqueue(b *testing.B) {
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("writers=%d", w), func(b *testing.B) {
			cs := &countStore{}
			q := New(cs, nil, Options{Writers: w})
			batch := make([]model.Point, 100)
			for i := range batch {
				batch[i] = model.Point{Tag: fmt.Sprintf("site.dev.tag%03d", i)}
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for r := 0; r < b.N; r++ {
				for i := range batch {
					batch[i].T, batch[i].V = int64(r), float64(r)
				}
				for !q.Enqueue(batch) {
					time.Sleep(time.Millisecond) // only if the bench outruns 256 MiB
				}
			}
			if err := q.Close(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(cs.n.Load())/time.Since(start).Seconds(), "values/s")
		})
	}
}

// BenchmarkTableToStore measures the whole hand-off of the data path
// (docs/architecture.md): 100-tag scans through tag.Table.Update (every
// value changes, policy "change") into the queue and out to a counting
// store.
func BenchmarkTableToStore(b *testing.B) {
	cs := &countStore{}
	q := New(cs, nil, DefaultOptions())
	tab := tag.New(nil, tag.DefaultOptions(), q)
	batch := make([]tag.Sample, 100)
	for i := range batch {
		id, err := tab.Define(tag.Def{Name: fmt.Sprintf("site.dev.tag%03d", i)})
		if err != nil {
			b.Fatal(err)
		}
		batch[i].ID = id
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for r := 0; r < b.N; r++ {
		for i := range batch {
			batch[i].T, batch[i].V = int64(r), float64(r+i)
		}
		tab.Update(batch)
	}
	if err := q.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cs.n.Load())/time.Since(start).Seconds(), "values/s")
	if st := tab.Stats(); st.Refused > 0 {
		b.Logf("refused %d values (queue full)", st.Refused)
	}
}
