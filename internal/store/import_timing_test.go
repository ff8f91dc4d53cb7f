package store

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// BenchmarkImportDataset imports a standard dataset through one
// transaction, as POST /api/v1/import does, and closes the store:
//
//	PITH_BENCH_DATA=DIR go test -run '^$' -bench ImportDataset -benchtime 1x ./internal/store
func BenchmarkImportDataset(b *testing.B) {
	dir := os.Getenv("PITH_BENCH_DATA")
	if dir == "" {
		b.Skip("set PITH_BENCH_DATA to a directory made by shared/bench/gen_datasets.py")
	}
	for _, name := range []string{"plant", "feed"} {
		b.Run(name, func(b *testing.B) {
			pts := loadCSV(b, filepath.Join(dir, name+".csv"))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				db, err := Open(b.TempDir(), DefaultOptions())
				if err != nil {
					b.Fatal(err)
				}
				tx := db.Begin()
				for k := 0; k < len(pts); k += 1 << 16 {
					e := k + 1<<16
					if e > len(pts) {
						e = len(pts)
					}
					if err := tx.Add(pts[k:e]); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(context.Background()); err != nil {
					b.Fatal(err)
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(pts)*b.N)/b.Elapsed().Seconds(), "points/s")
		})
	}
}

func loadCSV(b *testing.B, path string) []model.Point {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var pts []model.Point
	names := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Bytes()
		a := bytes.IndexByte(l, ',')
		c := bytes.LastIndexByte(l, ',')
		tag, ok := names[string(l[:a])]
		if !ok {
			tag = string(l[:a])
			names[tag] = tag
		}
		t, _ := strconv.ParseInt(string(l[a+1:c]), 10, 64)
		v, _ := strconv.ParseFloat(string(l[c+1:]), 64)
		pts = append(pts, model.Point{Tag: tag, T: t, V: v})
	}
	return pts
}
