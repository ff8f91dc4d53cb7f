package store

import (
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// BenchmarkHeadAppend appends samples to the active head as applied writes
// do: 20 tags, a sample each in turn every 10 ms of counters and decimal
// values. It reports the head's memory per sample; the encoding of a
// block every 256 samples of a tag is part of the cost.
//
//	go test -run '^$' -bench HeadAppend ./internal/store
func BenchmarkHeadAppend(b *testing.B) {
	const tags = 20
	now := func() time.Time { return time.Time{} }
	b.ReportAllocs()
	h := newHead()
	for i := 0; i < b.N; i++ {
		k := i % tags
		n := int64(i / tags)
		v := float64(n)
		if k%2 == 1 {
			v = float64(n%1000) / 100
		}
		h.appendLocked(uint32(k), 1_700_000_000_000+n*10, v, model.QualityGood, now)
	}
	b.StopTimer()
	mem := 0
	for _, s := range h.series {
		if s != nil {
			mem += s.memBytes()
		}
	}
	b.ReportMetric(float64(mem)/float64(b.N), "B/sample")
}
