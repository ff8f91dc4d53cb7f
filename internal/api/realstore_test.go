package api

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/store"
)

// TestRealStore runs an import and the read endpoints against the real
// engine through WrapDB, to keep the fake honest.
func TestRealStore(t *testing.T) {
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	defer db.Close()
	sopts := DefaultOptions()
	sopts.ImportBatch = 2 // several Tx.Add calls
	h := NewServer(WrapDB(db), sopts, nil).Handler()

	body := "a.x,1000,1\na.x,1500,3\na.x,3000,10,uncertain\nb.y,2000,-2.5\n"
	wantJSON(t, do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader(body), nil), http.StatusOK, `{"points":4}`)
	bad := "c.z,1,1\nc.z,2,oops\n"
	wantError(t, do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader(bad), nil), http.StatusBadRequest, "bad value")

	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/data?tag=a.x&from=1000&to=4000&points=3", nil, nil), http.StatusOK,
		`{"tag":"a.x","agg":"mean","points":[[1000,2],[2000,null],[3000,10]]}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/data?tag=a.x&from=0&to=3000&agg=raw", nil, nil), http.StatusOK,
		`{"tag":"a.x","agg":"raw","points":[[1000,1],[1500,3]]}`)
	wantError(t, do(t, h, http.MethodGet, "/api/v1/data?tag=c.z&from=0&to=10", nil, nil), http.StatusNotFound, "c.z")
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/latest?tag=b.y", nil, nil), http.StatusOK,
		`{"values":[{"tag":"b.y","ts":2000,"value":-2.5,"quality":"good"}]}`)
	wantJSON(t, do(t, h, http.MethodGet, "/api/v1/tags", nil, nil), http.StatusOK,
		`{"tags":[{"name":"a.x","first":1000,"last":3000},{"name":"b.y","first":2000,"last":2000}]}`)
}
