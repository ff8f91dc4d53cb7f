package influxql

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// FuzzParse feeds arbitrary queries to the parser and runs what parses
// against a small store: nothing may panic, a refusal is an error (never a
// crash), and every answer is valid JSON. Seeded from the query scripts
// and the Grafana captures.
//
//	go test -run '^$' -fuzz FuzzParse -fuzztime 1m ./internal/influxql/
func FuzzParse(f *testing.F) {
	for _, s := range readScripts(f) {
		for _, e := range s.evals {
			f.Add(e.query)
		}
	}
	for _, c := range readCaptures(f) {
		req := c.request(f, "")
		req.ParseForm()
		f.Add(req.Form.Get("q"))
	}
	for _, q := range []string{"", ";;", "SELECT", `SELECT "a" FROM "b" WHERE "c" =~ /(/`, "SHOW TAG VALUES WITH KEY IN (", "SELECT mean(x) FROM y GROUP BY time(0s)",
		"SELECT x FROM y WHERE time > now() - 9223372036854775807ns", "/* unterminated", "SELECT \"\\", "SELECT x FROM y WHERE ((((((a = 'b'))))))"} {
		f.Add(q)
	}
	db := openStore(f)
	loadLP(f, db, []string{
		"m,k=a f=1,g=2 1700000000000",
		"m,k=b f=3 1700000060000",
		"n f=-1 1700000120000",
	})
	opts := Options{MaxRawSamples: 1000, MaxBuckets: 10000}
	eng := NewEngine(db, NewStoreCatalog(db), opts)
	now := time.UnixMilli(1700000300000)
	f.Fuzz(func(t *testing.T, q string) {
		stmts, err := Parse(q, now)
		if err != nil {
			if stmts != nil || err.Error() == "" {
				t.Fatalf("error %q with %d statements", err, len(stmts))
			}
			return
		}
		if len(stmts) == 0 {
			t.Fatalf("no statement and no error for %q", q)
		}
		ans := eng.Execute(context.Background(), stmts)
		defer ans.Release()
		res := ans.Results
		for _, epoch := range []string{"", "ms"} {
			mul, div, _ := epochScale(epoch)
			body := formatter{mul: mul, div: div}.JSON(res)
			if !json.Valid(body) {
				t.Fatalf("invalid JSON for %q: %s", q, body)
			}
		}
		formatter{}.CSV(res)
	})
}
