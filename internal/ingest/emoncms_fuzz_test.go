package ingest

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzEmoncms sends arbitrary form bodies to input/post and input/bulk:
// the handler must answer 200 (ok or an emoncms error) or a 4xx, never
// panic, and store only names that obey the rule.
//
//	go test -run '^$' -fuzz FuzzEmoncms ./internal/ingest/
func FuzzEmoncms(f *testing.F) {
	fh, err := os.Open(filepath.Join("testdata", "emoncms", "queries.txt"))
	if err != nil {
		f.Fatal(err)
	}
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		f.Add(sc.Text(), false)
		f.Add(sc.Text(), true)
	}
	fh.Close()
	// A body starting with the gzip magic is inflated: cut short, it is 400.
	f.Add("\x1f\x8b\x08\x00node=1", false)
	sink := &memSink{}
	h := NewEmoncms(sink, DefaultEmoncmsOptions())
	f.Fuzz(func(t *testing.T, form string, bulk bool) {
		target := "/input/post"
		if bulk {
			target = "/input/bulk"
		}
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(form))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK && rec.Code/100 != 4 {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		for _, p := range sink.take() {
			if err := checkRule(p.Tag); err != nil {
				t.Fatalf("name %q: %v", p.Tag, err)
			}
		}
	})
}
