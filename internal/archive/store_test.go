package archive

import (
	"context"
	"fmt"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// TestQueueIntoStore writes through the queue into a real store and reads
// every point back.
func TestQueueIntoStore(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := New(db, nil, Options{MaxBatch: 50})
	const tags, rounds = 5, 100
	for _, b := range points(tags, rounds) {
		if !q.Enqueue(b) {
			t.Fatal("Enqueue refused")
		}
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range tags {
		got, err := db.Raw(fmt.Sprintf("t%d", i), 0, rounds, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != rounds {
			t.Fatalf("t%d: read back %d samples, want %d", i, len(got), rounds)
		}
		for r, s := range got {
			if s.T != int64(r) || s.V != float64(r) {
				t.Fatalf("t%d: sample %d = %+v", i, r, s)
			}
		}
	}
}

// BenchmarkQueueIntoStore measures values/s from Enqueue of 100-point scans
// to durable points in a real store on the test's temporary disk.
// Run: go test -run '^$' -bench QueueIntoStore ./internal/archive/
func BenchmarkQueueIntoStore(b *testing.B) {
	db, err := store.Open(b.TempDir(), store.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	q := New(db, nil, DefaultOptions())
	batch := make([]model.Point, 100)
	for i := range batch {
		batch[i].Tag = fmt.Sprintf("site.dev.tag%03d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for r := range b.N {
		for i := range batch {
			batch[i].T, batch[i].V = int64(r)*1000, float64(r%1000)
		}
		if !q.Enqueue(batch) {
			b.Fatal("queue full")
		}
	}
	if err := q.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	st := q.Stats()
	b.ReportMetric(float64(st.Written)/b.Elapsed().Seconds(), "values/s")
	b.ReportMetric(float64(st.Commit.P99.Microseconds()), "p99-commit-us")
}
