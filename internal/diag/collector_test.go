package diag

import (
	"bufio"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/archive"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// fakeClock advances by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// fakeQueue serves settable archive stats.
type fakeQueue struct{ s archive.Stats }

func (q *fakeQueue) Stats() archive.Stats { return q.s }

// fakeStore serves settable store counters.
type fakeStore struct {
	st   store.Stats
	disk int64
}

func (s *fakeStore) Stats() *store.Stats { return &s.st }
func (s *fakeStore) DiskBytes() int64    { return s.disk }

func TestCollectorRatesAndTags(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	q := &fakeQueue{}
	st := &fakeStore{disk: 4096}
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	c := New(Sources{Store: st, Archive: q, Tags: tab, Sink: tab}, nil, Options{Now: clk.now})
	// Start defines the tags; the clock goroutine's first reading races
	// with ours, so stop it and drive Collect by hand.
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Stop()

	c.Collect(true)
	q.s = archive.Stats{Pending: 7, Written: 5000, Enqueued: 5007, Commit: archive.Latency{P99: 3 * time.Millisecond}}
	st.st.WALBytes.Store(10_000)
	st.st.PointsWritten.Store(2000)
	clk.t = clk.t.Add(10 * time.Second)
	c.Collect(true)

	for _, tc := range []struct {
		name string
		want float64
	}{
		{"pith.sys.archive.pending", 7},
		{"pith.sys.archive.performed_per_s", 500},
		{"pith.sys.archive.requests_per_s", 500.7},
		{"pith.sys.archive.commit_ms", 3},
		{"pith.sys.store.bytes", 4096},
		{"pith.sys.store.bytes_written_per_s", 1000},
		{"pith.sys.store.points", 2000},
		{"pith.sys.store.points_per_s", 200},
		{"pith.sys.tags.count", float64(len(c.defs))},
	} {
		got, ok := c.Value(tc.name)
		if !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s = %v (%v), want %v", tc.name, got, ok, tc.want)
		}
	}
	// The readings are tags in the table, with units.
	v, err := tab.Latest("pith.sys.archive.pending")
	if err != nil || !v[0].Has || v[0].V != 7 || v[0].T != clk.t.UnixMilli() {
		t.Fatalf("tag pith.sys.archive.pending = %+v, %v", v, err)
	}
	id, _ := tab.Lookup("pith.sys.process.rss_bytes")
	if d, _ := tab.Def(id); d.Unit != "B" || d.Source != "pith" {
		t.Fatalf("rss def = %+v", d)
	}
	if rss, _ := c.Value("pith.sys.process.rss_bytes"); rss <= 0 {
		t.Errorf("rss = %v", rss)
	}
	if g, _ := c.Value("pith.sys.process.goroutines"); g < 1 {
		t.Errorf("goroutines = %v", g)
	}
}

func TestFastClockSkipsSlowFigures(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	st := &fakeStore{disk: 1}
	q := &fakeQueue{}
	c := New(Sources{Store: st, Archive: q}, nil, Options{Now: clk.now})
	c.Collect(false)
	if _, ok := c.Value("pith.sys.store.bytes"); ok {
		t.Fatal("a fast reading set a slow figure")
	}
	q.s.Written = 300
	clk.t = clk.t.Add(time.Second)
	c.Collect(false)
	if v, _ := c.Value("pith.sys.archive.performed_per_s"); v != 300 {
		t.Fatalf("performed_per_s = %v, want 300", v)
	}
}

// parseProm reads the text exposition format back: every sample line
// must follow its own HELP and TYPE lines, names must be valid and values
// parse as floats.
func parseProm(t *testing.T, r io.Reader) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	types := map[string]string{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || (f[1] != "gauge" && f[1] != "counter") {
				t.Fatalf("line %d: bad TYPE %q", n, line)
			}
			types[f[0]] = f[1]
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("line %d: %q", n, line)
		}
		for i, r := range name {
			if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
				t.Fatalf("line %d: bad metric name %q", n, name)
			}
		}
		if types[name] == "" {
			t.Fatalf("line %d: %s has no TYPE", n, name)
		}
		if types[name] == "counter" && !strings.HasSuffix(name, "_total") {
			t.Fatalf("line %d: counter %s without _total", n, name)
		}
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			t.Fatalf("line %d: value %q: %v", n, val, err)
		}
		if _, dup := out[name]; dup {
			t.Fatalf("line %d: %s twice", n, name)
		}
		out[name] = v
	}
	return out
}

func TestMetricsEndpointAndProbes(t *testing.T) {
	q := &fakeQueue{s: archive.Stats{Pending: 42, Dropped: 3}}
	c := New(Sources{Archive: q, Store: &fakeStore{disk: 123}, Budget: fakeBudget{inUse: 4096, refused: 7}}, nil, Options{})
	srv := httptest.NewServer(c.CountRequests(c.Handler()))
	defer srv.Close()

	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/metrics")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain; version=0.0.4") {
		t.Fatalf("/metrics: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	m := parseProm(t, strings.NewReader(body))
	for name, want := range map[string]float64{
		"pith_sys_archive_pending":             42,
		"pith_sys_archive_dropped_total":       3,
		"pith_sys_store_bytes":                 123,
		"pith_sys_http_inflight_bytes":         4096,
		"pith_sys_http_inflight_refused_total": 7,
	} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}
	if _, ok := m["pith_sys_process_rss_bytes"]; !ok {
		t.Error("no pith_sys_process_rss_bytes")
	}

	if resp, _ := get("/-/healthy"); resp.StatusCode != 200 {
		t.Errorf("healthy: %s", resp.Status)
	}
	if resp, _ := get("/-/ready"); resp.StatusCode != 503 {
		t.Errorf("ready before Start: %s, want 503", resp.Status)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get("/-/ready"); resp.StatusCode != 200 {
		t.Errorf("ready after Start: %s", resp.Status)
	}
	c.Stop()
	if resp, _ := get("/-/ready"); resp.StatusCode != 503 {
		t.Errorf("ready after Stop: %s, want 503", resp.Status)
	}
	if got := c.httpRequests.Load(); got != 5 {
		t.Errorf("counted %d requests, want 5", got)
	}
}

func TestWritePrometheusSkipsNaN(t *testing.T) {
	var b strings.Builder
	WritePrometheus(&b, []Metric{{Name: "pith.sys.a", Value: math.NaN()}, {Name: "pith.sys.b", Value: 1.5, Help: "x\ny"}})
	want := "# HELP pith_sys_b x\\ny ()\n# TYPE pith_sys_b gauge\npith_sys_b 1.5\n"
	if b.String() != want {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
}

// benchCollector is a collector over a real store, queue and table.
func benchCollector(b *testing.B) *Collector {
	db, err := store.Open(b.TempDir(), store.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	q := archive.New(db, nil, archive.DefaultOptions())
	b.Cleanup(func() { q.Close(context.Background()) })
	tab := tag.New(nil, tag.DefaultOptions(), q)
	c := New(Sources{Store: db, Archive: q, Tags: tab, Sink: tab}, nil, Options{})
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	c.Stop()
	return c
}

// BenchmarkCollect measures one slow (full) and one fast reading with
// every source real.
// Run: go test -run '^$' -bench Collect ./internal/diag/
func BenchmarkCollect(b *testing.B) {
	c := benchCollector(b)
	for _, slow := range []bool{true, false} {
		name := map[bool]string{true: "slow", false: "fast"}[slow]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Collect(slow)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e3, "us/reading")
		})
	}
}

// BenchmarkCollectCost runs what the clocks do in 10 s (one slow reading
// and nine fast ones) per op and reports it as a share of one core, the
// figure whose budget is 1% (docs/diag.md gives the measured cost).
// Run: go test -run '^$' -bench CollectCost ./internal/diag/
func BenchmarkCollectCost(b *testing.B) {
	c := benchCollector(b)
	b.ReportAllocs()
	for b.Loop() {
		c.Collect(true)
		for range 9 {
			c.Collect(false)
		}
	}
	perTen := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(100*perTen/10, "core-%")
}

// fakeBudget is a memory budget with fixed figures.
type fakeBudget struct{ inUse, refused int64 }

func (b fakeBudget) InUse() int64   { return b.inUse }
func (b fakeBudget) Refused() int64 { return b.refused }

// recSink records what the tag table hands to the archive.
type recSink struct{ pts []model.Point }

func (s *recSink) Enqueue(pts []model.Point) bool {
	s.pts = append(s.pts, pts...)
	return true
}

func (s *recSink) Write(_ context.Context, pts []model.Point) error {
	s.Enqueue(pts)
	return nil
}

// TestFastReadingsNotArchived: the fast clock sets current values only;
// the slow clock archives what changed. Archiving every second kept an
// idle Pith committing its WAL twice a second.
func TestFastReadingsNotArchived(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	q := &fakeQueue{}
	sink := &recSink{}
	tab := tag.New(nil, tag.DefaultOptions(), sink)
	c := New(Sources{Store: &fakeStore{disk: 1}, Archive: q, Tags: tab, Sink: tab}, nil, Options{Now: clk.now})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Stop() // its goroutine took the first reading
	c.Collect(true)
	first := len(sink.pts)
	if first == 0 {
		t.Fatal("the slow reading archived nothing")
	}
	archived := func(name string) []model.Point {
		var out []model.Point
		for _, p := range sink.pts {
			if p.Tag == name {
				out = append(out, p)
			}
		}
		return out
	}
	for i := 1; i < 10; i++ {
		q.s.Pending = int64(i)
		clk.t = clk.t.Add(time.Second)
		c.Collect(false)
		if v, err := tab.Latest("pith.sys.archive.pending"); err != nil || v[0].V != float64(i) {
			t.Fatalf("second %d: current pending = %+v, %v", i, v, err)
		}
	}
	if len(sink.pts) != first {
		t.Fatalf("fast readings archived %d values", len(sink.pts)-first)
	}
	clk.t = clk.t.Add(time.Second)
	c.Collect(true)
	got := archived("pith.sys.archive.pending")
	if len(got) != 2 || got[0].V != 0 || got[1].V != 9 || got[1].T != clk.t.UnixMilli() {
		t.Fatalf("archived pending = %+v, want 0 then 9 at the slow reading", got)
	}
	// An unchanged figure is not archived again.
	if n := len(archived("pith.sys.archive.frozen")); n != 1 {
		t.Fatalf("archive.frozen archived %d times, want once", n)
	}
}
