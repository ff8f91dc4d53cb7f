package influxql

import (
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestHandlerStatuses checks the request-level answers: a missing q, a
// bad epoch, a wrong method, a closed store, CSV errors, gzip.
func TestHandlerStatuses(t *testing.T) {
	db := openStore(t)
	var lines []string
	for i := 0; i < 200; i++ {
		lines = append(lines, "m f=1 "+itoa(1700000000000+int64(i)*1000))
	}
	loadLP(t, db, lines)
	h := newTestHandler(db)
	do := func(method, target, accept, acceptEnc string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, target, nil)
		req.Header.Set("Accept", accept)
		req.Header.Set("Accept-Encoding", acceptEnc)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	q := func(s string) string { return "/query?" + url.Values{"q": {s}}.Encode() }
	for _, c := range []struct {
		method, target, accept, enc string
		code                        int
		body, contentEncoding       string
	}{
		{"GET", "/query", "", "", 400, `{"error":"missing required parameter \"q\""}`, ""},
		{"GET", q("SHOW MEASUREMENTS") + "&epoch=weeks", "", "", 400, `invalid epoch weeks`, ""},
		{"DELETE", q("SHOW MEASUREMENTS"), "", "", 405, `not allowed`, ""},
		{"GET", q("SHOW MEASUREMENTS"), "text/csv", "", 200, "name,tags,name\nmeasurements,,m\n", ""},
		{"GET", q("SELECT nope(f) FROM m"), "application/csv", "", 200, "error\nundefined function nope()\n", ""},
		{"GET", q(`SELECT "f" FROM "m"`), "", "gzip", 200, "", "gzip"},
		{"GET", q(`SELECT "f" FROM "m" LIMIT 1`), "", "gzip", 200, `"values":[["2023-11-14T22:13:20Z",1]]`, ""},
	} {
		rec := do(c.method, c.target, c.accept, c.enc)
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.body) || rec.Header().Get("Content-Encoding") != c.contentEncoding {
			t.Errorf("%s %s: %d %v %.200q", c.method, c.target, rec.Code, rec.Header(), rec.Body.String())
		}
	}
	db.Close()
	if rec := do("GET", q(`SELECT last("f") FROM "m"`), "", ""); rec.Code != 503 || !strings.Contains(rec.Body.String(), "closed") {
		t.Errorf("closed store: %d %s", rec.Code, rec.Body)
	}
}
