package tag

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// copySink copies each batch into a reused buffer, the cost the archive
// queue's Enqueue has at minimum.
type copySink struct{ buf []model.Point }

func (c *copySink) Enqueue(pts []model.Point) bool {
	c.buf = append(c.buf[:0], pts...)
	return true
}

func (c *copySink) Write(_ context.Context, pts []model.Point) error {
	c.buf = append(c.buf[:0], pts...)
	return nil
}

// BenchmarkUpdate measures Update plus the archive hand-off for 100-tag
// scans in which every value changes, with one coalescing subscriber.
// Run: go test -run '^$' -bench BenchmarkUpdate ./internal/tag/
func BenchmarkUpdate(b *testing.B) {
	for _, subs := range []int{0, 1} {
		b.Run(fmt.Sprintf("subs=%d", subs), func(b *testing.B) {
			tab := New(nil, DefaultOptions(), &copySink{})
			const n = 100
			batch := make([]Sample, n)
			for i := range batch {
				id, _ := tab.Define(Def{Name: fmt.Sprintf("site.dev.tag%03d", i)})
				batch[i].ID = id
			}
			var sub *Subscription
			if subs > 0 {
				sub = tab.Subscribe(SubOptions{Name: "live"})
			}
			var buf []Change
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for r := 0; r < b.N; r++ {
				for i := range batch {
					batch[i].T = int64(r)
					batch[i].V = float64(r + i)
				}
				tab.Update(batch)
				if sub != nil && r%10 == 9 {
					buf = sub.Take(buf[:0])
				}
			}
			b.ReportMetric(float64(b.N*n)/time.Since(start).Seconds(), "values/s")
		})
	}
}
