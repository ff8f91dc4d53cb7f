package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// BenchmarkLatestAll: GET /api/v1/latest of every tag through the handler,
// with every tag in the store and in the tag table (a box after an import
// of 100,000 tags) or in the store only (the same box just restarted).
// Run: go test -run '^$' -bench LatestAll ./internal/api
func BenchmarkLatestAll(b *testing.B) {
	for _, tags := range []int{100, 100_000} {
		sopts := store.DefaultOptions()
		sopts.Logger = slog.New(slog.DiscardHandler)
		db, err := store.Open(b.TempDir(), sopts)
		if err != nil {
			b.Fatal(err)
		}
		pts := make([]model.Point, tags)
		for i := range pts {
			pts[i] = model.Point{Tag: fmt.Sprintf("scale.t%d", i), T: 1_700_000_000_000, V: float64(i) / 100}
		}
		if err := db.Write(context.Background(), pts); err != nil {
			b.Fatal(err)
		}
		table := tag.New(nil, tag.DefaultOptions(), nil)
		if _, err := table.UpdatePoints(pts, true, "bench"); err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct {
			name string
			cur  Current
		}{{"table", table}, {"store", tag.New(nil, tag.DefaultOptions(), nil)}} {
			b.Run(fmt.Sprintf("tags=%d/%s", tags, c.name), func(b *testing.B) {
				opts := DefaultOptions()
				opts.Current = c.cur
				h := NewServer(WrapDB(db), opts, nil).Handler()
				req := httptest.NewRequest(http.MethodGet, "/api/v1/latest", nil)
				b.ReportAllocs()
				for b.Loop() {
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != 200 || w.Body.Len() < tags*50 {
						b.Fatalf("%d, %d bytes", w.Code, w.Body.Len())
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(tags), "ns/tag")
			})
		}
		db.Close()
	}
}
