package ingest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// plantBody returns n line-protocol lines shaped like the plant dataset
// as lineproto_ingest.py sends it: 100 tags, one value each per second.
func plantBody(n int, t0 int64) []byte {
	var b bytes.Buffer
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "plant,tag=plant.ai%02d value=%d.%02d %d\n", i%100, 10+i%90, i%100, t0+int64(i/100)*1000)
	}
	return b.Bytes()
}

// BenchmarkLineProtocolParse measures parsing and naming alone:
//
//	go test -run '^$' -bench LineProtocolParse -benchmem ./internal/ingest/
func BenchmarkLineProtocolParse(b *testing.B) {
	body := plantBody(5000, 1_700_000_000_000)
	var st lpState
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		st.lines = st.lines[:0]
		if _, _, err := st.convert(body, 1, 1, 0, false); err != nil {
			b.Fatal(err)
		}
		st.labels.done() // as a stored request does
	}
	b.ReportMetric(float64(b.N)*5000/b.Elapsed().Seconds(), "points/s")
}

// discard is a Sink that stores nothing, to time the handler alone.
type discard struct{}

func (discard) Write(context.Context, []model.Point) error { return nil }

// BenchmarkLineProtocolHandler measures one 5000-line request through the
// handler into a real store (fsync durability) or into nothing:
//
//	go test -run '^$' -bench LineProtocolHandler -benchmem ./internal/ingest/
func BenchmarkLineProtocolHandler(b *testing.B) {
	for _, tc := range []struct {
		name       string
		durability store.Durability
		discard    bool
	}{{"discard", 0, true}, {"store-fsync", store.DurabilityFsync, false}, {"store-relaxed", store.DurabilityRelaxed, false}} {
		b.Run(tc.name, func(b *testing.B) {
			var sink Sink = discard{}
			if !tc.discard {
				opts := store.DefaultOptions()
				opts.Durability = tc.durability
				db, err := store.Open(b.TempDir(), opts)
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				sink = db
			}
			h := NewLineProtocol(sink, DefaultLineProtocolOptions())
			bodies := make([][]byte, 64)
			for i := range bodies {
				bodies[i] = plantBody(5000, 1_700_000_000_000+int64(i)*50_000)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				body := bodies[i%len(bodies)]
				i++
				req := httptest.NewRequest(http.MethodPost, "/write?precision=ms", bytes.NewReader(body))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusNoContent {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			b.ReportMetric(float64(b.N)*5000/b.Elapsed().Seconds(), "points/s")
		})
	}
}
