package api

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// Run with: go test -run '^$' -bench . -benchmem ./internal/api/

// plantBody returns rows of the plant data set shape.
func plantBody(rows int) []byte {
	b, err := io.ReadAll(&csvGen{n: rows})
	if err != nil {
		panic(err)
	}
	return b
}

// BenchmarkImport measures POST /api/v1/import end to end in the handler
// (parse, batch, Tx.Add into a discarding fake store).
func BenchmarkImport(b *testing.B) {
	plain := plantBody(500_000)
	for _, gz := range []bool{false, true} {
		name := "plain"
		if gz {
			name = "gzip"
		}
		b.Run(name, func(b *testing.B) {
			body := plain
			if gz {
				body = gzipBytes(b, string(plain))
			}
			st := newFakeStore()
			st.discard = true
			h := NewServer(st, DefaultOptions(), nil).Handler()
			br := bytes.NewReader(body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				br.Reset(body)
				req := httptest.NewRequest(http.MethodPost, "/api/v1/import", br)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			b.ReportMetric(500_000*float64(b.N)/b.Elapsed().Seconds(), "points/s")
		})
	}
}

// cannedStore answers every query with the same precomputed buckets, so
// the benchmark measures the API, not the fake.
type cannedStore struct {
	*fakeStore
	buckets []store.Bucket
}

func (s cannedStore) Aggregate(string, int64, int64, int, model.Agg) ([]store.Bucket, error) {
	return s.buckets, nil
}

func q1Store() cannedStore {
	bk := make([]store.Bucket, 1000)
	for i := range bk {
		bk[i] = store.Bucket{T: 1700000000000 + int64(i)*86400, V: 100 + float64(i%97)*0.37, OK: i%50 != 0}
	}
	return cannedStore{newFakeStore(), bk}
}

const q1Target = "/api/v1/data?tag=plant.ai00&from=1700000000000&to=1700086400000&points=1000&agg=mean"

// BenchmarkDataHandler measures a Q1 answer (1000 buckets) in the handler.
func BenchmarkDataHandler(b *testing.B) {
	h := NewServer(q1Store(), DefaultOptions(), nil).Handler()
	req := httptest.NewRequest(http.MethodGet, q1Target, nil)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
	b.ReportMetric(1000*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkDataHTTP measures Q1 over a real loopback HTTP connection with
// keep-alive, as the dashboard sees it: ns/op is the request latency.
func BenchmarkDataHTTP(b *testing.B) {
	srv := httptest.NewServer(NewServer(q1Store(), DefaultOptions(), nil).Handler())
	defer srv.Close()
	client := srv.Client()
	url := srv.URL + q1Target
	buf := make([]byte, 64<<10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.ReadFull(resp.Body, buf)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n == 0 {
			b.Fatal(resp.StatusCode, strconv.Itoa(n))
		}
	}
}
