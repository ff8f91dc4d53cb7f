package store

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// TestHeadBlocksModel writes numbers and texts in small batches with late
// and repeated timestamps, so that they cross many sealed blocks of the
// head, and checks what the head answers, then what the runs answer after
// the flush, against a model where the last write of a time wins.
func TestHeadBlocksModel(t *testing.T) {
	db := openHeadDB(t)
	defer db.Close()
	rng := rand.New(rand.NewPCG(3, 4))
	const t0 = int64(20_000)*partitionMs + 1000
	nums := map[string]map[int64]float64{"n.a": {}, "n.b": {}}
	texts := map[int64]string{}
	for batch := range 60 {
		var pts []model.Point
		var tps []model.TextPoint
		for range 50 {
			// Mostly in order, some late, some repeated.
			ts := t0 + int64(batch*50) + rng.Int64N(60)
			if rng.IntN(10) == 0 {
				ts = t0 + rng.Int64N(int64(batch*50+1))
			}
			for tag, m := range nums {
				v := float64(rng.IntN(1000)) / 10
				pts = append(pts, model.Point{Tag: tag, T: ts, V: v})
				m[ts] = v
			}
			x := "s" + strconv.Itoa(rng.IntN(100))
			tps = append(tps, model.TextPoint{Tag: "x.a", T: ts, Text: x})
			texts[ts] = x
		}
		if err := db.Write(t.Context(), pts); err != nil {
			t.Fatal(err)
		}
		if err := db.WriteText(t.Context(), tps); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		for tag, m := range nums {
			got, err := db.Raw(tag, t0, t0+partitionMs, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(m) {
				t.Fatalf("%s: %s has %d samples, want %d", when, tag, len(got), len(m))
			}
			for i, s := range got {
				if i > 0 && s.T <= got[i-1].T || m[s.T] != s.V {
					t.Fatalf("%s: %s sample %d: %d=%v, want %v (last write)", when, tag, i, s.T, s.V, m[s.T])
				}
			}
		}
		got, err := db.RawText("x.a", t0, t0+partitionMs, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(texts) {
			t.Fatalf("%s: x.a has %d texts, want %d", when, len(got), len(texts))
		}
		for i, s := range got {
			if i > 0 && s.T <= got[i-1].T || texts[s.T] != s.Text {
				t.Fatalf("%s: x.a text %d: %d=%q, want %q (last write)", when, i, s.T, s.Text, texts[s.T])
			}
		}
	}
	check("in the head")
	// Rotated out, the head is sorted by its flush, not by the rotation:
	// held off here (flushMu), it is read unsorted, under its lock.
	db.flushMu.Lock()
	db.rotate()
	db.mu.RLock()
	unsorted := len(db.frozen) == 1 && !db.frozen[0].sorted.Load()
	db.mu.RUnlock()
	if !unsorted {
		db.flushMu.Unlock()
		t.Fatal("the rotated head is sorted before its flush")
	}
	check("in a frozen head not yet sorted")
	db.flushMu.Unlock()
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	check("flushed")
}

// TestSealStagger: series written together (one sample of each per write,
// as a live batch) seal their first blocks over sealStagger writes, not
// all at the one write where their tails fill.
func TestSealStagger(t *testing.T) {
	const series = 10000
	h := newHead()
	blocks := 0
	most := 0
	for k := range 2 * headBlockSamples {
		h.mu.Lock()
		for id := range uint32(series) {
			h.appendLocked(id, int64(k), float64(k), model.QualityGood, time.Now)
		}
		n := 0
		for _, s := range h.series {
			if s != nil {
				n += len(s.blocks)
			}
		}
		h.mu.Unlock()
		most = max(most, n-blocks)
		blocks = n
	}
	if want := (series + sealStagger - 1) / sealStagger; most > want {
		t.Errorf("one write sealed %d blocks, want at most %d", most, want)
	}
	if blocks < series {
		t.Errorf("%d blocks after %d samples a series, want at least %d", blocks, 2*headBlockSamples, series)
	}
}

// openHeadDB opens a store in a temporary directory whose head is flushed
// only by the test (an hour's age), relaxed so that writes are quick;
// mods change its options before it opens.
func openHeadDB(tb testing.TB, mods ...func(*Options)) *DB {
	tb.Helper()
	opts := DefaultOptions()
	opts.Durability = DurabilityRelaxed
	opts.HeadMaxAge = time.Hour
	for _, mod := range mods {
		mod(&opts)
	}
	db, err := Open(tb.TempDir(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	return db
}

// TestHeadLimit: an active head of more than liveSeries series waits for
// livePerSeries samples a series, within liveMaxHeads heads, and while
// its sealed blocks take less than liveBytesPerSample bytes a sample of
// HeadMaxSamples.
func TestHeadLimit(t *testing.T) {
	const most = 1 << 20
	db := &DB{opts: Options{HeadMaxSamples: most}}
	for _, c := range []struct{ count, want int }{
		{0, most}, {1, most}, {4, most}, {2048, most}, {2049, 2049 * 2048}, {4096, 8 * most}, {10000, 16 * most}, {100000, 16 * most},
	} {
		if got := db.headLimit(c.count); got != c.want {
			t.Errorf("headLimit(%d) = %d, want %d", c.count, got, c.want)
		}
	}
	// A small HeadMaxSamples, as tests set it, does not lengthen the head
	// of a few series.
	small := &DB{opts: Options{HeadMaxSamples: 500}}
	if got := small.headLimit(4); got != 500 {
		t.Errorf("headLimit(4) with HeadMaxSamples 500 = %d, want 500", got)
	}
	for _, c := range []struct {
		samples, count, bytes int
		want                  bool
	}{
		{most - 1, 100, 0, false},
		{most, 100, 0, true},
		{most, 10000, 0, false},
		{most - 1, 10000, 32 * most, false},
		{most, 10000, 32*most - 1, false},
		{most, 10000, 32 * most, true},
		{16*most - 1, 10000, 0, false},
		{16 * most, 10000, 0, true},
	} {
		if got := db.headFull(c.samples, c.count, c.bytes); got != c.want {
			t.Errorf("headFull(%d, %d, %d) = %v, want %v", c.samples, c.count, c.bytes, got, c.want)
		}
	}
}

// TestHeadRotatesAtBytes: a head of many tags whose values compress well
// waits for livePerSeries samples a tag (here the liveMaxHeads bound), and
// one of values that compress badly rotates once its blocks take
// liveBytesPerSample bytes for each of HeadMaxSamples, long before.
func TestHeadRotatesAtBytes(t *testing.T) {
	// Enough samples a tag that its blocks are sealed (headBlockSamples).
	const tags, most = liveSeries + 52, 1 << 16
	for _, c := range []struct {
		name     string
		value    func(r *rand.Rand, i, k int) float64
		min, max int // samples in the head when it rotated
	}{
		{"compressible", func(_ *rand.Rand, i, k int) float64 { return float64(i) }, liveMaxHeads * most, liveMaxHeads*most + tags},
		{"noisy", func(r *rand.Rand, _, _ int) float64 { return r.NormFloat64() }, most, liveMaxHeads * most * 2 / 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := openHeadDB(t, func(o *Options) { o.HeadMaxSamples = most })
			defer db.Close()
			r := rand.New(rand.NewPCG(1, 2))
			db.mu.RLock()
			first := db.active
			db.mu.RUnlock()
			pts := make([]model.Point, tags)
			for k := 0; ; k++ {
				for i := range pts {
					pts[i] = model.Point{Tag: "h." + strconv.Itoa(i), T: int64(k+1) * 1000, V: c.value(r, i, k)}
				}
				if err := db.Write(context.Background(), pts); err != nil {
					t.Fatal(err)
				}
				db.mu.RLock()
				rotated := db.active != first
				db.mu.RUnlock()
				if rotated {
					break
				}
				if k > 1000 {
					t.Fatal("the head never rotated")
				}
			}
			n, _, bytes := first.fill()
			t.Logf("rotated at %d samples, %d bytes of blocks", n, bytes)
			if n < c.min || n > c.max {
				t.Fatalf("rotated at %d samples, want %d to %d", n, c.min, c.max)
			}
		})
	}
}

// TestHeadBytes: the head counts the bytes of the blocks its series seal.
func TestHeadBytes(t *testing.T) {
	h := newHead()
	h.mu.Lock()
	for k := range 10 * headBlockSamples {
		for id := range uint32(3) {
			h.appendLocked(id, int64(k), float64(k%7)+float64(id), model.QualityGood, time.Now)
		}
	}
	h.appendTextLocked(5, 1, "some text", model.QualityGood, time.Now)
	h.mu.Unlock()
	want := 0
	for _, s := range h.series {
		if s != nil {
			for _, b := range s.blocks {
				want += len(b.data)
			}
		}
	}
	if _, _, got := h.fill(); got != want || want == 0 {
		t.Fatalf("head bytes = %d, want %d (the sum of its blocks, not 0)", got, want)
	}
}

// TestFrozenHeadReadWhileSorted reads tags while their heads are rotated
// and flushed, the writes a little out of order (as commits in flight
// together are), so that queries meet frozen heads that their flush is
// still sorting (sortFrozen): every answer must be in time order and hold
// every sample written before it started. Run with -race.
func TestFrozenHeadReadWhileSorted(t *testing.T) {
	db := openHeadDB(t)
	defer db.Close()
	const tags, batches = 50, 400
	const t0 = int64(20_000)*partitionMs + 1000
	names := make([]string, tags)
	for i := range names {
		names[i] = "f.t" + strconv.Itoa(i)
	}
	var written atomic.Int64 // batches written, all of them durable
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := range batches {
			pts := make([]model.Point, tags)
			for i := range pts {
				// Each odd batch is stamped before the even one it follows.
				ts := t0 + int64(k^1)*10
				pts[i] = model.Point{Tag: names[i], T: ts, V: float64(k)}
			}
			if err := db.Write(t.Context(), pts); err != nil {
				t.Error(err)
				return
			}
			written.Store(int64(k + 1))
			if k%50 == 49 {
				db.rotate() // the maintenance loop flushes it
			}
		}
	}()
	defer func() { <-done }() // before Close
	for reading := true; reading; {
		select {
		case <-done:
			reading = false
		default:
		}
		n := written.Load()
		if n == 0 {
			continue
		}
		got, err := db.Raw(names[int(n)%tags], t0, t0+partitionMs, 0)
		if err != nil {
			t.Error(err)
			return
		}
		for i := 1; i < len(got); i++ {
			if got[i].T <= got[i-1].T {
				t.Errorf("sample %d at %d after %d: not in time order", i, got[i].T, got[i-1].T)
				return
			}
		}
		if int64(len(got)) < n {
			t.Errorf("%d samples after %d batches", len(got), n)
			return
		}
	}
}
