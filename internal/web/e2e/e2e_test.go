// Package e2e holds the dashboard's browser tests: a real Pith HTTP server
// (store in t.TempDir(), API, dashboard, tag table) driven by playwright-core
// on Debian's chromium through run.mjs.
//
// Run: cd internal/web/e2e && npm ci && go test -v -run Browser .
// Needs node, /usr/bin/chromium (apt-get install chromium) and
// node_modules/playwright-core; the test skips with a message otherwise.
// PITH_CHROMIUM overrides the browser path; PITH_E2E_FEED_POINTS shrinks
// the generated feed (default 9,000,000 points, 2.85 years at 10 s);
// PITH_E2E_TARGETS=1 makes the time and CPU targets (first trend render
// <= 150 ms, live page CPU <= 20%) fail the test instead of only being
// reported, for a quiet machine.
//
// TestBrowserScreenshots compares every view at desktop and phone widths
// with the PNGs in testdata/screens (fixed data, fixed clock, UTC, reduced
// to the web-safe palette; a pixel may differ by one palette step, and at
// most 0.3% of the pixels beyond that). After an intended layout change,
// PITH_UPDATE_SCREENSHOTS=1 go test -run BrowserScreenshots . rewrites
// them: look at each before committing. On a failure the run's image and
// a diff (differing pixels in red) are kept in a temporary folder named in
// the error.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/pith-historian/pith/internal/testpeer"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/alarm"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
	"github.com/pith-historian/pith/internal/web"
)

// result is one line of run.mjs's output.
type result struct {
	Name    string             `json:"name"`
	OK      bool               `json:"ok"`
	Detail  string             `json:"detail"`
	Metrics map[string]float64 `json:"metrics"`
}

// tools finds node, chromium and playwright-core, or skips.
func tools(t *testing.T) (node, chromium string) {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests are long; skipped in -short mode")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		testpeer.Missing(t, "node not found in PATH: install nodejs to run the browser tests")
	}
	chromium = os.Getenv("PITH_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		testpeer.Missing(t, "chromium not found at %s (apt-get install chromium, or set PITH_CHROMIUM)", chromium)
	}
	if _, err := os.Stat("node_modules/playwright-core/package.json"); err != nil {
		testpeer.Missing(t, "playwright-core is not installed: run npm ci in internal/web/e2e")
	}
	return node, chromium
}

// freezeFake stands in for POST /api/v1/admin/freeze (built elsewhere):
// it checks the request and streams three NDJSON progress lines.
type freezeFake struct {
	mu    sync.Mutex
	calls []string
}

func (f *freezeFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+string(body))
	f.mu.Unlock()
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	rc := http.NewResponseController(w)
	for i, line := range []string{`{"phase":"frozen","pending":1200}`, `{"phase":"draining","pending":300}`, `{"phase":"done","drained_per_s":2500}`} {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		fmt.Fprintln(w, line)
		rc.Flush() //nolint:errcheck // test server
	}
}

func TestBrowser(t *testing.T) {
	node, chromium := tools(t)
	nFeed := feedPoints
	if v := os.Getenv("PITH_E2E_FEED_POINTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("PITH_E2E_FEED_POINTS=%q: want an integer >= 1000", v)
		}
		nFeed = n
	}

	log := slog.New(slog.DiscardHandler)
	sopts := store.DefaultOptions()
	sopts.Logger = log
	sopts.Durability = store.DurabilityRelaxed
	dir := filepath.Join(t.TempDir(), "store")
	db, err := store.Open(dir, sopts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	now := time.Now()
	feedFrom, feedTo, hourStart := loadStore(t, db, now, nFeed)
	// Reopen, as a restarted server would: the bulk load's background
	// merges are finished and the caches are cold, so the first trend
	// measures a cold read rather than a read racing the compaction.
	if err := db.Close(); err != nil {
		t.Fatalf("close store: %v", err)
	}
	if db, err = store.Open(dir, sopts); err != nil {
		t.Fatalf("reopen store: %v", err)
	}
	defer db.Close()

	tb, ids := liveTable(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go churn(ctx, tb, ids)

	units := map[string]api.TagMeta{
		feedTag:    {Unit: "W", Description: "house power, the feed dataset", Source: "import"},
		hourTag:    {Unit: "h", Description: "whole hours since the start", Source: "test"},
		digitalTag: {Description: "valve open (0/1)", Source: "test"},
		xssTag:     {Unit: "<b>u</b>", Description: "<script>alert(3)</script>", Source: "test"},
	}
	aopts := api.DefaultOptions()
	aopts.Meta = func(name string) (api.TagMeta, bool) { m, ok := units[name]; return m, ok }
	apiSrv := api.NewServer(api.WrapDB(db), aopts, log)

	wopts := web.DefaultOptions()
	wopts.Source, wopts.Table, wopts.History = db, tb, db
	wopts.Display = &web.DisplayConfig{Title: "Visitor centre", Refresh: 2 * time.Second, Tiles: []web.DisplayTile{
		{Tag: feedTag, Label: "Power now", Unit: "W", Spark: 24 * time.Hour},
		{Tag: hourTag, Label: "Hours", Decimals: 1, Spark: 48 * time.Hour},
		{Tag: "not.yet", Label: "No data yet"},
	}}
	ws, err := web.New(wopts, log)
	if err != nil {
		t.Fatalf("new web server: %v", err)
	}
	freeze := &freezeFake{}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/live", ws.LiveHandler())
	mux.Handle("/api/v1/admin/freeze", freeze)
	mux.Handle("/api/v1/alarms", alarm.OffHandler()) // as pith serve mounts it with [alarms] off
	// As pith serve answers while no account exists: the pages need no
	// sign-in (people_test.go tests the sign-in).
	mux.HandleFunc("/api/v1/session", func(w http.ResponseWriter, r *http.Request) {
		api.WriteValue(w, http.StatusOK, map[string]any{"signed_in": false, "accounts": false})
	})
	mux.HandleFunc("/api/v1/redundancy", func(w http.ResponseWriter, r *http.Request) { // as pith serve answers outside a pair
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"pair":false}`))
	})
	mux.Handle("/api/", apiSrv.Handler())
	mux.Handle("/", ws.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer ws.Close() // ends live streams so that srv.Close does not wait for them

	shots, err := os.MkdirTemp("", "pith-e2e-shots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)

	cmd := exec.CommandContext(ctx, node, "run.mjs")
	cmd.Env = append(os.Environ(),
		"PITH_URL="+srv.URL,
		"PITH_CHROMIUM="+chromium,
		"PITH_SHOTS="+shots,
		"PITH_FEED_FROM="+strconv.FormatInt(feedFrom, 10),
		"PITH_FEED_TO="+strconv.FormatInt(feedTo, 10),
		"PITH_HOUR_START="+strconv.FormatInt(hourStart, 10),
		"PITH_GAP="+strconv.Itoa(gapFrom)+","+strconv.Itoa(gapTo),
		"PITH_LIVE_TAGS="+strconv.Itoa(liveTags),
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	var results []result
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Logf("run.mjs: %s", sc.Text())
			continue
		}
		results = append(results, r)
		status := "ok"
		if !r.OK {
			status = "FAIL"
			t.Errorf("%s: %s", r.Name, r.Detail)
		}
		t.Logf("%-4s %-28s %s %v", status, r.Name, r.Detail, r.Metrics)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("run.mjs: %v\n%s", err, stderr.String())
	}
	if len(results) == 0 {
		t.Fatalf("run.mjs reported nothing\n%s", stderr.String())
	}
	freeze.mu.Lock()
	calls := strings.Join(freeze.calls, "; ")
	freeze.mu.Unlock()
	if !strings.Contains(calls, `POST {"seconds":3,"watch_seconds":5}`) {
		t.Errorf("freeze endpoint calls = %q, want one POST with seconds 3 and watch_seconds 5", calls)
	}
	if m, _ := filepath.Glob(filepath.Join(shots, "*.png")); len(m) < len(results)/2 {
		t.Errorf("only %d screenshots in %s", len(m), shots)
	}
	// The table must have been an honest subscription source.
	var _ web.Table = (*tag.Table)(nil)
}
