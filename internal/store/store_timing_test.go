package store

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// Benchmarks on generated data, runnable anywhere:
//
//	go test -run '^$' -bench 'Bulk|Tiers|Aggregate|SmallWrites' ./internal/store

// feedLike returns n samples every 10 s shaped like the standard feed.
func feedLike(n int) []model.Point {
	rnd := rand.New(rand.NewSource(1))
	pts := make([]model.Point, n)
	spike := 0
	for i := range pts {
		t := int64(1_700_000_000_000) + int64(i)*10_000
		hour := float64(t/1000%86400) / 3600
		base := 180 + 120*math.Pow(math.Sin(2*math.Pi*(hour-7)/24), 2)
		if spike > 0 {
			spike--
		} else if rnd.Float64() < 0.004 {
			spike = 3 + rnd.Intn(58)
		}
		v := math.Floor(base + rnd.NormFloat64()*15)
		if spike > 0 {
			v += 2000
		}
		pts[i] = model.Point{Tag: "power", T: t, V: math.Max(v, 0)}
	}
	return pts
}

// BenchmarkBulkImport is the import path: one transaction of 1M points,
// committed, per iteration.
func BenchmarkBulkImport(b *testing.B) {
	pts := feedLike(1 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		db, err := Open(b.TempDir(), DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		bulkLoad(b, db, pts, 1<<16)
		b.StopTimer()
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(len(pts)*b.N)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkBulkImportFollowed is BenchmarkBulkImport with a follower:
// the transaction's points are also copied to the WAL, so they are written
// twice.
func BenchmarkBulkImportFollowed(b *testing.B) {
	pts := feedLike(1 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		db, err := Open(b.TempDir(), DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.Follow("upstream", FollowOptions{}); err != nil {
			b.Fatal(err)
		}
		bulkLoad(b, db, pts, 1<<16)
		b.StopTimer()
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(len(pts)*b.N)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkSmallWrites is acquisition: 100 points per durable write.
func BenchmarkSmallWrites(b *testing.B) {
	for _, mode := range []Durability{DurabilityRelaxed, DurabilityFsync} {
		b.Run(fmt.Sprint("durability=", mode), func(b *testing.B) {
			o := DefaultOptions()
			o.Durability = mode
			db, err := Open(b.TempDir(), o)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			pts := make([]model.Point, 100)
			for k := range pts {
				pts[k].Tag = fmt.Sprintf("plant.r%d", k)
			}
			// As in a running plant, the tags are known (in the series file).
			if err := db.Write(context.Background(), pts); err != nil {
				b.Fatal(err)
			}
			if err := db.series.save(db.fs, db.dir); err != nil {
				b.Fatal(err)
			}
			wal0 := db.stats.WALBytes.Load()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range pts {
					// Register values, and analog values with 2 decimals.
					pts[k].T, pts[k].V = int64(i+1)*1000, float64((i+k)%1000)
					if k%2 == 1 {
						pts[k].V = float64((i*7+k)%100000) / 100
					}
				}
				if err := db.Write(context.Background(), pts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(pts)*b.N)/b.Elapsed().Seconds(), "points/s")
			b.ReportMetric(float64(db.stats.WALBytes.Load()-wal0)/float64(len(pts)*b.N), "WAL-B/point")
		})
	}
}

// BenchmarkBuildTiers is the rollup work of a flush for a day of 1 s data.
func BenchmarkBuildTiers(b *testing.B) {
	n := 86400
	ts := make([]int64, n)
	vs := make([]float64, n)
	for i := range ts {
		ts[i] = int64(i) * 1000
		vs[i] = math.Round(math.Sin(float64(i)/300)*10000) / 100
	}
	fine := finestTier(n, ts[0], ts[n-1])
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buildTiers(fine, ts, vs)
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "samples/s")
}

// BenchmarkAggregate is a chart: 1000 mean buckets over a year of 10 s
// data, cold (caches emptied) and warm.
func BenchmarkAggregate(b *testing.B) {
	db, err := Open(b.TempDir(), DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	pts := feedLike(3_153_600)
	if err := db.Write(context.Background(), pts); err != nil {
		b.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	from, to := pts[0].T, pts[len(pts)-1].T+1
	for _, warm := range []bool{false, true} {
		b.Run(fmt.Sprint("warm=", warm), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if !warm {
					db.cache = newCaches(db.opts.TierCacheBytes, db.opts.ChunkCacheBytes, db.opts.Now)
				}
				if _, err := db.Aggregate("power", from, to, 1000, model.AggMean); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAggregateSpan times one tag's 1000-bucket mean over a week, a
// year and ten years of the feed data (one value every 10 s): with
// rollups the time should not grow with the span. PITH_SPAN_DIR keeps
// the ten-year store between runs.
func BenchmarkAggregateSpan(b *testing.B) {
	const n = 10 * 3_153_600
	dir := os.Getenv("PITH_SPAN_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	_, err := os.Stat(filepath.Join(dir, "MANIFEST"))
	kept := err == nil
	db, err := Open(dir, DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if !kept {
		bulkLoad(b, db, feedLike(n), 1<<20)
	}
	from := int64(1_700_000_000_000)
	for _, span := range []struct {
		name string
		ms   int64
	}{{"week", 7 * 86_400_000}, {"year", 365 * 86_400_000}, {"10years", n * 10_000}} {
		b.Run(span.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				if _, err := db.Aggregate("power", from, from+span.ms, 1000, model.AggMean); err != nil {
					b.Fatal(err)
				}
			}
			// The process's CPU time a query: on a shared machine ns/op
			// grows with the others' load, this much less.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkRawRepeat is a dashboard polling the last 10 minutes of a
// 10 Hz tag: the same raw read over and over (6,000 samples), from a run
// (flushed) and from the head, through Raw and through RawFunc (whose
// caller copies the samples to its own type, as PromQL's does).
func BenchmarkRawRepeat(b *testing.B) {
	for _, flushed := range []bool{true, false} {
		db, err := Open(b.TempDir(), DefaultOptions())
		if err != nil {
			b.Fatal(err)
		}
		const n = 36_000 // an hour at 10 Hz
		pts := make([]model.Point, n)
		for i := range pts {
			pts[i] = model.Point{Tag: "fast", T: 1_700_000_000_000 + int64(i)*100, V: float64(i%977) / 10}
		}
		if err := db.Write(context.Background(), pts); err != nil {
			b.Fatal(err)
		}
		where := "head"
		if flushed {
			where = "run"
			if err := db.Flush(); err != nil {
				b.Fatal(err)
			}
		}
		to := pts[n-1].T + 1
		b.Run(where+"/Raw", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				s, err := db.Raw("fast", to-600_000, to, 0)
				if err != nil || len(s) != 6000 {
					b.Fatalf("%d samples, %v", len(s), err)
				}
			}
			b.ReportMetric(float64(db.cache.chunks.bytes()), "cached-bytes")
		})
		type point struct {
			t int64
			v float64
		}
		b.Run(where+"/RawFunc", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var out []point
				err := db.RawFunc("fast", to-600_000, to, 0, func(ts []int64, vs []float64, _ []model.Quality) {
					out = make([]point, len(ts))
					for k := range out {
						out[k] = point{ts[k], vs[k]}
					}
				})
				if err != nil || len(out) != 6000 {
					b.Fatalf("%d samples, %v", len(out), err)
				}
			}
		})
		db.Close()
	}
}

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
