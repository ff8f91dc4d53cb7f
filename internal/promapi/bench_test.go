package promapi

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// The Grafana target: query_range of avg_over_time over the whole feed
// dataset with 1000 steps. Run it with
//
//	PITH_BENCH_DATA=DIR go test -run XXX -bench QueryRangeFeed ./internal/promapi/
//
// where DIR holds the standard feed.csv dataset (README.md, "Performance").
// The first run imports it into a store kept in $TMPDIR/pith-promapi-feed
// for later runs.

// feedStore opens the kept feed store, importing it when missing.
func feedStore(b *testing.B) *store.DB {
	dir := os.Getenv("PITH_BENCH_DATA")
	if dir == "" {
		b.Skip("set PITH_BENCH_DATA to a directory holding the standard feed.csv (README.md, \"Performance\")")
	}
	csvPath := filepath.Join(dir, "feed.csv")
	if _, err := os.Stat(csvPath); err != nil {
		b.Skipf("no feed dataset at %s (set PITH_BENCH_DATA to a directory from gen_datasets.py): %v", csvPath, err)
	}
	sdir := filepath.Join(os.TempDir(), "pith-promapi-feed")
	done := filepath.Join(sdir, "imported")
	opts := store.DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	if _, err := os.Stat(done); err != nil {
		_ = os.RemoveAll(sdir)
		db, err := store.Open(sdir, opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := importCSV(db, csvPath); err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(done, nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	db, err := store.Open(sdir, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

// importCSV loads tag,ms,value rows in one transaction.
func importCSV(db *store.DB, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tx := db.Begin()
	defer tx.Rollback()
	batch := make([]model.Point, 0, 64<<10)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(sc.Text(), ",")
		if len(parts) != 3 {
			return fmt.Errorf("bad row %q", sc.Text())
		}
		ts, err1 := strconv.ParseInt(parts[1], 10, 64)
		v, err2 := strconv.ParseFloat(parts[2], 64)
		if err1 != nil || err2 != nil {
			return fmt.Errorf("bad row %q", sc.Text())
		}
		batch = append(batch, model.Point{Tag: parts[0], T: ts, V: v})
		if len(batch) == cap(batch) {
			if err := tx.Add(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if err := tx.Add(batch); err != nil {
		return err
	}
	return tx.Commit(context.Background())
}

func BenchmarkQueryRangeFeed(b *testing.B) {
	db := feedStore(b)
	var info store.TagInfo
	for _, ti := range db.Tags() {
		if ti.Name == "power" {
			info = ti
		}
	}
	if info.Name == "" {
		b.Fatal("feed store has no power tag")
	}
	for _, tc := range []struct {
		name     string
		pushdown bool
	}{{"rollups", true}, {"raw", false}} {
		b.Run(tc.name, func(b *testing.B) {
			opts := DefaultOptions()
			opts.MaxRawSamples = 20_000_000
			opts.MaxSamples = 20_000_000
			h := NewHandler(db, opts, nil)
			h.noPushdown = !tc.pushdown
			start, end := info.First/1000, (info.Last+999)/1000
			step := (end - start + 998) / 999 // 1000 evaluation steps
			form := url.Values{
				"query": {fmt.Sprintf("avg_over_time(power[%ds])", step)},
				"start": {strconv.FormatInt(start, 10)},
				"end":   {strconv.FormatInt(start+999*step, 10)},
				"step":  {strconv.FormatInt(step, 10)},
			}
			target := "/api/v1/query_range?" + form.Encode()
			var points int
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
				if rec.Code != 200 {
					b.Fatalf("status %d: %s", rec.Code, rec.Body.String())
				}
				points = strings.Count(rec.Body.String(), "],[") + 1
			}
			if points != 1000 {
				b.Fatalf("%d points, want 1000", points)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/query")
		})
	}
}

// BenchmarkAppendResult measures the JSON writer on a 1000-point matrix:
// go test -run XXX -bench AppendResult ./internal/promapi/
func BenchmarkAppendResult(b *testing.B) {
	db := openStore(b, nil)
	_ = db
	var pts points
	for i := range 1000 {
		pts = append(pts, point{t: 1_700_000_000_000 + int64(i)*60_000, f: float64(i) * 1.25})
	}
	m := matrixOf(seriesLabels("site.power", nil), pts)
	buf := make([]byte, 0, 64<<10)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendResult(buf[:0], m)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportMetric(1000*float64(b.N)/b.Elapsed().Seconds(), "points/s")
}
