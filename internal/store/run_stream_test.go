package store

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store/vfs"
)

// streamInputs are series of several shapes, ids increasing: dense and
// regular, jittered, sparse, decimal with quality changes, full floats
// crossing a cell boundary mid-chunk.
func streamInputs() []runInput {
	rng := rand.New(rand.NewPCG(7, 9))
	t0 := int64(20_000) * partitionMs
	mk := func(id uint32, n int, next func(i int, t int64) (int64, float64, model.Quality)) runInput {
		in := runInput{id: id}
		t := t0
		for i := range n {
			var v float64
			var q model.Quality
			t, v, q = next(i, t)
			in.ts, in.vs, in.qs = append(in.ts, t), append(in.vs, v), append(in.qs, q)
		}
		return in
	}
	return []runInput{
		mk(1, 5000, func(i int, t int64) (int64, float64, model.Quality) { return t + 1, float64(i), 0 }),
		mk(2, 3000, func(i int, t int64) (int64, float64, model.Quality) {
			return t + 95 + rng.Int64N(10), math.Round(rng.Float64()*1000) / 100, model.Quality(i / 700 % 3)
		}),
		mk(3, 40, func(i int, t int64) (int64, float64, model.Quality) { return t + 3_600_000, float64(i) / 3, 0 }),
		mk(4, 2500, func(i int, t int64) (int64, float64, model.Quality) {
			return t + 7 + rng.Int64N(3), 50 + 10*math.Sin(float64(i)/100) + rng.Float64()/1000, 0
		}),
		mk(5, 1025, func(i int, t int64) (int64, float64, model.Quality) { return t + 10, 1, 0 }),
	}
}

// writeStreamRun writes inputs as a run, each series pushed in pieces of
// the sizes pieces returns (0: whole), as run seq, and returns the
// file's bytes.
func writeStreamRun(t *testing.T, in []runInput, pieces func() int, dropRaw bool, seq uint64) []byte {
	t.Helper()
	dir := t.TempDir()
	rw, err := createRun(vfs.OS{}, dir, in[0].ts[0]/partitionMs, seq, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		s := &in[i]
		n := len(s.ts)
		w := rw.beginSeries(s.id, finestTier(n, s.ts[0], s.ts[n-1]), dropRaw)
		for k := 0; k < n; {
			m := pieces()
			if m == 0 {
				m = n
			}
			m = min(m, n-k)
			pushSamples(w, s.ts[k:k+m], s.vs[k:k+m], s.qs[k:k+m])
			k += m
		}
		w.finish()
	}
	path, err := rw.finish(false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, filepath.Base(path)))
	return b
}

// TestSeriesWriterPieces checks that a series pushed in pieces of any size
// (a merge pushes decoded chunks) is written byte for byte as when pushed
// whole, with and without its raw samples.
func TestSeriesWriterPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dropRaw := range []bool{false, true} {
		whole := writeStreamRun(t, streamInputs(), func() int { return 0 }, dropRaw, 1)
		for _, sizes := range []struct {
			name string
			f    func() int
		}{
			{"one", func() int { return 1 }},
			{"chunk", func() int { return 600 }},
			{"random", func() int { return 1 + rng.IntN(1500) }},
		} {
			got := writeStreamRun(t, streamInputs(), sizes.f, dropRaw, 1)
			if !bytes.Equal(got, whole) {
				t.Errorf("dropRaw %v, pieces %s: %d bytes differ from the %d of the whole series", dropRaw, sizes.name, len(got), len(whole))
			}
		}
	}
}

// TestMergeOverlapStream merges three runs whose samples of a series meet
// and repeat times (the newer run wins) and checks the merged run against
// one written from the expected samples: same bytes.
func TestMergeOverlapStream(t *testing.T) {
	opts := DefaultOptions()
	opts.MaxRunsPerPart = 100
	opts.Durability = DurabilityRelaxed
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	day := int64(20_000) * partitionMs
	want := map[int64]float64{}
	for k, step := range []int64{3, 5, 7} { // runs meet everywhere
		var pts []model.Point
		for i := int64(0); i < 4000; i++ {
			ts := day + i*step + int64(k)
			v := float64(k*100_000) + float64(i)
			pts = append(pts, model.Point{Tag: "o.a", T: ts, V: v})
			want[ts] = v
		}
		if err := db.Write(t.Context(), pts); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	p := day / partitionMs
	r, err := db.mergeRuns(p, db.parts[p], false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	var got runInput
	rs := r.find(r.index()[0].id)
	if err := r.readAll(rs, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.ts) != len(want) {
		t.Fatalf("merged %d samples, want %d", len(got.ts), len(want))
	}
	exp := runInput{id: rs.id}
	for i, ts := range got.ts {
		if i > 0 && ts <= got.ts[i-1] {
			t.Fatalf("sample %d at %d after %d", i, ts, got.ts[i-1])
		}
		if got.vs[i] != want[ts] {
			t.Fatalf("at %d: %v, want %v (the newest write)", ts, got.vs[i], want[ts])
		}
		exp.ts, exp.vs, exp.qs = append(exp.ts, ts), append(exp.vs, want[ts]), append(exp.qs, 0)
	}
	merged, err := os.ReadFile(r.path)
	if err != nil {
		t.Fatal(err)
	}
	direct := writeStreamRun(t, []runInput{exp}, func() int { return 0 }, false, r.seq)
	if !bytes.Equal(merged, direct) {
		t.Errorf("merged run (%d bytes) differs from one written from the expected samples (%d bytes)", len(merged), len(direct))
	}
}

// TestWrittenIndexMatchesFile: a run opened from its writer's memory
// (openWritten) holds the same index as the run read back from its file,
// for numeric series of every shape and text series.
func TestWrittenIndexMatchesFile(t *testing.T) {
	dir := t.TempDir()
	in := streamInputs()
	for _, text := range []bool{false, true} {
		rw, path := writeMixedRun(t, dir, in, text, 1)
		mem, err := openRunIndexed(vfs.OS{}, path, 0, -1, rw)
		if err != nil {
			t.Fatal(err)
		}
		file, err := openRun(vfs.OS{}, path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(mem.index(), file.index()) || mem.part != file.part || mem.seq != file.seq ||
			mem.lo != file.lo || mem.hi != file.hi || mem.total != file.total || mem.text != file.text || mem.rawTiered != file.rawTiered {
			t.Fatalf("text %v: the written index differs from the file's", text)
		}
		if len(mem.index()) != len(in) {
			t.Fatalf("text %v: %d entries, want %d", text, len(mem.index()), len(in))
		}
		mem.close()
		file.close()
		os.Remove(path)
	}
}

// TestIndexCursor walks a run's index with indexCursor, over the entries
// in memory and over the index bytes, asking for every id, every third
// and ids the run does not hold: each answer equals find's.
func TestIndexCursor(t *testing.T) {
	in := streamInputs()
	_, path := writeMixedRun(t, t.TempDir(), in, true, 3) // ids 3, 6, 9, ...: gaps between
	r, err := openRun(vfs.OS{}, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	want := map[uint32]runSeries{}
	for _, s := range r.index() {
		want[s.id] = s
	}
	for _, step := range []uint32{1, 2, 3, 5} {
		for _, dropped := range []bool{false, true} {
			if dropped {
				r.dropIndex()
			} else {
				r.index()
			}
			var c indexCursor
			c.start(r)
			seen := 0
			for id := uint32(0); id < uint32(3*len(in)+5); id += step {
				got := c.at(id)
				w, ok := want[id]
				if (got != nil) != ok || ok && !reflect.DeepEqual(*got, w) {
					t.Fatalf("step %d, bytes %v: id %d: %+v, want %+v (held %v)", step, dropped, id, got, w, ok)
				}
				if ok {
					seen++
				}
			}
			if _, more := c.seek(uint32(3*len(in) + 1)); more || c.err != nil {
				t.Fatalf("step %d, bytes %v: entries left after the last id, or %v", step, dropped, c.err)
			}
			if step == 1 && seen != len(in) {
				t.Fatalf("saw %d entries, want %d", seen, len(in))
			}
		}
	}
	// A cursor over a run whose file is gone: an error, no entries.
	r.dropIndex()
	r.close()
	var c indexCursor
	if c.start(r); c.err == nil {
		t.Fatal("cursor over a closed run: no error")
	}
}

// writeMixedRun writes in as a run in dir, series i as id idStep*(i+1)
// (1: the inputs' own ids), every other series as text when text is set,
// and returns the writer and the file.
func writeMixedRun(t *testing.T, dir string, in []runInput, text bool, idStep uint32) (*runWriter, string) {
	t.Helper()
	rw, err := createRun(vfs.OS{}, dir, in[0].ts[0]/partitionMs, 7, text)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		s := in[i]
		if idStep != 1 {
			s.id = idStep * uint32(i+1)
		}
		if text && i%2 == 1 {
			s.xs = make([]string, len(s.ts))
			for k := range s.xs {
				s.xs[k] = fmt.Sprint("x", k%7)
			}
		}
		rw.add(&s, false)
	}
	path, err := rw.finish(false)
	if err != nil {
		t.Fatal(err)
	}
	return rw, path
}
