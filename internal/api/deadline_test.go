package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestWriteDeadlines checks that the server's write timeout cuts a slow
// answer, and that NoWriteDeadline and WriteDeadline lift it for the
// handlers that need longer.
func TestWriteDeadlines(t *testing.T) {
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(400 * time.Millisecond)
		io.WriteString(w, "done")
	})
	for _, tt := range []struct {
		name string
		h    http.Handler
		ok   bool
	}{
		{"server timeout", slow, false},
		{"no deadline", NoWriteDeadline(slow), true},
		{"longer deadline", WriteDeadline(2*time.Second, slow), true},
		{"shorter deadline", WriteDeadline(100*time.Millisecond, slow), false},
	} {
		srv := httptest.NewUnstartedServer(tt.h)
		srv.Config.WriteTimeout = 200 * time.Millisecond
		srv.Start()
		resp, err := http.Get(srv.URL)
		var body []byte
		if err == nil {
			body, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		if got := err == nil && string(body) == "done"; got != tt.ok {
			t.Errorf("%s: answered %v (%q, %v), want %v", tt.name, got, body, err, tt.ok)
		}
		srv.Close()
	}
}
