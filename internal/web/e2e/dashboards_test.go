package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/alarm"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/dashboard"
	"github.com/pith-historian/pith/internal/energy"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
	"github.com/pith-historian/pith/internal/web"
)

// controlLog records control writes, standing in for the plant's audited
// control path.
type controlLog struct {
	mu     sync.Mutex
	writes []string
}

func (c *controlLog) Control(_ context.Context, tag string, v float64, _ string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, tag+"="+strconv.FormatFloat(v, 'g', -1, 64))
	return nil
}

// TestBrowserDashboards builds a dashboard from empty by pointer and
// keyboard, reloads it, makes it public and opens it without a key, writes
// a setpoint from a widget, zooms a kWh chart from years to hours, runs a
// report and compares its CSV with the API's, and runs axe-core on every
// view (dashboards.mjs).
func TestBrowserDashboards(t *testing.T) {
	node, chromium := tools(t)
	if _, err := os.Stat("node_modules/axe-core/axe.min.js"); err != nil {
		t.Skip("axe-core is not installed: run npm ci in internal/web/e2e")
	}
	log := slog.New(slog.DiscardHandler)
	sopts := store.DefaultOptions()
	sopts.Logger = log
	dir := t.TempDir()
	db, err := store.Open(dir, sopts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// A year and a bit of house power at one point a minute (W) and a
	// temperature, ending now.
	now := time.Now().UnixMilli() / 60_000 * 60_000
	from := now - 400*86_400_000
	var pts []model.Point
	for ts := from; ts < now; ts += 60_000 {
		hour := (ts / 3_600_000) % 24
		pts = append(pts, model.Point{Tag: "house.power", T: ts, V: float64(300 + 50*hour)},
			model.Point{Tag: "room.temp", T: ts, V: 18 + float64(hour)/4})
		if len(pts) >= 100_000 {
			if err := db.Write(context.Background(), pts); err != nil {
				t.Fatal(err)
			}
			pts = pts[:0]
		}
	}
	pts = append(pts, model.Point{Tag: "valve.sp", T: now, V: 20})
	if err := db.Write(context.Background(), pts); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	ctl := &controlLog{}
	aopts := api.DefaultOptions()
	aopts.Controller = ctl
	aopts.Meta = func(tag string) (api.TagMeta, bool) {
		if tag == "house.power" {
			return api.TagMeta{Unit: "W"}, true
		}
		return api.TagMeta{}, false
	}
	wopts := web.DefaultOptions()
	wopts.Source, wopts.History = db, db
	ws, err := web.New(wopts, log)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	boards, err := dashboard.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", api.NewServer(api.WrapDB(db), aopts, log).Handler())
	eh := energy.NewHandler(energy.Options{Queries: db, Location: time.Local, Unit: func(tag string) string {
		m, _ := aopts.Meta(tag)
		return m.Unit
	}, Tariffs: []*energy.Tariff{{Name: "flat", Currency: "EUR", Price: 0.3, StandingCharge: 0.4}}})
	for _, p := range energy.Paths {
		mux.Handle(p, eh)
	}
	dh := dashboard.NewHandler(boards, mux, ws.BoardPage(), log)
	for _, p := range dashboard.Paths {
		mux.Handle(p, dh)
	}
	mux.Handle(dashboard.PublicPrefix, dh)
	mux.Handle("/dashboard", ws.BoardPage())
	mux.Handle("/", ws.Handler())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	mountAlarms(t, ctx, mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	cmd := exec.CommandContext(ctx, node, "dashboards.mjs")
	cmd.Env = append(os.Environ(), "PITH_URL="+srv.URL, "PITH_CHROMIUM="+chromium,
		"PITH_NOW="+strconv.FormatInt(now, 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node: %v", err)
	}
	n := 0
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Logf("dashboards.mjs: %s", sc.Text())
			continue
		}
		n++
		status := "ok"
		if !r.OK {
			status = "FAIL"
			t.Errorf("%s: %s", r.Name, r.Detail)
		}
		t.Logf("%-4s %-24s %s %v", status, r.Name, r.Detail, r.Metrics)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("dashboards.mjs: %v\n%s", err, stderr.String())
	}
	if n == 0 {
		t.Fatalf("dashboards.mjs reported nothing\n%s", stderr.String())
	}
	ctl.mu.Lock()
	writes := strings.Join(ctl.writes, ",")
	ctl.mu.Unlock()
	if writes != "valve.sp=42" {
		t.Errorf("control writes %q, want valve.sp=42 from the setpoint widget", writes)
	}
}

// mountAlarms runs a real alarm engine watching boiler.temp (hi 80, alarm
// boiler.hot) and serves it, with POST /test/set?v=X writing boiler.temp
// into its tag table, for the browser to walk a lamp through the alarm
// states.
func mountAlarms(t *testing.T, ctx context.Context, mux *http.ServeMux) {
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	id, err := tab.Define(tag.Def{Name: "boiler.temp"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := alarm.New([]alarm.Def{{Name: "boiler.hot", Kind: alarm.KindHi, Tag: "boiler.temp", Limit: 80, Severity: "major"}},
		nil, tab, alarm.DefaultOptions(), nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); e.Run(ctx) }()
	t.Cleanup(func() { <-done })
	h := e.Handler()
	mux.Handle("/api/v1/alarms", h)
	mux.Handle("/api/v1/alarms/", h)
	mux.HandleFunc("/test/set", func(w http.ResponseWriter, r *http.Request) {
		v, err := strconv.ParseFloat(r.URL.Query().Get("v"), 64)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		tab.Update([]tag.Sample{{ID: id, T: time.Now().UnixMilli(), V: v, Q: model.QualityGood}})
	})
}
