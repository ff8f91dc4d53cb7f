package ingest

import (
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/store"
)

// TestServeForPeers runs the push inputs over a real store so outside
// clients (a line-protocol load generator, wrk) can be pointed at them:
//
//	PITH_SERVE_ADDR=127.0.0.1:18086 PITH_SERVE_SECONDS=120 \
//	  go test -run TestServeForPeers -timeout 0 ./internal/ingest/
//
// then post to http://127.0.0.1:18086/write?db=bench&precision=ms.
//
// PITH_SERVE_RELAXED=1 opens the store with relaxed durability.
func TestServeForPeers(t *testing.T) {
	addr := os.Getenv("PITH_SERVE_ADDR")
	if addr == "" {
		t.Skip("PITH_SERVE_ADDR not set: no server for outside benchmark clients")
	}
	secs, _ := strconv.Atoi(os.Getenv("PITH_SERVE_SECONDS"))
	if secs <= 0 {
		secs = 60
	}
	opts := store.DefaultOptions()
	if os.Getenv("PITH_SERVE_RELAXED") != "" {
		opts.Durability = store.DurabilityRelaxed
	}
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := &http.Server{Addr: addr, Handler: testMux(db, nil)}
	go func() {
		time.Sleep(time.Duration(secs) * time.Second)
		srv.Close()
	}()
	t.Logf("serving on %s for %d s", addr, secs)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		t.Fatal(err)
	}
	st := db.Stats()
	t.Logf("store stats: %+v", st)
}

// testMux mounts every HTTP push input the way the API server does.
func testMux(sink Sink, gate *TagGate) *http.ServeMux {
	mux := http.NewServeMux()
	lo := DefaultLineProtocolOptions()
	lo.Gate = gate
	lp := NewLineProtocol(sink, lo)
	mux.Handle("/write", lp)
	mux.Handle("/api/v2/write", lp)
	mux.HandleFunc("/ping", lp.Ping)
	eo := DefaultEmoncmsOptions()
	eo.Gate = gate
	mux.Handle("/input/", NewEmoncms(sink, eo))
	ro := DefaultRemoteWriteOptions()
	ro.Gate = gate
	mux.Handle("/api/v1/write", NewRemoteWrite(sink, ro))
	return mux
}
