package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// response is a recorded answer.
type response struct {
	status int
	header http.Header
	body   string
}

// do runs one request against h.
func do(t testing.TB, h http.Handler, method, target string, body io.Reader, header map[string]string) response {
	t.Helper()
	req := httptest.NewRequest(method, target, body)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.String()}
}

// wantJSON checks status, that the body is valid JSON and, when want is
// not empty, that the body equals it.
func wantJSON(t *testing.T, r response, status int, want string) {
	t.Helper()
	if r.status != status {
		t.Errorf("status %d, want %d (body %s)", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if !json.Valid([]byte(r.body)) {
		t.Fatalf("invalid JSON: %s", r.body)
	}
	if want != "" && r.body != want {
		t.Errorf("body\n got %s\nwant %s", r.body, want)
	}
}

// wantError checks a JSON error answer whose message contains substr.
func wantError(t *testing.T, r response, status int, substr string) {
	t.Helper()
	wantJSON(t, r, status, "")
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error == "" {
		t.Fatalf("no error field in %s", r.body)
	}
	if !strings.Contains(e.Error, substr) {
		t.Errorf("error %q does not contain %q", e.Error, substr)
	}
}
