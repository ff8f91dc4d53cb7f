package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/vfs"
)

func (m naive) delete(tag string, from, to int64) int64 {
	var n int64
	for ts := range m[tag] {
		if ts >= from && ts < to {
			delete(m[tag], ts)
			n++
		}
	}
	return n
}

// TestDeleteMatchesModel mixes random deletes into random late,
// duplicate and out-of-order writes, streamed and bulk, with flushes,
// clean reopens and power cuts, and checks raw data, every aggregate
// (which read the rollup tiers) and the latest values against the model.
func TestDeleteMatchesModel(t *testing.T) {
	seeds := int64(3)
	if testing.Short() {
		seeds = 1
	}
	for seed := int64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testDeleteAgainstModel(t, seed) })
	}
}

func testDeleteAgainstModel(t *testing.T, seed int64) {
	rnd := rand.New(rand.NewSource(seed))
	fs := vfs.NewFaultFS()
	opts := func(fs vfs.FS) Options {
		o := powerCutOptions(fs)
		o.HeadMaxSamples = 700
		o.BulkPoints = 150
		return o
	}
	db, err := Open("/data", opts(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	m := naive{}
	tags := []string{"a.x", "b.y", "c.z"}
	const day = partitionMs
	t0 := int64(1_700_000_000_000)
	clock := t0
	deletes := 0
	for step := 0; step < 30; step++ {
		var pts []model.Point
		n := 1 + rnd.Intn(400)
		for i := 0; i < n; i++ {
			var ts int64
			switch r := rnd.Intn(10); {
			case r < 6:
				clock += int64(500 + rnd.Intn(1000))
				ts = clock
			case r < 8:
				ts = clock - rnd.Int63n(3*day)
			default:
				ts = clock - int64(rnd.Intn(5))*1000
			}
			v := math.Round(rnd.NormFloat64()*1000) / 100
			pts = append(pts, model.Point{Tag: tags[rnd.Intn(len(tags))], T: ts, V: v, Q: model.Quality(rnd.Intn(3))})
		}
		if err := db.Write(context.Background(), pts); err != nil {
			t.Fatal(err)
		}
		m.write(pts)
		for k := rnd.Intn(3); k > 0; k-- {
			tag := tags[rnd.Intn(len(tags))]
			if !db.HasTag(tag) && len(m[tag]) == 0 {
				continue
			}
			var from, to int64
			switch rnd.Intn(4) {
			case 0: // a short glitch
				from = clock - rnd.Int63n(3*day)
				to = from + 1 + rnd.Int63n(60_000)
			case 1: // across day boundaries
				from = clock - 3*day + rnd.Int63n(day)
				to = from + day + rnd.Int63n(day)
			case 2: // everything of the tag
				from, to = t0-4*day, clock+1000
			default:
				from = clock - rnd.Int63n(3*day)
				to = from + 1 + rnd.Int63n(6*3600_000)
			}
			got, err := db.Delete(context.Background(), tag, from, to)
			if errors.Is(err, ErrUnknownTag) {
				continue
			}
			if err != nil {
				t.Fatalf("delete %s [%d,%d): %v", tag, from, to, err)
			}
			if want := m.delete(tag, from, to); got != want {
				t.Fatalf("delete %s [%d,%d): deleted %d, want %d", tag, from, to, got, want)
			}
			deletes++
		}
		full := step%5 == 4 // the whole check is costly under -race
		switch rnd.Intn(8) {
		case 0:
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		case 1:
			full = true
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = Open("/data", opts(fs)); err != nil {
				t.Fatal(err)
			}
		case 2: // a power cut: fsync durability keeps every acknowledged op
			full = true
			fs = fs.Crash(vfs.CrashOptions{})
			db.Close()
			if db, err = Open("/data", opts(fs)); err != nil {
				t.Fatal(err)
			}
		}
		if full {
			checkStore(t, db, m)
			continue
		}
		for _, tag := range tags { // raw samples only
			got, err := db.Raw(tag, t0-4*day, clock+1000, 0)
			if err != nil && len(m[tag]) > 0 {
				t.Fatal(err)
			}
			if want := m.sorted(tag); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("step %d raw %s: got %d samples, want %d", step, tag, len(got), len(want))
			}
		}
	}
	checkStore(t, db, m)
	if deletes == 0 {
		t.Fatal("no delete ran")
	}
}

// TestDeleteOrder: a write after a delete into the deleted range is kept,
// across a power cut that replays the WAL holding both (and the writes
// before the delete), and so is a bulk load committed after it.
func TestDeleteOrder(t *testing.T) {
	fs := vfs.NewFaultFS()
	db, err := Open("/data", powerCutOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	m := naive{}
	const t0 = int64(1_700_000_000_000)
	ctx := context.Background()
	write := func(pts []model.Point) {
		t.Helper()
		if err := db.Write(ctx, pts); err != nil {
			t.Fatal(err)
		}
		m.write(pts)
	}
	write(dayPoints("a", t0, 100, 1, 1)) // flushed to runs
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	write(dayPoints("a", t0+500, 100, 1, 2)) // only in the head and WAL
	n, err := db.Delete(ctx, "a", t0, t0+partitionMs/2)
	if err != nil {
		t.Fatal(err)
	}
	if want := m.delete("a", t0, t0+partitionMs/2); n != want {
		t.Fatalf("deleted %d, want %d", n, want)
	}
	write([]model.Point{{Tag: "a", T: t0 + 1000, V: 42}})         // after the delete, in its range
	write(dayPoints("a", t0+700, 300, 1, 3))                      // a bulk load into the range
	write([]model.Point{{Tag: "a", T: t0 + 2*partitionMs, V: 7}}) // latest
	checkStore(t, db, m)
	after := fs.Crash(vfs.CrashOptions{})
	db.Close()
	db, err = Open("/data", powerCutOptions(after))
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, db, m)
	// Deleting the newest sample moves Latest back; deleting all leaves
	// the tag without data.
	if _, err := db.Delete(ctx, "a", t0+2*partitionMs, t0+2*partitionMs+1); err != nil {
		t.Fatal(err)
	}
	m.delete("a", t0+2*partitionMs, t0+2*partitionMs+1)
	checkStore(t, db, m)
	if _, err := db.Delete(ctx, "a", t0-partitionMs, t0+3*partitionMs); err != nil {
		t.Fatal(err)
	}
	m.delete("a", t0-partitionMs, t0+3*partitionMs)
	checkStore(t, db, m)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open("/data", powerCutOptions(after))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkStore(t, db, m)
}

func TestDeleteErrors(t *testing.T) {
	db, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.Delete(ctx, "nope", 0, 10); !errors.Is(err, ErrUnknownTag) {
		t.Errorf("unknown tag: got %v", err)
	}
	if err := db.Write(ctx, []model.Point{{Tag: "a", T: 5, V: 1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete(ctx, "a", 10, 10); err == nil {
		t.Error("empty range accepted")
	}
	if n, err := db.Delete(ctx, "a", 6, 100); err != nil || n != 0 {
		t.Errorf("delete of nothing: %d, %v", n, err)
	}
}

func FuzzDeleteRecord(f *testing.F) {
	f.Add(appendDeleteRecord(nil, 7, "site.a", -5, 1_700_000_000_000))
	f.Add([]byte{recDelete})
	f.Fuzz(func(t *testing.T, rec []byte) {
		id, tag, from, to, err := decodeDeleteRecord(rec)
		if err != nil {
			return
		}
		again := appendDeleteRecord(nil, id, tag, from, to)
		id2, tag2, from2, to2, err := decodeDeleteRecord(again)
		if err != nil || id2 != id || tag2 != tag || from2 != from || to2 != to {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// BenchmarkDelete deletes one hour of one tag from a flushed day of ten
// 1 Hz tags: the cost is rewriting that day's run.
//
//	go test -run '^$' -bench Delete ./internal/store
func BenchmarkDelete(b *testing.B) {
	db, err := Open(b.TempDir(), quietOptions(nil))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	const t0 = int64(1_700_006_400_000) // a day boundary
	pts := make([]model.Point, 0, 86400)
	for k := 0; k < 10; k++ {
		pts = pts[:0]
		for i := 0; i < 86400; i++ {
			pts = append(pts, model.Point{Tag: fmt.Sprintf("t%d", k), T: t0 + int64(i)*1000, V: float64(i % 1000)})
		}
		if err := db.Write(context.Background(), pts); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		from := t0 + int64(i%24)*3600_000
		if _, err := db.Delete(context.Background(), "t3", from, from+3600_000); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/delete")
}
