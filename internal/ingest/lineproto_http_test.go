package ingest

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestLineProtocolHTTP(t *testing.T) {
	sink := &memSink{}
	mux := testMux(sink, NewTagGate(nil, 5, func() time.Time { return emNow }))
	do := func(method, target string, body []byte, gz bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, bytes.NewReader(body))
		if gz {
			req.Header.Set("Content-Encoding", "gzip")
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte("m,host=a f=1,s=\"x\" 1700000000\nm,host=b f=2 1700000000\n"))
	zw.Close()
	rec := do("POST", "/api/v2/write?org=o&bucket=b&precision=s", zb.Bytes(), true)
	if rec.Code != 204 || rec.Header().Get("X-Pith-Skipped-Strings") != "1" || rec.Header().Get("X-Pith-Points") != "2" {
		t.Fatalf("gzip write: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if got := sink.take(); len(got) != 2 || got[0].Tag != "m.a.f" || got[0].T != 1_700_000_000_000 {
		t.Fatalf("stored %v", got)
	}
	// One bad line: 400 naming it, nothing stored.
	rec = do("POST", "/write?db=x&precision=s", []byte("m,host=a f=1 1\nm,host=a f=oops 2\n"), false)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"line":2`) || rec.Header().Get("X-Influxdb-Error") == "" {
		t.Fatalf("bad line: %d %s", rec.Code, rec.Body)
	}
	if got := sink.take(); len(got) != 0 {
		t.Fatalf("stored %v after a bad line", got)
	}
	// The new-tag cap (5, two used): four new tags are refused whole.
	rec = do("POST", "/write", []byte("c a=1,b=2,c=3,d=4\n"), false)
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "c.d") || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("cap: %d %s", rec.Code, rec.Body)
	}
	if got := sink.take(); len(got) != 0 {
		t.Fatalf("stored %v over the cap", got)
	}
	if rec = do("POST", "/write?precision=weeks", []byte("m f=1\n"), false); rec.Code != 400 {
		t.Errorf("bad precision: %d", rec.Code)
	}
	if rec = do("GET", "/write", nil, false); rec.Code != 405 {
		t.Errorf("GET /write: %d", rec.Code)
	}
	if rec = do("POST", "/write", bytes.Repeat([]byte("m f=1\n"), DefaultMaxBodyBytes/6+1), false); rec.Code != 413 {
		t.Errorf("huge body: %d", rec.Code)
	}
	if rec = do("GET", "/ping", nil, false); rec.Code != 204 || rec.Header().Get("X-Influxdb-Version") == "" {
		t.Errorf("ping: %d %v", rec.Code, rec.Header())
	}
}

// TestBrokenBody: a body that cannot be read as sent (gzip cut short, not
// gzip at all, an unknown encoding) is the client's fault on every push
// input that inflates: 400 (415 for the encoding), never 500, nothing
// stored.
func TestBrokenBody(t *testing.T) {
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte("m f=1 1700000000\n"))
	zw.Close()
	whole := zb.Bytes()
	sink := &memSink{}
	lp := NewLineProtocol(sink, DefaultLineProtocolOptions())
	em := NewEmoncms(sink, DefaultEmoncmsOptions())
	for _, c := range []struct {
		name, enc string
		body      []byte
		want      int
	}{
		{"gzip cut short", "gzip", whole[:len(whole)-6], 400},
		{"gzip header only", "", whole[:4], 400},
		{"magic then garbage", "", []byte("\x1f\x8bnot gzip at all"), 400},
		{"not gzip though said so", "gzip", []byte("m f=1\n"), 400},
		{"unknown encoding", "br", []byte("m f=1\n"), 415},
	} {
		for _, h := range []struct {
			name   string
			h      http.Handler
			target string
		}{{"line protocol", lp, "/write"}, {"emoncms", em, "/input/post"}} {
			req := httptest.NewRequest(http.MethodPost, h.target, bytes.NewReader(c.body))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if c.enc != "" {
				req.Header.Set("Content-Encoding", c.enc)
			}
			rec := httptest.NewRecorder()
			h.h.ServeHTTP(rec, req)
			if rec.Code != c.want {
				t.Errorf("%s, %s: status %d, want %d: %s", h.name, c.name, rec.Code, c.want, rec.Body)
			}
		}
	}
	if got := sink.take(); len(got) != 0 {
		t.Fatalf("stored %v from broken bodies", got)
	}
}
