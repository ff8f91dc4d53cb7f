package store

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store/vfs"
)

// buildTagStore writes tags series at one value a minute for days days
// through a bulk transaction, time-major as the scale benchmark does.
func buildTagStore(t testing.TB, dir string, tags, days int) {
	db, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, tags)
	for i := range names {
		names[i] = "site/area" + strconv.Itoa(i%10) + "/tag" + strconv.Itoa(i)
	}
	const t0 int64 = 1_700_006_400_000 // a UTC midnight
	tx := db.Begin()
	pts := make([]model.Point, 0, 1<<16)
	v := make([]float64, tags)
	for m := 0; m < days*1440; m++ {
		ts := t0 + int64(m)*60_000
		for i := range names {
			v[i] += float64((m*7+i*13)%5-2) / 100
			pts = append(pts, model.Point{Tag: names[i], T: ts, V: v[i], Q: model.QualityGood})
			if len(pts) == cap(pts) {
				if err := tx.Add(pts); err != nil {
					t.Fatal(err)
				}
				pts = pts[:0]
			}
		}
	}
	if err := tx.Add(pts); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// idleHeap returns the live heap bytes after a GC.
func idleHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestTagMemoryProfile opens a store of PITH_TAGMEM tags (one value a
// minute for a week) and writes a heap profile of the idle store to
// PITH_TAGMEM_PROFILE; it reports the live heap per tag.
func TestTagMemoryProfile(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PITH_TAGMEM"))
	if n == 0 {
		t.Skip("PITH_TAGMEM (a tag count) unset")
	}
	dir := os.Getenv("PITH_TAGMEM_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if _, err := os.Stat(dir + "/MANIFEST"); err != nil {
		buildTagStore(t, dir, n, 7)
	}
	base := idleHeap()
	db, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Latest(); err != nil {
		t.Fatal(err)
	}
	h := idleHeap()
	fmt.Printf("idle heap: %d bytes, %.0f bytes/tag\n", h-base, float64(h-base)/float64(n))
	if p := os.Getenv("PITH_TAGMEM_PROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		pprof.Lookup("heap").WriteTo(f, 0)
		f.Close()
	}
	// The first read of a tag after open reads the indexes of its days
	// again; the next one finds them in memory.
	const t0 = 1_700_006_400_000
	for _, what := range []string{"first", "second"} {
		start := time.Now()
		if _, err := db.Aggregate("site/area1/tag1", t0, t0+7*86_400_000, 1000, model.AggMean); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%s 1000-bucket mean over the week: %v\n", what, time.Since(start))
	}
	fmt.Printf("heap with the week's indexes read: %d bytes\n", idleHeap()-base)
	runtime.KeepAlive(db)
}

// TestDroppedIndexesAnswerTheSame drops the run indexes of a store of
// many tags (as Open and the idle sweep do) and checks that every read
// answers as before, also while other goroutines drop them again, and
// that a merge of the day still keeps every sample.
func TestDroppedIndexesAnswerTheSame(t *testing.T) {
	dir := t.TempDir()
	const tags, days = 200, 3
	buildTagStore(t, dir, tags, days)
	db, err := Open(dir, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	dropped := func() int {
		n := 0
		db.mu.RLock()
		for _, rs := range db.parts {
			for _, r := range rs {
				if r.idx.Load() == nil {
					n++
				}
			}
		}
		db.mu.RUnlock()
		return n
	}
	if dropped() == 0 {
		t.Fatal("Open kept every run index of a 200-tag store")
	}
	const t0, span = 1_700_006_400_000, days * 86_400_000
	type answer struct {
		agg []Bucket
		raw []model.Sample
	}
	read := func(tag string) answer {
		a, err := db.Aggregate(tag, t0, t0+span, 100, model.AggMean)
		if err != nil {
			t.Error(err)
		}
		r, err := db.Raw(tag, t0+86_000_000, t0+90_000_000, 0)
		if err != nil {
			t.Error(err)
		}
		return answer{a, r}
	}
	names := make([]string, 0, tags)
	for _, ti := range db.Tags() {
		names = append(names, ti.Name)
	}
	if len(names) != tags {
		t.Fatalf("%d tags, want %d", len(names), tags)
	}
	want := make(map[string]answer)
	for _, n := range names {
		want[n] = read(n)
		if len(want[n].raw) != 66 || len(want[n].agg) != 100 {
			t.Fatalf("%s: %d raw samples, %d buckets", n, len(want[n].raw), len(want[n].agg))
		}
	}
	if dropped() != 0 {
		t.Fatal("reads did not bring the indexes back")
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				db.dropIdleIndexes(true)
			}
		}
	}()
	for round := 0; round < 3; round++ {
		for _, n := range names {
			if got := read(n); fmt.Sprint(got) != fmt.Sprint(want[n]) {
				t.Fatalf("%s after a drop: answers differ", n)
			}
		}
	}
	close(stop)
	<-done
	// An idle sweep keeps what was used since the previous one.
	db.dropIdleIndexes(true)
	read(names[0])
	db.dropIdleIndexes(false)
	if dropped() != 0 {
		t.Fatal("the sweep dropped indexes used since the previous sweep")
	}
	db.dropIdleIndexes(false)
	if dropped() == 0 {
		t.Fatal("the sweep kept indexes unused since the previous sweep")
	}
	if _, err := db.Latest(names[1]); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSeriesSave saves the series file of 100,000 tags, as the
// maintenance loop does each second in which new tags appeared: the
// allocation per save (B/op) is garbage the collector lets RSS grow by.
func BenchmarkSeriesSave(b *testing.B) {
	s := newSeriesTable()
	s.mu.Lock()
	for i := range 100_000 {
		s.getOrCreateLocked([]byte("site/area" + strconv.Itoa(i%100) + "/tag" + strconv.Itoa(i)))
	}
	s.mu.Unlock()
	dir := b.TempDir()
	b.ReportAllocs()
	for b.Loop() {
		s.saved = 0 // a new tag appeared
		if err := s.save(vfs.OS{}, dir); err != nil {
			b.Fatal(err)
		}
	}
}
