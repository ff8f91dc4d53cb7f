package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/color/palette"
	"image/draw"
	"image/png"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/dashboard"
	"github.com/pith-historian/pith/internal/energy"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/web"
)

// UpdateScreensEnv, set to 1, makes TestBrowserScreenshots write the
// screenshots it takes as the new references instead of comparing.
const UpdateScreensEnv = "PITH_UPDATE_SCREENSHOTS"

// screensDir holds the references: <view>-<desktop|phone>.png, reduced
// to the 216 web-safe colours so that they stay small.
const screensDir = "testdata/screens"

// Tolerance of the comparison: a pixel differs when a channel is off by
// more than one step of the reduced palette (anti-aliasing moves edges by
// a step), and a screenshot fails when more than maxDiffShare of its
// pixels differ.
const (
	maxChannelDiff = 51
	maxDiffShare   = 0.003
)

// screensNow is the fixed "now" of the screenshots: the data ends there
// and the browser's clock stands still on it.
var screensNow = time.Date(2026, 6, 15, 12, 0, 0, 0, time.UTC)

// TestBrowserScreenshots takes every view (live, trend, dashboard, energy,
// report, public display) at desktop and phone widths over fixed data with
// a fixed clock and compares each with its reference in testdata/screens:
// a layout regression fails. PITH_UPDATE_SCREENSHOTS=1 writes the
// references instead (review them before committing).
func TestBrowserScreenshots(t *testing.T) {
	node, chromium := tools(t)
	log := slog.New(slog.DiscardHandler)
	sopts := store.DefaultOptions()
	sopts.Logger = log
	dir := t.TempDir()
	db, err := store.Open(dir, sopts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := screensNow.UnixMilli()
	from := now - 60*86_400_000
	var pts []model.Point
	for ts := from; ts < now; ts += 60_000 {
		hour := float64((ts / 3_600_000) % 24)
		day := float64(ts / 86_400_000 % 7)
		pts = append(pts, model.Point{Tag: "house.power", T: ts, V: 300 + 40*hour + 60*day},
			model.Point{Tag: "room.temp", T: ts, V: 18 + 3*math.Sin(hour/24*2*math.Pi)})
	}
	pts = append(pts, model.Point{Tag: "valve.sp", T: now - 60_000, V: 21})
	if err := db.Write(context.Background(), pts); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	aopts := api.DefaultOptions()
	aopts.Meta = func(tag string) (api.TagMeta, bool) {
		switch tag {
		case "house.power":
			return api.TagMeta{Unit: "W", Description: "house power"}, true
		case "room.temp":
			return api.TagMeta{Unit: "°C", Description: "living room"}, true
		}
		return api.TagMeta{}, false
	}
	wopts := web.DefaultOptions()
	wopts.Source, wopts.History = db, db
	wopts.Now = func() time.Time { return screensNow }
	ws, err := web.New(wopts, log)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	boards, err := dashboard.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	token := screensBoards(t, boards)
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/redundancy", func(w http.ResponseWriter, r *http.Request) { // as pith serve answers outside a pair
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"pair":false}`))
	})
	mux.Handle("/api/", api.NewServer(api.WrapDB(db), aopts, log).Handler())
	eh := energy.NewHandler(energy.Options{Queries: db, Location: time.UTC, Unit: func(tag string) string {
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
	mux.Handle("/api/v1/live", ws.LiveHandler())
	mux.Handle("/", ws.Handler())
	srv := httptest.NewServer(mux)
	defer srv.Close()

	shots := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "screens.mjs")
	cmd.Env = append(os.Environ(), "PITH_URL="+srv.URL, "PITH_CHROMIUM="+chromium, "PITH_SHOTS="+shots,
		"PITH_NOW="+strconv.FormatInt(now, 10), "PITH_TOKEN="+token)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	outp, err := cmd.Output()
	if err != nil {
		t.Fatalf("screens.mjs: %v\n%s", err, stderr.String())
	}
	sc := bufio.NewScanner(bytes.NewReader(outp))
	for sc.Scan() {
		var r result
		if json.Unmarshal(sc.Bytes(), &r) == nil && !r.OK {
			t.Errorf("%s: %s", r.Name, r.Detail)
		}
	}
	update := os.Getenv(UpdateScreensEnv) == "1"
	names, _ := filepath.Glob(filepath.Join(shots, "*.png"))
	if len(names) != 12 {
		t.Errorf("%d screenshots taken, want 12", len(names))
	}
	failed := ""
	for _, f := range names {
		name := filepath.Base(f)
		got, err := quantized(f)
		if err != nil {
			t.Fatal(err)
		}
		ref := filepath.Join(screensDir, name)
		if update {
			if err := writePNG(ref, got); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := readPaletted(ref)
		if err != nil {
			t.Errorf("%s: no reference (%v); run with %s=1 to write it", name, err, UpdateScreensEnv)
			continue
		}
		share, diff := compare(got, want)
		if share > maxDiffShare {
			if failed == "" {
				failed, _ = os.MkdirTemp("", "pith-screens-")
			}
			writePNG(filepath.Join(failed, name), got)
			writePNG(filepath.Join(failed, strings.TrimSuffix(name, ".png")+"-diff.png"), diff)
			t.Errorf("%s: %.2f%% of the pixels differ from the reference (at most %.2f%%); this run's image and a diff are in %s",
				name, 100*share, 100*maxDiffShare, failed)
		}
	}
	if update {
		t.Logf("wrote %d references to %s", len(names), screensDir)
	}
}

// screensBoards makes the dashboards the screenshots show, with fixed ids,
// and returns the public token of the plant's.
func screensBoards(t *testing.T, st *dashboard.Store) string {
	t.Helper()
	f := func(v float64) *float64 { return &v }
	plant := &dashboard.Dashboard{ID: "plant", Title: "Plant", Widgets: []dashboard.Widget{
		{ID: "v", Type: "value", X: 0, Y: 0, W: 3, H: 2, Tags: []string{"house.power"}, Unit: "W", Title: "Power"},
		{ID: "g", Type: "gauge", X: 3, Y: 0, W: 3, H: 2, Tags: []string{"room.temp"}, Unit: "°C", Min: f(10), Max: f(30), High: f(25)},
		{ID: "l", Type: "lamp", X: 6, Y: 0, W: 3, H: 2, Tags: []string{"room.temp"}, High: f(20), Title: "Warm"},
		{ID: "x", Type: "text", X: 9, Y: 0, W: 3, H: 2, Text: "## Plant\n**Fixed** data for the screenshots"},
		{ID: "t", Type: "trend", X: 0, Y: 2, W: 8, H: 4, Tags: []string{"house.power", "room.temp"}, Range: "7d"},
		{ID: "b", Type: "table", X: 8, Y: 2, W: 4, H: 4, Tags: []string{"house.power", "room.temp"}},
		{ID: "bars", Type: "bars", X: 0, Y: 6, W: 12, H: 3, Tags: []string{"house.power"}, Bucket: "day", Range: "14d", Agg: "mean"},
	}}
	d, err := st.Create(plant, false)
	if err != nil {
		t.Fatal(err)
	}
	c := *d
	c.Public = true
	if d, err = st.Put("plant", &c); err != nil {
		t.Fatal(err)
	}
	house := &dashboard.Dashboard{ID: "house", Title: "House energy", Widgets: []dashboard.Widget{
		{ID: "e", Type: "energy", X: 0, Y: 0, W: 8, H: 5, Tags: []string{"house.power"}, Bucket: "day", Range: "30d", Tariff: "flat"},
		{ID: "s", Type: "energy", View: "solar", X: 8, Y: 0, W: 4, H: 5, Tags: []string{"house.power", "house.power"}, Range: "7d"},
		{ID: "h", Type: "histogram", X: 0, Y: 5, W: 12, H: 4, Tags: []string{"room.temp"}, Range: "30d", Bins: 8},
	}}
	if _, err := st.Create(house, false); err != nil {
		t.Fatal(err)
	}
	return d.Token
}

// quantized reads a screenshot and maps it to the web-safe palette.
func quantized(path string) (*image.Paletted, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	p := image.NewPaletted(img.Bounds(), palette.WebSafe)
	draw.Draw(p, p.Rect, img, img.Bounds().Min, draw.Src)
	return p, nil
}

func readPaletted(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return png.Decode(f)
}

func writePNG(path string, img image.Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&b, img); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// compare returns the share of pixels of got differing from want (a size
// change counts every pixel) and an image marking them in red.
func compare(got, want image.Image) (float64, *image.RGBA) {
	gb, wb := got.Bounds(), want.Bounds()
	diff := image.NewRGBA(gb)
	if gb.Size() != wb.Size() {
		return 1, diff
	}
	n := 0
	for y := 0; y < gb.Dy(); y++ {
		for x := 0; x < gb.Dx(); x++ {
			r1, g1, b1, _ := got.At(gb.Min.X+x, gb.Min.Y+y).RGBA()
			r2, g2, b2, _ := want.At(wb.Min.X+x, wb.Min.Y+y).RGBA()
			d := max(absDiff(r1, r2), absDiff(g1, g2), absDiff(b1, b2)) >> 8
			if d > maxChannelDiff {
				n++
				diff.Set(gb.Min.X+x, gb.Min.Y+y, color.RGBA{255, 0, 0, 255})
			} else {
				g := uint8((r1 + g1 + b1) / 3 >> 8)
				diff.Set(gb.Min.X+x, gb.Min.Y+y, color.RGBA{g / 3, g / 3, g / 3, 255})
			}
		}
	}
	return float64(n) / float64(gb.Dx()*gb.Dy()), diff
}

func absDiff(a, b uint32) uint32 {
	if a > b {
		return a - b
	}
	return b - a
}

// TestCompareTolerance: one palette step everywhere (anti-aliasing) is
// within the tolerance; a widget moved by 8 pixels is not.
func TestCompareTolerance(t *testing.T) {
	box := func(x0 int, shade uint8) *image.RGBA {
		img := image.NewRGBA(image.Rect(0, 0, 200, 100))
		draw.Draw(img, img.Rect, image.NewUniform(color.White), image.Point{}, draw.Src)
		draw.Draw(img, image.Rect(x0, 20, x0+60, 80), image.NewUniform(color.RGBA{shade, shade, shade, 255}), image.Point{}, draw.Src)
		return img
	}
	if share, _ := compare(box(20, 51), box(20, 102)); share != 0 {
		t.Fatalf("one palette step: %.3f differ", share)
	}
	if share, _ := compare(box(20, 0), box(28, 0)); share <= maxDiffShare {
		t.Fatalf("a box moved by 8 px: only %.4f differ", share)
	}
	if share, _ := compare(box(20, 0), image.NewRGBA(image.Rect(0, 0, 200, 101))); share != 1 {
		t.Fatalf("a size change: %.3f", share)
	}
}
