package store

import (
	"context"
	"math"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
	"weak"

	"github.com/pith-historian/pith/internal/model"
)

// headLoad writes ten minutes of the soak's kind of load (cmd/pith
// soak_test.go) at about 1,000 values/s: counters posted in bursts of
// six milliseconds, counters every 20 ms with jitter, polled registers,
// and plant values (decimals walking, full-precision floats). It returns
// the samples written by tag.
func headLoad(t testing.TB, db *DB, t0 int64) map[string]int {
	type tag struct {
		name   string
		period int64 // ms between samples
		kind   int   // 0 counter, 1 decimal walk, 2 full float
	}
	var tags []tag
	for i := range 10 {
		tags = append(tags, tag{"lp.f" + strconv.Itoa(i), 16, 0}) // 60/s
	}
	for i := range 5 {
		tags = append(tags, tag{"mq.c" + strconv.Itoa(i), 20, 0}) // 50/s
	}
	for i := range 6 {
		tags = append(tags, tag{"plant.t" + strconv.Itoa(i), 100, 1 + i%2}) // 10/s
	}
	counts := map[string]int{}
	const span = 600_000 // ten minutes, ms
	const batch = 10_000 // ms of load per write
	state := make([]float64, len(tags))
	for from := int64(0); from < span; from += batch {
		var pts []model.Point
		for k, tg := range tags {
			for ms := from; ms < from+batch; ms += tg.period {
				ts := t0 + ms + (ms*7919+int64(k)*31)%5 // jitter of a few ms
				var v float64
				switch tg.kind {
				case 0:
					state[k]++
					v = state[k]
				case 1:
					state[k] += float64((ms/tg.period*13+int64(k))%7-3) / 100
					v = math.Round(state[k]*100) / 100
				default:
					v = 50 + 10*math.Sin(float64(ms)/7000) + float64(ms%97)/1013
				}
				pts = append(pts, model.Point{Tag: tg.name, T: ts, V: v})
				counts[tg.name]++
			}
		}
		if err := db.Write(context.Background(), pts); err != nil {
			t.Fatal(err)
		}
	}
	return counts
}

// TestHeadMemory checks that the in-memory head holds its samples
// encoded: ten minutes at 1,000 values/s (the default head_max_age) must
// keep under 4 bytes a sample live, where raw arrays kept 17 plus the
// slack of their doubling (about 25). A head that goes back to raw
// samples, or keeps them twice, fails it. It also reads every sample
// back from the head, and again after the flush.
func TestHeadMemory(t *testing.T) {
	opts := DefaultOptions()
	opts.Durability = DurabilityRelaxed
	opts.HeadMaxAge = time.Hour // nothing flushes while it is measured
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const t0 = int64(20_000)*partitionMs + 3_600_000
	// A first write creates the tags, the WAL segment and its buffers.
	if err := db.Write(context.Background(), []model.Point{{Tag: "warm", T: t0 - 1, V: 1}}); err != nil {
		t.Fatal(err)
	}
	before := idleHeap()
	counts := headLoad(t, db, t0)
	after := idleHeap()
	n := 0
	for _, c := range counts {
		n += c
	}
	perSample := (float64(after) - float64(before)) / float64(n)
	t.Logf("head of %d samples: %.0f kB live, %.2f B a sample", n, (float64(after)-float64(before))/1e3, perSample)
	if perSample > 4 {
		t.Errorf("the head keeps %.2f bytes a sample live, want at most 4", perSample)
	}
	check := func(when string) {
		t.Helper()
		for tag, c := range counts {
			got, err := db.Raw(tag, t0, t0+700_000, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != c {
				t.Fatalf("%s: %s holds %d samples, want %d", when, tag, len(got), c)
			}
			for i := 1; i < len(got); i++ {
				if got[i].T <= got[i-1].T {
					t.Fatalf("%s: %s: sample %d at %d after %d", when, tag, i, got[i].T, got[i-1].T)
				}
			}
		}
	}
	check("in the head")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	check("flushed")
}

// TestHeadFlushMemory checks that a flush decodes the head one series at
// a time: what it allocates stays within a few times the largest series'
// raw samples plus the run writer's fixed buffers, whatever the head's
// size. Decoding the whole head first (as raw heads were written) would
// allocate all of it.
func TestHeadFlushMemory(t *testing.T) {
	db := openHeadDB(t)
	defer db.Close()
	const t0 = int64(20_000)*partitionMs + 3_600_000
	counts := headLoad(t, db, t0)
	n, largest := 0, 0
	for _, c := range counts {
		n += c
		largest = max(largest, c)
	}
	// The head is frozen and written three times (the runs are not
	// installed); the least counts: TotalAlloc counts every goroutine's
	// allocations, and the store's own maintenance runs meanwhile. flushMu
	// is taken before the head is frozen: the maintenance loop would
	// otherwise flush it in between (seen under qemu).
	alloc := func() float64 {
		db.flushMu.Lock()
		defer db.flushMu.Unlock()
		db.rotate()
		db.mu.RLock()
		frozen := slices.Clone(db.frozen)
		db.mu.RUnlock()
		if len(frozen) != 1 {
			t.Fatalf("%d frozen heads after the rotation, want 1", len(frozen))
		}
		least := math.MaxFloat64
		for range 3 {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			runs, err := db.writeHeadRuns(frozen[0].series, true)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			least = min(least, float64(after.TotalAlloc-before.TotalAlloc))
			db.discard(runs)
		}
		return least
	}()
	head := float64(17 * n)
	bound := 4*float64(17*largest) + 2e6
	t.Logf("flush of %d samples (largest series %d) allocated %.2f MB, %.2f times the raw head", n, largest, alloc/1e6, alloc/head)
	if alloc > bound && !raceEnabled {
		t.Errorf("flush allocated %.2f MB, over %.2f MB (the raw head is %.2f MB)", alloc/1e6, bound/1e6, head/1e6)
	}
}

// TestFlushedHeadReleased checks that nothing keeps a head once it is
// flushed: the slice of frozen heads kept the last one (its array) until
// the next rotation, so a process held two heads' worth of samples.
func TestFlushedHeadReleased(t *testing.T) {
	db := openHeadDB(t)
	defer db.Close()
	if err := db.Write(t.Context(), []model.Point{{Tag: "a", T: 1_700_000_000_000, V: 1}}); err != nil {
		t.Fatal(err)
	}
	db.mu.RLock()
	h := weak.Make(db.active)
	db.mu.RUnlock()
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.GC()
	if h.Value() != nil {
		t.Error("the flushed head is still reachable")
	}
}
