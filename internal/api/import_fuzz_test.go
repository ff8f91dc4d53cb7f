package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// FuzzImport posts arbitrary bodies: the answer is always 200 with every
// point stored, or 4xx JSON with nothing stored, never a 5xx or a panic.
// Seeds are the ingest golden CSV files, plain and gzipped.
// Run with: go test -run '^$' -fuzz FuzzImport ./internal/api/
func FuzzImport(f *testing.F) {
	seeds, _ := filepath.Glob("../ingest/testdata/csv/*/input.csv")
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		f.Add(gzipBytes(f, string(data)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		st := newFakeStore()
		opts := DefaultOptions()
		opts.ImportBatch = 3
		opts.MaxImportInflatedBytes = 1 << 20
		r := do(t, NewServer(st, opts, nil).Handler(), http.MethodPost, "/api/v1/import", bytes.NewReader(body), nil)
		if !json.Valid([]byte(r.body)) {
			t.Fatalf("invalid JSON answer %q", r.body)
		}
		switch {
		case r.status == http.StatusOK:
			var got struct{ Points int }
			if err := json.Unmarshal([]byte(r.body), &got); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, ss := range st.data {
				n += len(ss)
			}
			if n > got.Points || (got.Points > 0 && st.commits != 1) {
				t.Fatalf("answer %s but %d samples stored, %d commits", r.body, n, st.commits)
			}
		case r.status >= 400 && r.status < 500:
			if len(st.data) != 0 || st.commits != 0 {
				t.Fatalf("answer %d but data stored", r.status)
			}
		default:
			t.Fatalf("status %d: %s", r.status, r.body)
		}
	})
}
