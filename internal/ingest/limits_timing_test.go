package ingest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkRefuseHugeSets times the refusal of a line protocol line of
// 12,000 tag pairs in descending key order and of a remote_write series of
// 200,000 labels, the shapes an insertion sort took quadratic time on:
//
//	go test -run '^$' -bench RefuseHugeSets -benchmem ./internal/ingest/
func BenchmarkRefuseHugeSets(b *testing.B) {
	for _, tc := range []struct {
		name    string
		handler http.Handler
		target  string
		body    []byte
	}{
		{"line-12000-tags", testMux(&memSink{}, NewTagGate(nil, 1000, func() time.Time { return emNow })), "/write", manyTagsLine(12_000)},
		{"series-200000-labels", NewRemoteWrite(&memSink{}, DefaultRemoteWriteOptions()), "/api/v1/write", manyLabelsRequest(200_000)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.body)))
			for b.Loop() {
				rec := httptest.NewRecorder()
				tc.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, tc.target, bytes.NewReader(tc.body)))
				if rec.Code != http.StatusBadRequest {
					b.Fatalf("status %d, want 400", rec.Code)
				}
			}
		})
	}
}
