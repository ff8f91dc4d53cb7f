package influxql

import "testing"

// TestScripts runs every query of testdata/queries against a real store
// holding the script's data and compares the answers with the expected
// ones, which are InfluxDB 1.x's answers on the same data (the interop
// test checks that against a real influxd).
func TestScripts(t *testing.T) {
	for _, s := range readScripts(t) {
		t.Run(s.name, func(t *testing.T) {
			db := openStore(t)
			loadLP(t, db, s.load)
			h := newTestHandler(db)
			// Once from the store's head, once from flushed runs and
			// their rollups.
			for _, where := range []string{"head", "runs"} {
				if where == "runs" {
					if err := db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				for _, e := range s.evals {
					code, body := e.do(t, h)
					if code != e.status || !sameAnswer(e.csv, body, e.want) {
						t.Errorf("%s:%d (%s): %s\n got %d %s\nwant %d %s", s.name, e.line, where, e.query, code, body, e.status, e.want)
					}
				}
			}
		})
	}
}
