package api

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/store"
)

// TestTextValues imports quoted text into the real engine and reads it
// back through every read endpoint: raw, first, last and count buckets,
// latest and tags; numeric aggregates of text are refused naming the
// tag, and mixed kinds are refused naming the line.
func TestTextValues(t *testing.T) {
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sopts := DefaultOptions()
	sopts.ImportBatch = 3
	h := NewServer(WrapDB(db), sopts, nil).Handler()

	body := "tag,unix_ms,value,quality\n" +
		"line.state,1000,\"RUN\"\n" +
		"line.speed,1000,12.5\n" +
		"line.state,1500,\"STOP, \"\"manual\"\"\",uncertain\n" +
		"\n" +
		"line.state,3000,\"Zoë\"\n" +
		"line.speed,3000,13\n"
	wantJSON(t, do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader(body), nil), http.StatusOK, `{"points":5}`)

	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/data?tag=line.state&from=0&to=4000&agg=raw", nil, nil), http.StatusOK,
		`{"tag":"line.state","agg":"raw","kind":"text","points":[[1000,"RUN"],[1500,"STOP, \"manual\""],[3000,"Zoë"]]}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/data?tag=line.state&from=1000&to=4000&agg=last&points=3", nil, nil), http.StatusOK,
		`{"tag":"line.state","agg":"last","kind":"text","points":[[1000,"STOP, \"manual\""],[2000,null],[3000,"Zoë"]]}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/data?tag=line.state&from=1000&to=4000&agg=first&points=1", nil, nil), http.StatusOK,
		`{"tag":"line.state","agg":"first","kind":"text","points":[[1000,"RUN"]]}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/data?tag=line.state&from=1000&to=4000&agg=count&points=3", nil, nil), http.StatusOK,
		`{"tag":"line.state","agg":"count","points":[[1000,2],[2000,null],[3000,1]]}`)
	for _, agg := range []string{"mean", "min", "max", "sum"} {
		wantError(t, do(t, h, http.MethodGet, "/api/v1/data?tag=line.state&from=0&to=4000&agg="+agg, nil, nil), http.StatusBadRequest, `"line.state"`)
	}
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/data?tag=line.speed&from=0&to=4000&agg=raw", nil, nil), http.StatusOK,
		`{"tag":"line.speed","agg":"raw","points":[[1000,12.5],[3000,13]]}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/latest?tag=line.state&tag=line.speed", nil, nil), http.StatusOK,
		`{"values":[{"tag":"line.state","ts":3000,"value":"Zoë","quality":"good"},{"tag":"line.speed","ts":3000,"value":13,"quality":"good"}]}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/tags", nil, nil), http.StatusOK,
		`{"tags":[{"name":"line.speed","first":1000,"last":3000},{"name":"line.state","first":1000,"last":3000,"kind":"text"}]}`)

	// Kinds do not mix; the refusal names the line, and nothing is stored.
	for _, bad := range []string{"a.b,1,2\nline.state,5000,7\n", "a.c,1,2\nline.speed,5000,\"fast\"\n"} {
		rec := do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader(bad), nil)
		if rec.status != http.StatusBadRequest || !strings.Contains(rec.body, `"line":2`) || !strings.Contains(rec.body, "other kind") {
			t.Fatalf("mixed kinds: %d %s", rec.status, rec.body)
		}
	}
	wantError(t, do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader("x.y,1,\""+strings.Repeat("a", 1025)+"\"\n"), nil), http.StatusBadRequest, "longer than 1024")
	wantError(t, do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader("x.y,1,\"open\n"), nil), http.StatusBadRequest, "closing quote")
	if db.HasTag("a.b") || db.HasTag("a.c") || db.HasTag("x.y") {
		t.Fatal("a refused import stored something")
	}
}
