package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

const dayMs = int64(86_400_000)

// backupValue is the value writer w stores as its i-th point.
func backupValue(w, i int) float64 { return float64(w*1_000_000+i) + 0.25 }

// backupTime spreads a writer's points over several days, so that flushes
// make runs in many partitions and merges replace them during the backup.
func backupTime(i int) int64 { return 19_000*dayMs + int64(i)*60_000 }

// TestBackupUnderWriteLoad takes a backup while writers run and checks
// that the restored store holds every point acknowledged before the backup
// began, as an exact prefix of each writer's sequence (nothing damaged,
// nothing invented).
func TestBackupUnderWriteLoad(t *testing.T) {
	for _, link := range []bool{true, false} {
		t.Run(fmt.Sprintf("link=%v", link), func(t *testing.T) {
			testBackupUnderLoad(t, link)
		})
	}
}

func testBackupUnderLoad(t *testing.T, link bool) {
	const writers, batch = 4, 20
	dir, dest, dst := t.TempDir(), filepath.Join(t.TempDir(), "b"), filepath.Join(t.TempDir(), "d")
	opts := testOptions()
	opts.HeadMaxSamples = 500 // many flushes and merges while the backup runs
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	var acked [writers]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tag := fmt.Sprintf("plant.w%d", w)
			for i := 0; ; i += batch {
				select {
				case <-stop:
					return
				default:
				}
				pts := make([]model.Point, batch)
				for j := range pts {
					pts[j] = model.Point{Tag: tag, T: backupTime(i + j), V: backupValue(w, i+j)}
				}
				if err := db.Write(context.Background(), pts); err != nil {
					t.Error(err)
					return
				}
				acked[w].Store(int64(i + batch))
			}
		}()
	}
	waitFor := func(n int64) {
		for {
			done := true
			for w := range writers {
				done = done && acked[w].Load() >= n
			}
			if done {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitFor(1500)
	var before [writers]int64
	for w := range writers {
		before[w] = acked[w].Load()
	}
	st, err := db.backup(context.Background(), dest, link)
	if err != nil {
		t.Fatal(err)
	}
	var after [writers]int64
	for w := range writers {
		after[w] = acked[w].Load() + batch // a write may be under way
	}
	waitFor(before[0] + 300) // writers go on after the backup, too
	close(stop)
	wg.Wait()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if st.Files == 0 || st.Bytes == 0 {
		t.Fatalf("backup stats %+v", st)
	}
	if link {
		// Every run is linked, even one that a flush or a merge replaced
		// while the backup ran: its name is kept until the backup ends.
		runs, err := os.ReadDir(filepath.Join(dest, "runs"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Linked == 0 || st.Linked != len(runs) {
			t.Errorf("%d of %d run files hard-linked on one filesystem: %+v", st.Linked, len(runs), st)
		}
	}
	if !link && st.Linked != 0 {
		t.Errorf("linked without link: %+v", st)
	}
	rep, err := Verify(dest)
	if err != nil || !rep.OK() {
		t.Fatalf("verify backup: %v %+v", err, rep)
	}
	if _, err := Restore(dest, dst, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	rdb, err := Open(dst, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	for w := range writers {
		got, err := rdb.Raw(fmt.Sprintf("plant.w%d", w), backupTime(0), backupTime(1<<30), 0)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) < before[w] {
			t.Errorf("writer %d: restored %d points, %d were acknowledged before the backup", w, len(got), before[w])
		}
		if int64(len(got)) > after[w] {
			t.Errorf("writer %d: restored %d points, only %d were written when the backup returned", w, len(got), after[w])
		}
		for i, s := range got {
			if s.T != backupTime(i) || s.V != backupValue(w, i) {
				t.Fatalf("writer %d point %d: got %v@%d, want %v@%d", w, i, s.V, s.T, backupValue(w, i), backupTime(i))
			}
		}
	}
	if n := rdb.Stats().CorruptBlocks.Load(); n != 0 {
		t.Errorf("restored store has %d corrupt blocks", n)
	}
}

// buildBackupStore makes a closed-over-days store with runs in several
// partitions and a WAL tail, and returns it open.
func buildBackupStore(t *testing.T, dir string, days int) *DB {
	t.Helper()
	db, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	writeDays(t, db, 0, days)
	return db
}

// writeDays writes 400 points a day for days [from, to) of tag plant.a,
// flushes, and writes a few more that stay in the WAL.
func writeDays(t *testing.T, db *DB, from, to int) {
	t.Helper()
	for d := from; d < to; d++ {
		pts := make([]model.Point, 400)
		for i := range pts {
			pts[i] = model.Point{Tag: "plant.a", T: 19_000*dayMs + int64(d)*dayMs + int64(i)*1000, V: float64(d*1000 + i)}
		}
		if err := db.Write(context.Background(), pts); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	pts := []model.Point{{Tag: "plant.b", T: 19_000*dayMs + int64(to)*dayMs, V: float64(to)}}
	if err := db.Write(context.Background(), pts); err != nil {
		t.Fatal(err)
	}
}

// saveSeries writes the series files as the maintenance loop does each
// second.
func saveSeries(t *testing.T, db *DB) {
	t.Helper()
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	if err := db.series.save(db.fs, db.dir); err != nil {
		t.Fatal(err)
	}
}

func readBackupManifest(t *testing.T, dir string) *backupManifest {
	t.Helper()
	buf, err := os.ReadFile(filepath.Join(dir, backupManifestName))
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeBackupManifest(buf)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBackupIncremental checks that a second backup into the same
// destination writes only the files that changed.
func TestBackupIncremental(t *testing.T) {
	for _, link := range []bool{true, false} {
		t.Run(fmt.Sprintf("link=%v", link), func(t *testing.T) {
			dir, dest := t.TempDir(), filepath.Join(t.TempDir(), "b")
			db := buildBackupStore(t, dir, 4)
			defer db.Close()
			// The maintenance loop writes a new tag (plant.b, in the WAL
			// only) to the series files within a second: write them now,
			// or a slow machine does it between the two backups (CI under
			// qemu), and the second finds them changed.
			saveSeries(t, db)
			ctx := context.Background()
			st1, err := db.backup(ctx, dest, link)
			if err != nil {
				t.Fatal(err)
			}
			if st1.Skipped != 0 || st1.Copied+st1.Linked != st1.Files {
				t.Fatalf("first backup: %+v", st1)
			}
			m1 := readBackupManifest(t, dest)
			// Nothing changed: nothing is written.
			st2, err := db.backup(ctx, dest, link)
			if err != nil {
				t.Fatal(err)
			}
			if st2.Copied != 0 || st2.Linked != 0 || st2.Skipped != st2.Files || st2.SkippedBytes != st1.Bytes {
				t.Fatalf("unchanged second backup wrote files: %+v", st2)
			}
			// Two new days: only the files not in the last backup (or
			// changed: MANIFEST, series files, WAL) are written.
			writeDays(t, db, 4, 6)
			st3, err := db.backup(ctx, dest, link)
			if err != nil {
				t.Fatal(err)
			}
			m3 := readBackupManifest(t, dest)
			old := map[backupFile]bool{}
			for _, f := range m1.Files {
				old[f] = true
			}
			var changed int
			var changedBytes int64
			runs := 0
			for _, f := range m3.Files {
				if !old[f] {
					changed++
					changedBytes += f.Size
					if strings.HasPrefix(f.Path, "runs/") {
						runs++
					}
				}
			}
			if runs == 0 || runs == len(m3.Files) {
				t.Fatalf("want some new runs and some kept: %d new of %d files", runs, len(m3.Files))
			}
			if st3.Copied+st3.Linked != changed || st3.CopiedBytes+st3.LinkedBytes != changedBytes {
				t.Errorf("third backup wrote %d files (%d B), want the %d changed (%d B): %+v", st3.Copied+st3.Linked, st3.CopiedBytes+st3.LinkedBytes, changed, changedBytes, st3)
			}
			if st3.Skipped != len(m3.Files)-changed {
				t.Errorf("skipped %d, want %d", st3.Skipped, len(m3.Files)-changed)
			}
			// Files of the first backup no longer listed are gone.
			for _, f := range m1.Files {
				listed := false
				for _, g := range m3.Files {
					listed = listed || g.Path == f.Path
				}
				if _, err := os.Stat(filepath.Join(dest, f.Path)); !listed && err == nil {
					t.Errorf("stale %s left in the backup", f.Path)
				}
			}
			if rep, err := Verify(dest); err != nil || !rep.OK() {
				t.Fatalf("verify: %v %+v", err, rep)
			}
		})
	}
}

// TestRestoreRefusesDamage damages a backup in each way and checks that
// verify reports it and restore refuses it, leaving the target alone.
func TestRestoreRefusesDamage(t *testing.T) {
	dir, src := t.TempDir(), filepath.Join(t.TempDir(), "b")
	db := buildBackupStore(t, dir, 3)
	if _, err := db.Backup(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	m := readBackupManifest(t, src)
	var run, seg string
	for _, f := range m.Files {
		switch {
		case strings.HasPrefix(f.Path, "runs/") && run == "":
			run = f.Path
		case strings.HasPrefix(f.Path, "wal/"):
			seg = f.Path
		}
	}
	if run == "" || seg == "" {
		t.Fatalf("backup lacks a run or a wal segment: %+v", m.Files)
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string // in the restore error and in a verify problem
	}{
		{"flipped run byte", func(t *testing.T, d string) { flipByte(t, filepath.Join(d, run), 20) }, "CRC-32C"},
		{"flipped wal byte", func(t *testing.T, d string) { flipByte(t, filepath.Join(d, seg), 20) }, "CRC-32C"},
		{"flipped manifest byte", func(t *testing.T, d string) { flipByte(t, filepath.Join(d, "MANIFEST"), 5) }, "CRC-32C"},
		{"missing run", func(t *testing.T, d string) { os.Remove(filepath.Join(d, run)) }, "missing"},
		{"missing series file", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "series.dat")) }, "missing"},
		{"truncated wal", func(t *testing.T, d string) { os.Truncate(filepath.Join(d, seg), 20) }, "size"},
		{"missing BACKUP", func(t *testing.T, d string) { os.Remove(filepath.Join(d, backupManifestName)) }, "incomplete backup"},
		{"interrupted", func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, backupMarkerName), nil, 0o644)
		}, "incomplete backup"},
		{"flipped BACKUP byte", func(t *testing.T, d string) { flipByte(t, filepath.Join(d, backupManifestName), 30) }, "manifest damaged"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := copyDir(t, src)
			c.damage(t, b)
			rep, err := Verify(b)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), c.want) {
				t.Errorf("verify problems %q, want one with %q", rep.Problems, c.want)
			}
			dst := filepath.Join(t.TempDir(), "d")
			_, err = Restore(b, dst, RestoreOptions{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("restore error %v, want one with %q", err, c.want)
			}
			if _, err := os.Stat(filepath.Join(dst, "MANIFEST")); err == nil {
				t.Error("restore of a damaged backup wrote a MANIFEST")
			}
		})
	}
	// The undamaged backup restores; a second restore needs --force.
	dst := filepath.Join(t.TempDir(), "d")
	if _, err := Restore(src, dst, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dst, "tls"), 0o755)
	os.WriteFile(filepath.Join(dst, "tls", "cert.pem"), []byte("x"), 0o644)
	_, err := Restore(src, dst, RestoreOptions{})
	if err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("restore into a data directory: %v, want a refusal naming --force", err)
	}
	if _, err := Restore(src, dst, RestoreOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dst, "tls", "cert.pem")); err != nil {
		t.Errorf("forced restore removed a file that is not the store's: %v", err)
	}
	rdb, err := Open(dst, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	got, err := rdb.Raw("plant.a", 0, 1<<62, 0)
	if err != nil || len(got) != 3*400 {
		t.Errorf("restored plant.a: %d points, err %v; want %d", len(got), err, 3*400)
	}
	if l, err := rdb.Latest("plant.b"); err != nil || l[0].V != 3 {
		t.Errorf("restored plant.b (from the WAL): %v %v", l, err)
	}
	// A restore into a directory a store holds open is refused.
	if _, err := Restore(src, dst, RestoreOptions{Force: true}); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Errorf("restore into an open data directory: %v", err)
	}
	rdb.Close()
}

// TestBackupDirOffline backs up a closed data directory directly, and
// refuses one that a store holds.
func TestBackupDirOffline(t *testing.T) {
	dir := t.TempDir()
	db := buildBackupStore(t, dir, 2)
	dest := filepath.Join(t.TempDir(), "b")
	if _, err := BackupDir(context.Background(), dir, dest); !errors.Is(err, ErrLocked) {
		t.Fatalf("backup of an open data directory: %v, want ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := BackupDir(context.Background(), dir, dest)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files == 0 {
		t.Fatalf("stats %+v", st)
	}
	if rep, err := Verify(dest); err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	if rep, err := Verify(dir); err != nil || !rep.OK() || rep.Backup {
		t.Fatalf("verify data directory: %v %+v", err, rep)
	}
	// A destination that is neither empty nor a backup, or inside the
	// data directory, is refused.
	if _, err := BackupDir(context.Background(), dir, dir); err == nil {
		t.Error("backup into the data directory itself was accepted")
	}
	if _, err := BackupDir(context.Background(), dir, filepath.Join(dir, "runs")); err == nil {
		t.Error("backup inside the data directory was accepted")
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("mine"), 0o644)
	if _, err := BackupDir(context.Background(), dir, other); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("backup into a foreign directory: %v", err)
	}
}

// TestVerifyDataDirDamage flips a byte of a closed data directory's run
// and checks that verify names the file and block.
func TestVerifyDataDirDamage(t *testing.T) {
	dir, _ := buildCorruptStore(t)
	rep, err := Verify(dir)
	if err != nil || !rep.OK() {
		t.Fatalf("clean store: %v %+v", err, rep)
	}
	p := int64(corruptPoints()[0].T / partitionMs)
	run := runOf(t, dir, p)
	l := layoutOf(t, run)
	c := chunkOf(l, 0)
	flipByte(t, run, int64(c.off)+6)
	rep, err = Verify(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("chunk block at offset %d", c.off)
	if rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), want) {
		t.Errorf("problems %q, want %q", rep.Problems, want)
	}
	flipByte(t, run, l.size-runFooterSize+3)
	rep, _ = Verify(dir)
	if !strings.Contains(strings.Join(rep.Problems, "\n"), "footer copy") {
		t.Errorf("problems %q, want a footer copy", rep.Problems)
	}
}

// BenchmarkBackup measures a full backup by copying (no hard links) of a
// store of 30 days × 2 tags at one sample per 10 s, and an incremental
// one into the same destination with nothing new. Run with
// `go test -run - -bench Backup ./internal/store`.
func BenchmarkBackup(b *testing.B) {
	dir := b.TempDir()
	opts := testOptions()
	opts.HeadMaxSamples = 1 << 20
	db, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for d := range 30 {
		pts := make([]model.Point, 0, 2*8640)
		for i := range 8640 {
			t := 19_000*dayMs + int64(d)*dayMs + int64(i)*10_000
			x := uint64(d*8640+i) * 0x9e3779b97f4a7c15 // noisy values: about 8 B/sample
			pts = append(pts, model.Point{Tag: "plant.a", T: t, V: float64(x>>11) / (1 << 40)}, model.Point{Tag: "plant.b", T: t, V: float64(x>>20) / 7})
		}
		if err := db.Write(context.Background(), pts); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"full", "incremental"} {
		b.Run(mode, func(b *testing.B) {
			dest := filepath.Join(b.TempDir(), "b")
			if mode == "incremental" {
				if _, err := db.backup(context.Background(), dest, false); err != nil {
					b.Fatal(err)
				}
			}
			var st BackupStats
			for i := 0; b.Loop(); i++ {
				d := dest
				if mode == "full" {
					d = fmt.Sprintf("%s-%d", dest, i)
				}
				if st, err = db.backup(context.Background(), d, false); err != nil {
					b.Fatal(err)
				}
				if mode == "full" {
					b.StopTimer()
					os.RemoveAll(d)
					b.StartTimer()
				}
			}
			b.SetBytes(st.Bytes)
			b.ReportMetric(float64(st.CopiedBytes), "B-copied/op")
			b.ReportMetric(float64(st.LockHeld.Microseconds()), "us-locked")
		})
	}
}

// TestBackupInterrupted cancels a backup over an earlier one and checks
// that the result reads as incomplete until a new backup finishes.
func TestBackupInterrupted(t *testing.T) {
	dir, dest := t.TempDir(), filepath.Join(t.TempDir(), "b")
	db := buildBackupStore(t, dir, 2)
	defer db.Close()
	if _, err := db.Backup(context.Background(), dest); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := db.Backup(ctx, dest); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled backup: %v", err)
	}
	rep, err := Verify(dest)
	if err != nil || rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), "incomplete backup") {
		t.Fatalf("verify after an interrupted backup: %v %+v", err, rep)
	}
	if _, err := Restore(dest, filepath.Join(t.TempDir(), "d"), RestoreOptions{}); err == nil {
		t.Fatal("restore of an interrupted backup succeeded")
	}
	if _, err := db.Backup(context.Background(), dest); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(dest); err != nil || !rep.OK() {
		t.Fatalf("verify after finishing: %v %+v", err, rep)
	}
}

// TestBackupRunsReplacedAfterCapture merges away every captured run
// between the capture and the copy, deterministically: the backup still
// holds the captured state, read through the open descriptors.
func TestBackupRunsReplacedAfterCapture(t *testing.T) {
	dir, dest, dst := t.TempDir(), filepath.Join(t.TempDir(), "b"), filepath.Join(t.TempDir(), "d")
	db := buildBackupStore(t, dir, 3)
	defer db.Close()
	db.flushMu.Lock()
	snap, err := captureDir(db.dir, db.wal.Written)
	db.flushMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.close()
	// New samples in the same days, then a final compaction: every day's
	// runs are merged into new ones and the captured files are removed.
	pts := make([]model.Point, 0, 3)
	for d := range 3 {
		pts = append(pts, model.Point{Tag: "plant.a", T: 19_000*dayMs + int64(d)*dayMs + 500, V: -1})
	}
	if err := db.Write(context.Background(), pts); err != nil {
		t.Fatal(err)
	}
	if err := db.flushAll(true); err != nil {
		t.Fatal(err)
	}
	gone := 0
	for _, it := range snap.items {
		if _, err := os.Stat(it.src); it.link && errors.Is(err, os.ErrNotExist) {
			gone++
		}
	}
	if gone == 0 {
		t.Fatal("no captured run was replaced; the test does not test anything")
	}
	st, err := writeBackup(context.Background(), dest, snap, true)
	if err != nil {
		t.Fatal(err)
	}
	if st.Copied < gone {
		t.Errorf("%d captured runs were gone, but only %d files copied: %+v", gone, st.Copied, st)
	}
	if _, err := Restore(dest, dst, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	rdb, err := Open(dst, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	got, err := rdb.Raw("plant.a", 0, 1<<62, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3*400 {
		t.Fatalf("restored %d samples, want the %d captured", len(got), 3*400)
	}
	for _, s := range got {
		if s.V < 0 {
			t.Fatalf("a sample written after the capture is in the backup: %+v", s)
		}
	}
}

// TestBackupKeepsDashboards: the dashboards (and pictures) folders' documents go into a
// backup, are checked by verify, and come back with a restore; a document
// deleted since the last backup leaves the next one.
func TestBackupKeepsDashboards(t *testing.T) {
	dir := t.TempDir()
	db := buildBackupStore(t, dir, 2)
	os.MkdirAll(filepath.Join(dir, "dashboards"), 0o755)
	doc := []byte(`{"schema":1,"id":"plant","title":"Plant","widgets":[]}`)
	os.WriteFile(filepath.Join(dir, "dashboards", "plant.json"), doc, 0o644)
	os.WriteFile(filepath.Join(dir, "dashboards", "old.json"), doc, 0o644)
	os.WriteFile(filepath.Join(dir, "dashboards", "plant.json.tmp123"), []byte("half"), 0o644)
	os.MkdirAll(filepath.Join(dir, "pictures"), 0o755)
	pic := []byte(`{"schema":1,"id":"boiler","title":"Boiler","svg":"<svg/>","bindings":[]}`)
	os.WriteFile(filepath.Join(dir, "pictures", "boiler.json"), pic, 0o644)
	dest := filepath.Join(t.TempDir(), "b")
	if _, err := db.Backup(context.Background(), dest); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "dashboards", "old.json"))
	if _, err := db.Backup(context.Background(), dest); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := os.Stat(filepath.Join(dest, "dashboards", "old.json")); !os.IsNotExist(err) {
		t.Errorf("a deleted dashboard stayed in the backup: %v", err)
	}
	if rep, err := Verify(dest); err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	dst := t.TempDir()
	if _, err := Restore(dest, dst, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dst, "dashboards", "plant.json"))
	if err != nil || string(got) != string(doc) {
		t.Fatalf("restored dashboard: %q %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(dst, "pictures", "boiler.json")); err != nil || string(got) != string(pic) {
		t.Fatalf("restored picture: %q %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "dashboards", "plant.json.tmp123")); !os.IsNotExist(err) {
		t.Errorf("a temporary file was restored: %v", err)
	}
}
