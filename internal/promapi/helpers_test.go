package promapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// openStore returns a real store in a temporary directory holding pts.
func openStore(t testing.TB, pts []model.Point) *store.DB {
	t.Helper()
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	if len(pts) > 0 {
		if err := db.Write(context.Background(), pts); err != nil {
			t.Fatalf("write: %v", err)
		}
	}
	return db
}

// answer is a decoded API response.
type answer struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
	code      int
	body      string
}

// get runs one request against h; form is sent as a POST body when post.
func get(t testing.TB, h http.Handler, path string, form url.Values, post bool) answer {
	t.Helper()
	var req *http.Request
	if post {
		req = httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(http.MethodGet, path+"?"+form.Encode(), nil)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("%s: invalid JSON %q: %v", path, body, err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", path, ct)
	}
	a.code, a.body = rec.Code, string(body)
	return a
}
