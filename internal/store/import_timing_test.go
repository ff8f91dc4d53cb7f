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
// transaction, as POST /api/v1/import does, and closes the store. Besides
// the rate it reports the bytes written a point: run files the bulk load
// wrote (bulk-B/point), those merges and packs wrote again
// (merge-B/point), and the store's size after Close (disk-B/point):
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
			var run, merge, disk int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tmp := b.TempDir()
				db, err := Open(tmp, DefaultOptions())
				if err != nil {
					b.Fatal(err)
				}
				bulkLoad(b, db, pts, 1<<16)
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				st := db.Stats()
				run += st.RunBytes.Load()
				merge += st.MergeBytes.Load()
				disk += dirSize(b, tmp)
			}
			n := float64(len(pts) * b.N)
			b.ReportMetric(n/b.Elapsed().Seconds(), "points/s")
			b.ReportMetric(float64(run-merge)/n, "bulk-B/point")
			b.ReportMetric(float64(merge)/n, "merge-B/point")
			b.ReportMetric(float64(disk)/n, "disk-B/point")
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

// BenchmarkImportTags imports the same number of points for ever more
// tags, each at one value a minute in time order, as `pith bench scale`
// sends them: two transactions of 8M points, the second meeting the
// first's days. The rate should not fall with the tag count:
//
//	go test -run '^$' -bench ImportTags -benchtime 1x ./internal/store
func BenchmarkImportTags(b *testing.B) {
	const perTx, txs = 8 << 20, 2
	for _, tags := range []int{1000, 10_000, 100_000} {
		b.Run(strconv.Itoa(tags), func(b *testing.B) {
			names := make([]string, tags)
			for i := range names {
				names[i] = "scale.t" + strconv.Itoa(i)
			}
			batch := make([]model.Point, 1<<16)
			var size int64
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				dir := b.TempDir()
				db, err := Open(dir, DefaultOptions())
				if err != nil {
					b.Fatal(err)
				}
				k := 0 // the point's index: minute k/tags, tag k%tags
				for range txs {
					tx := db.Begin()
					for n := 0; n < perTx; n += len(batch) {
						for j := range batch {
							batch[j] = model.Point{Tag: names[k%tags], T: 1_700_000_000_000 + int64(k/tags)*60_000, V: float64(k % 977)}
							k++
						}
						if err := tx.Add(batch); err != nil {
							b.Fatal(err)
						}
					}
					if err := tx.Commit(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				if err := db.Close(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				size = treeSize(b, dir)
				b.StartTimer()
			}
			b.ReportMetric(float64(perTx*txs*b.N)/b.Elapsed().Seconds(), "points/s")
			b.ReportMetric(float64(size)/float64(perTx*txs), "bytes/point")
		})
	}
}

// treeSize is the bytes of the files under dir.
func treeSize(tb testing.TB, dir string) int64 {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err == nil {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
