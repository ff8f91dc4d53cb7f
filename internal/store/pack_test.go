package store

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store/vfs"
)

// packDay0 is 2025-01-01, the first day the pack tests write.
const packDay0 int64 = 20089

func packOptions() Options {
	o := testOptions()
	o.Now = func() time.Time { return time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC) }
	return o
}

// runsDir lists the files under dir/runs by kind.
func runsDir(t *testing.T, dir string) (runs, packs []string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "runs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch {
		case strings.HasSuffix(e.Name(), ".run"):
			runs = append(runs, e.Name())
		case strings.HasSuffix(e.Name(), ".pack"):
			packs = append(packs, e.Name())
		default:
			t.Errorf("runs/%s: unexpected file", e.Name())
		}
	}
	return runs, packs
}

// buildPackStore writes days [0, days) after packDay0 into a new store and
// closes it, which packs the closed months; it returns the directory and
// the model.
func buildPackStore(t *testing.T, days int) (string, naive) {
	t.Helper()
	dir := t.TempDir()
	m := naive{}
	db := openPacked(t, dir)
	writePackDays(t, db, m, 0, days)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// openPacked opens dir with packOptions.
func openPacked(t *testing.T, dir string) *DB {
	t.Helper()
	db, err := Open(dir, packOptions())
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// writePackDays writes tags a and b every 10 minutes over days [from, to)
// after packDay0, one flush a day, into db and the model.
func writePackDays(t *testing.T, db *DB, m naive, from, to int) {
	t.Helper()
	for d := from; d < to; d++ {
		var pts []model.Point
		for i := 0; i < 144; i++ {
			ts := (packDay0+int64(d))*partitionMs + int64(i)*600_000
			pts = append(pts, model.Point{Tag: "pk.a", T: ts, V: float64(d*1000 + i)}, model.Point{Tag: "pk.b", T: ts + 1, V: float64(-i) / 8})
		}
		if err := db.Write(context.Background(), pts); err != nil {
			t.Fatal(err)
		}
		m.write(pts)
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}

// checkPackModel compares every sample and a few aggregates with the model.
func checkPackModel(t *testing.T, db *DB, m naive) {
	t.Helper()
	for _, tag := range []string{"pk.a", "pk.b"} {
		want := m.sorted(tag)
		got, err := db.Raw(tag, 0, 1<<62, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d samples, want %d", tag, len(got), len(want))
		}
		for i := range got {
			if got[i].T != want[i].T || got[i].V != want[i].V {
				t.Fatalf("%s: sample %d is %+v, want %+v", tag, i, got[i], want[i])
			}
		}
		from, to := int64(packDay0)*partitionMs, int64(packDay0+130)*partitionMs
		for _, n := range []int{1, 7, 130, 1000} {
			bs, err := db.Aggregate(tag, from, to, n, model.AggMean)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range m.aggregate(tag, from, to, n, model.AggMean) {
				if bs[i].OK != w.OK || (w.OK && !close1(bs[i].V, w.V)) {
					t.Fatalf("%s: %d buckets: bucket %d is %+v, want %+v", tag, n, i, bs[i], w)
				}
			}
		}
	}
}

// TestMonthPacks: closed months end in one pack each; late samples,
// deletes and retention rewrite packed days; the data never changes.
func TestMonthPacks(t *testing.T) {
	dir, m := buildPackStore(t, 120)
	runs, packs := runsDir(t, dir)
	if len(runs) != 0 || len(packs) != 4 {
		t.Fatalf("after close: runs %v, packs %v; want 4 packs only", runs, packs)
	}
	rep, err := Verify(dir)
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
	if v := readManifest(t, dir).Version; v != formatPacks {
		t.Fatalf("manifest version %d, want %d", v, formatPacks)
	}

	db := openPacked(t, dir)
	checkPackModel(t, db, m)
	// Late samples into three days of February, a delete over two days
	// of March and one of April.
	late := []model.Point{}
	for _, d := range []int64{35, 40, 41} {
		ts := (packDay0+d)*partitionMs + 300_000
		late = append(late, model.Point{Tag: "pk.a", T: ts, V: 0.5})
	}
	if err := db.Write(context.Background(), late); err != nil {
		t.Fatal(err)
	}
	m.write(late)
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	from, to := (packDay0+70)*partitionMs+3_600_000, (packDay0+91)*partitionMs
	if _, err := db.Delete(context.Background(), "pk.b", from, to); err != nil {
		t.Fatal(err)
	}
	for ts := range m["pk.b"] {
		if ts >= from && ts < to {
			delete(m["pk.b"], ts)
		}
	}
	checkPackModel(t, db, m)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	runs, packs = runsDir(t, dir)
	if len(runs)+len(packs) > 4*(packsPerMonth+1) {
		t.Fatalf("after rewrites: runs %v, packs %v", runs, packs)
	}
	t.Logf("after rewrites: %d runs, %d packs", len(runs), len(packs))
	db = openPacked(t, dir)
	checkPackModel(t, db, m)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Retention that removes January and February removes their packs.
	o := packOptions()
	o.RetentionRollups = o.Now().Sub(time.UnixMilli((packDay0 + 59) * partitionMs))
	db, err = Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.enforceRetention(); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"pk.a", "pk.b"} {
		for ts := range m[tag] {
			if ts < (packDay0+59)*partitionMs {
				delete(m[tag], ts)
			}
		}
	}
	checkPackModel(t, db, m)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, packs = runsDir(t, dir)
	for _, p := range packs {
		if first, _ := monthOf(packDay0 + 59); p < "m"+strconv.FormatInt(first, 10) {
			t.Errorf("pack %s of a removed month is still there", p)
		}
	}
	rep, err = Verify(dir)
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
}

// TestPackBackupRestore: a backup of a packed store restores to the same
// data, and an incremental backup links the unchanged packs.
func TestPackBackupRestore(t *testing.T) {
	dir, m := buildPackStore(t, 70)
	db := openPacked(t, dir)
	dest := filepath.Join(t.TempDir(), "b")
	if _, err := db.Backup(context.Background(), dest); err != nil {
		t.Fatal(err)
	}
	writePackDays(t, db, m, 70, 75) // a new month: its days stay files
	st, err := db.Backup(context.Background(), dest)
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped == 0 {
		t.Errorf("second backup skipped no file: %+v", st)
	}
	db.Close()
	rep, err := Verify(dest)
	if err != nil || !rep.OK() {
		t.Fatalf("verify backup: %v %v", err, rep.Problems)
	}
	out := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(dest, out, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	db = openPacked(t, out)
	checkPackModel(t, db, m)
	db.Close()
}

// TestPackConcurrent packs months while writers add late samples to the
// days being packed and readers read them: nothing is lost.
func TestPackConcurrent(t *testing.T) {
	// Close packs everything; reopen and write late samples while the
	// merge loop merges and packs again.
	dir, m := buildPackStore(t, 95)
	db := openPacked(t, dir)
	rnd := rand.New(rand.NewPCG(7, 7))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			if _, err := db.Aggregate("pk.a", packDay0*partitionMs, (packDay0+95)*partitionMs, 50, model.AggMean); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 60; i++ {
		d := int64(rnd.IntN(95))
		p := model.Point{Tag: "pk.a", T: (packDay0+d)*partitionMs + int64(rnd.IntN(600_000)) + 1, V: float64(i)}
		if err := db.Write(context.Background(), []model.Point{p}); err != nil {
			t.Fatal(err)
		}
		m.write([]model.Point{p})
		if i%10 == 0 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			db.requestMerge()
		}
	}
	<-done
	checkPackModel(t, db, m)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openPacked(t, dir)
	checkPackModel(t, db, m)
	db.Close()
	rep, err := Verify(dir)
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
}

// TestPackDamage: a damaged byte in one packed run costs that run's chunk
// only, and a packed run that cannot be read at all stays listed, its pack
// kept, while the other runs of the pack are read and rewritten.
func TestPackDamage(t *testing.T) {
	base, m := buildPackStore(t, 3)
	man := readManifest(t, base)
	// The run of day 1 (entries sort by name: pick by part).
	var entry, file string
	var off, size int64
	for _, e := range man.Runs {
		f, b, n, packed, err := parseListName(e)
		if err != nil || !packed {
			t.Fatalf("entry %q: packed %v, %v", e, packed, err)
		}
		r, err := openRunAt(vfs.OS{}, filepath.Join(base, "runs", f), b, n)
		if err != nil {
			t.Fatal(err)
		}
		if r.part == packDay0+1 {
			entry, file, off, size = e, f, b, n
		}
		r.close()
	}
	if entry == "" {
		t.Fatal("no packed run of day 1")
	}

	t.Run("chunk", func(t *testing.T) {
		dir := copyDir(t, base)
		path := filepath.Join(dir, "runs", file)
		r, err := openRunAt(vfs.OS{}, path, off, size)
		if err != nil {
			t.Fatal(err)
		}
		s := r.index()[0] // pk.a
		c := s.chunks[len(s.chunks)/2]
		r.close()
		flipByte(t, path, off+int64(c.off)+6)
		rep, err := Verify(dir)
		if err != nil || rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), entry) {
			t.Fatalf("verify does not name %s: %v %v", entry, err, rep.Problems)
		}
		db := openPacked(t, dir)
		defer db.Close()
		checkAllBut(t, db, m, []lostRange{{"pk.a", c.minT, c.maxT}})
	})

	t.Run("footers", func(t *testing.T) {
		dir := copyDir(t, base)
		path := filepath.Join(dir, "runs", file)
		flipByte(t, path, off+size-1)
		flipByte(t, path, off+size-runFooterSize-1)
		db := openPacked(t, dir)
		day := (packDay0 + 1) * partitionMs
		lost := []lostRange{{"pk.a", day, day + partitionMs - 1}, {"pk.b", day, day + partitionMs - 1}}
		checkAllBut(t, db, m, lost)
		// Late samples rewrite days 0 and 2 out of the pack.
		late := []model.Point{{Tag: "pk.a", T: packDay0*partitionMs + 7, V: 1}, {Tag: "pk.a", T: (packDay0+2)*partitionMs + 7, V: 2}}
		if err := db.Write(context.Background(), late); err != nil {
			t.Fatal(err)
		}
		m2 := naive{}
		for tag, ss := range m {
			m2[tag] = map[int64]model.Sample{}
			for ts, s := range ss {
				m2[tag][ts] = s
			}
		}
		m2.write(late)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(path); err != nil {
			t.Fatalf("the pack of an unreadable run was removed: %v", err)
		}
		db = openPacked(t, dir)
		defer db.Close()
		checkAllBut(t, db, m2, lost)
		if len(db.broken) != 1 || db.broken[0] != entry {
			t.Fatalf("broken runs %v, want [%s]", db.broken, entry)
		}
	})
}
