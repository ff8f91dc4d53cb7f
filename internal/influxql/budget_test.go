package influxql

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// testBudget is a Reserver with a fixed size.
type testBudget struct {
	max, largest int64
	used         atomic.Int64
}

func (b *testBudget) TryAcquire(n int64) bool {
	if b.used.Add(n) > b.max {
		b.used.Add(-n)
		return false
	}
	return true
}
func (b *testBudget) Release(n int64) { b.used.Add(-n) }
func (b *testBudget) Largest() int64  { return b.largest }

// TestBudget checks that a query reserves what it holds and returns it:
// a request that does not fit now is 503 with Retry-After, one that could
// never fit is refused in its statement's error, and nothing stays held.
func TestBudget(t *testing.T) {
	db := openStore(t)
	var lines []string
	for i := 0; i < 2000; i++ {
		lines = append(lines, "m,k=a f=1 "+itoa(1700000000000+int64(i)*1000))
	}
	loadLP(t, db, lines)
	ask := func(b *testBudget, q string) (int, string, http.Header) {
		o := DefaultOptions()
		o.Budget = b
		h := NewHandler(NewEngine(db, NewStoreCatalog(db), o), nil, nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/query?"+url.Values{"q": {q}, "epoch": {"ms"}}.Encode(), nil))
		return rec.Code, rec.Body.String(), rec.Header()
	}
	raw := `SELECT "f" FROM "m"`
	agg := `SELECT mean("f") FROM "m" WHERE time >= 1700000000000ms and time < 1700002000000ms GROUP BY time(1s)`
	roomy := &testBudget{max: 1 << 30, largest: 1 << 30}
	for _, q := range []string{raw, agg} {
		if code, body, _ := ask(roomy, q); code != 200 || strings.Contains(body, "error") {
			t.Errorf("%s: %d %.200s", q, code, body)
		}
		if n := roomy.used.Load(); n != 0 {
			t.Errorf("%s: %d bytes still held", q, n)
		}
	}
	full := &testBudget{max: 1000, largest: 1 << 30}
	for _, q := range []string{raw, agg} {
		code, body, hdr := ask(full, q)
		if code != 503 || hdr.Get("Retry-After") == "" || !strings.Contains(body, "server busy") {
			t.Errorf("%s with a full budget: %d %v %s", q, code, hdr, body)
		}
	}
	small := &testBudget{max: 1 << 30, largest: 10000}
	for _, q := range []string{raw, agg} {
		code, body, _ := ask(small, q)
		if code != 200 || !strings.Contains(body, `"error":"the answer needs more than the 10000 bytes`) {
			t.Errorf("%s beyond the budget: %d %s", q, code, body)
		}
		if n := small.used.Load(); n != 0 {
			t.Errorf("%s: %d bytes still held", q, n)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
