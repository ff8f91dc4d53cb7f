package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/store"
)

// centralPith serves the API of a real store over HTTP, guarded by one
// key of scope, and returns its URL, the key and the store.
func centralPith(t *testing.T, scope api.Scope) (string, string, *store.DB) {
	t.Helper()
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	plain, hash := api.GenerateKey()
	auth, err := api.NewAuth([]api.Key{{Name: "edge", Hash: hash, Scope: scope}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(auth.Wrap(api.NewServer(api.WrapDB(db), api.DefaultOptions(), nil).Handler()))
	t.Cleanup(srv.Close)
	return srv.URL, plain, db
}

func newHTTPSink(t *testing.T, o HTTPOptions) *HTTPSink {
	t.Helper()
	s, err := NewHTTPSink(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// storedRows returns every stored sample of tags in time order.
func storedRows(t *testing.T, db *store.DB, tags ...string) []model.Point {
	t.Helper()
	var out []model.Point
	for _, tag := range tags {
		ss, err := db.Raw(tag, math.MinInt64/2, math.MaxInt64/2, 1_000_000)
		if err != nil {
			t.Fatalf("read %s: %v", tag, err)
		}
		for _, s := range ss {
			out = append(out, model.Point{Tag: tag, T: s.T, V: s.V, Q: s.Q})
		}
	}
	return out
}

func TestHTTPSinkRoundTrip(t *testing.T) {
	url, key, db := centralPith(t, api.ScopeWrite)
	s := newHTTPSink(t, HTTPOptions{URL: url + "/", Key: key, Site: "edge1"})
	if got, want := s.Target(), url+"/api/v1/import"; got != want {
		t.Errorf("target %q, want %q", got, want)
	}
	now := time.Now().UnixMilli()
	b1 := []model.Point{
		{Tag: "hx.t_out", T: now, V: 61.5},
		{Tag: "hx.t_out", T: now + 1000, V: 0.30000000000000004, Q: model.QualityUncertain},
		{Tag: "pump.run", T: now + 500, V: 1, Q: model.QualityBad},
		{Tag: "hx.t_out", T: now, V: 61.7}, // same time again: the last wins
		{Tag: "tiny", T: now, V: -5e-324},
	}
	if err := send(t, s, "edge1-1-0", b1); err != nil {
		t.Fatal(err)
	}
	tags := []string{"edge1.hx.t_out", "edge1.pump.run", "edge1.tiny"}
	want := wantRows("edge1", b1)
	checkRows(t, storedRows(t, db, tags...), want)

	// A replay stores the same data again: nothing changes.
	if err := send(t, s, "edge1-1-0", b1); err != nil {
		t.Fatal(err)
	}
	checkRows(t, storedRows(t, db, tags...), want)

	// A later batch overwrites: the last write wins.
	b2 := []model.Point{{Tag: "hx.t_out", T: now + 1000, V: 63}}
	if err := send(t, s, "edge1-1-100", b2); err != nil {
		t.Fatal(err)
	}
	checkRows(t, storedRows(t, db, tags...), wantRows("edge1", b1, b2))
}

func TestHTTPSinkRefusals(t *testing.T) {
	url, key, db := centralPith(t, api.ScopeWrite)
	now := time.Now().UnixMilli()
	good := []model.Point{{Tag: "a", T: now, V: 1}}

	// A wrong key or URL is a config error: retried, not set aside.
	for _, o := range []HTTPOptions{
		{URL: url, Key: "pith_wrong"},
		{URL: url},
		{URL: url + "/nothing/here", Key: key},
	} {
		err := send(t, newHTTPSink(t, o), "x-1-0", good)
		if err == nil || errors.Is(err, ErrPermanent) {
			t.Errorf("send with %+v: %v, want a retryable error", o, err)
		}
	}
	// A value the import refuses refuses the batch; nothing is stored.
	s := newHTTPSink(t, HTTPOptions{URL: url, Key: key})
	bad := []model.Point{{Tag: "a", T: now, V: 1}, {Tag: "a", T: now + 1, V: math.NaN()}}
	if err := send(t, s, "x-1-10", bad); !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "400") {
		t.Errorf("send of NaN: %v, want ErrPermanent with 400", err)
	}
	if _, err := db.Raw("a", 0, math.MaxInt64/2, 10); !errors.Is(err, store.ErrUnknownTag) {
		t.Errorf("after a refused import, tag a: %v, want unknown", err)
	}
	// A delete the write key may not make is skipped and counted.
	del := Batch{ID: "x-1-20", Entries: []Entry{{ID: "x-1-20", Delete: &Delete{Tag: "a", From: 0, To: now}}}}
	if err := s.Send(context.Background(), del); err != nil || s.SkippedDeletes() != 1 {
		t.Errorf("send of a delete with a write key: %v, %d skipped; want nil, 1", err, s.SkippedDeletes())
	}

	// Status codes from a stand-in server.
	var code atomic.Int32
	stub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "status", int(code.Load()))
	}))
	defer stub.Close()
	ss := newHTTPSink(t, HTTPOptions{URL: stub.URL})
	for _, tt := range []struct {
		code      int
		permanent bool
	}{
		{200, false}, {204, false}, {400, true}, {413, true}, {415, true},
		{408, false}, {429, false}, {401, false}, {403, false}, {404, false},
		{500, false}, {502, false}, {503, false},
	} {
		code.Store(int32(tt.code))
		err := send(t, ss, "x-2-0", good)
		switch {
		case tt.code < 300 && err != nil:
			t.Errorf("status %d: %v, want success", tt.code, err)
		case tt.code >= 300 && err == nil:
			t.Errorf("status %d: success, want an error", tt.code)
		case tt.code >= 300 && errors.Is(err, ErrPermanent) != tt.permanent:
			t.Errorf("status %d: %v, permanent = %v, want %v", tt.code, err, !tt.permanent, tt.permanent)
		}
	}
	// A server that is gone is a retried error.
	stub.Close()
	if err := send(t, ss, "x-2-1", good); err == nil || errors.Is(err, ErrPermanent) {
		t.Errorf("send to a closed server: %v, want a retryable error", err)
	}

	for _, u := range []string{"", "ftp://x", "http://", "http://h/?a=b", "127.0.0.1:8080"} {
		if _, err := NewHTTPSink(HTTPOptions{URL: u}, nil); err == nil {
			t.Errorf("NewHTTPSink accepted url %q", u)
		}
	}
}

// TestHTTPSinkForwarder forwards from a store, as pith serve does, in
// batches of the largest size, then a delete.
func TestHTTPSinkForwarder(t *testing.T) {
	url, key, db := centralPith(t, api.ScopeAdmin)
	s := newHTTPSink(t, HTTPOptions{URL: url, Key: key, Site: "edge6"})
	h := openForwarder(t, t.TempDir(), testOptions("edge6"), s)
	now := time.Now().UnixMilli()
	var all []model.Point
	for i := range 25_000 {
		all = append(all, model.Point{Tag: fmt.Sprintf("u%d.v", i%3), T: now + int64(i), V: float64(i)})
	}
	if err := h.db.Write(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	if _, err := h.db.Delete(context.Background(), "u0.v", now, now+300); err != nil {
		t.Fatal(err)
	}
	all = slices.DeleteFunc(all, func(p model.Point) bool { return p.Tag == "u0.v" && p.T < now+300 })
	h.drained()
	h.close()
	checkRows(t, storedRows(t, db, "edge6.u0.v", "edge6.u1.v", "edge6.u2.v"), wantRows("edge6", all))
}

func TestAppendCSVRow(t *testing.T) {
	for _, tt := range []struct {
		p    model.Point
		want string
	}{
		{model.Point{T: 1700000000000, V: 61.5}, "s.t,1700000000000,61.5\n"},
		{model.Point{T: -1, V: -1e-300, Q: model.QualityBad}, "s.t,-1,-1e-300,bad\n"},
		{model.Point{T: 0, V: 0, Q: model.QualityUncertain}, "s.t,0,0,uncertain\n"},
	} {
		if got := string(AppendCSVRow(nil, "s.t", &tt.p)); got != tt.want {
			t.Errorf("row of %+v = %q, want %q", tt.p, got, tt.want)
		}
	}
}

// BenchmarkHTTPSink measures points per second forwarded to another Pith
// (in this process, over loopback HTTP) with batches of 10,000 points
// over 100 tags: CSV encoding, gzip, the import and its commit. Run it
// with
//
//	go test -run x -bench HTTPSink -benchtime 50x ./internal/forward/
func BenchmarkHTTPSink(b *testing.B) {
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := store.Open(b.TempDir(), opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(api.NewServer(api.WrapDB(db), api.DefaultOptions(), nil).Handler())
	defer srv.Close()
	s, err := NewHTTPSink(HTTPOptions{URL: srv.URL, Site: "bench"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	pts := benchPoints()
	now := time.Now().UnixMilli()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for n := range b.N {
		for i := range pts {
			pts[i].T = now + int64(n)*100_000 + int64(i/100)*1000
		}
		if err := s.Send(ctx, pointsBatch(fmt.Sprint(n), pts)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer() // ns/op would otherwise include closing the store
	b.ReportMetric(float64(b.N*len(pts))/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(float64(s.body.Len())/float64(len(pts)), "B/point")
}
