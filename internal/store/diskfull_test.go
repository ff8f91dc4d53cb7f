package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// fullFS makes writes to chosen files fail as a full disk does: half of
// the bytes land, then ENOSPC. The rest of the filesystem keeps working,
// so each test aims the failure at one point: the WAL, run files (flush,
// merge, bulk load), the manifest or the series file.
type fullFS struct {
	*vfs.FaultFS
	match atomic.Pointer[func(path string) bool]
	hits  atomic.Int64
}

func newFullFS() *fullFS { return &fullFS{FaultFS: vfs.NewFaultFS()} }

// fill makes writes to files whose path match accepts fail; nil clears it.
func (f *fullFS) fill(match func(path string) bool) {
	if match == nil {
		f.match.Store(nil)
		return
	}
	f.match.Store(&match)
}

func (f *fullFS) full(path string) bool {
	m := f.match.Load()
	if m != nil && (*m)(path) {
		f.hits.Add(1)
		return true
	}
	return false
}

func (f *fullFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	file, err := f.FaultFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &fullFile{File: file, fs: f}, nil
}

type fullFile struct {
	vfs.File
	fs *fullFS
}

func (h *fullFile) Write(p []byte) (int, error) {
	if h.fs.full(h.Name()) {
		n, _ := h.File.Write(p[:len(p)/2])
		return n, &os.PathError{Op: "write", Path: h.Name(), Err: syscall.ENOSPC}
	}
	return h.File.Write(p)
}

func (h *fullFile) WriteAt(p []byte, off int64) (int, error) {
	if h.fs.full(h.Name()) {
		n, _ := h.File.WriteAt(p[:len(p)/2], off)
		return n, &os.PathError{Op: "write", Path: h.Name(), Err: syscall.ENOSPC}
	}
	return h.File.WriteAt(p, off)
}

func inWAL(p string) bool      { return strings.Contains(p, "/wal/") }
func inRuns(p string) bool     { return strings.Contains(p, "/runs/") }
func isManifest(p string) bool { return strings.Contains(p, "MANIFEST") }
func isSeries(p string) bool   { return strings.Contains(p, "series") }

func diskFullOptions(fs vfs.FS) Options {
	o := powerCutOptions(fs)
	o.HeadMaxSamples = 300
	o.BulkPoints = 200
	o.MaxRunsPerPart = 2
	return o
}

// checkStore compares every tag's raw samples, a few aggregates and the
// latest sample with the model.
func checkStore(t *testing.T, db *DB, m naive) {
	t.Helper()
	for tag := range m {
		want := m.sorted(tag)
		got, err := db.Raw(tag, math.MinInt64/2, math.MaxInt64/2, 0)
		if err != nil && !(len(want) == 0 && errors.Is(err, ErrUnknownTag)) {
			t.Fatalf("raw %s: %v", tag, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("raw %s: got %d samples, want %d\n got %v\nwant %v", tag, len(got), len(want), got, want)
		}
		if len(want) == 0 {
			if db.HasTag(tag) {
				t.Fatalf("tag %s has no samples left but is listed", tag)
			}
			continue
		}
		lo, hi := want[0].T, want[len(want)-1].T+1
		for _, n := range []int{1, 100} {
			aggs := []model.Agg{model.AggMean, model.AggMin, model.AggMax, model.AggFirst, model.AggLast, model.AggSum, model.AggCount}
			if n > 1 {
				aggs = []model.Agg{model.AggMin, model.AggMax, model.AggCount}
			}
			for _, agg := range aggs {
				got, err := db.Aggregate(tag, lo-5000, hi+5000, n, agg)
				if err != nil {
					t.Fatal(err)
				}
				wa := m.aggregate(tag, lo-5000, hi+5000, n, agg)
				for i := range wa {
					if got[i].T != wa[i].T || got[i].OK != wa[i].OK || (wa[i].OK && !close1(got[i].V, wa[i].V)) {
						t.Fatalf("%s %s n=%d bucket %d: got %+v want %+v", tag, agg, n, i, got[i], wa[i])
					}
				}
			}
		}
		l, err := db.Latest(tag)
		if err != nil {
			t.Fatalf("latest %s: %v", tag, err)
		}
		if l[0].Sample != want[len(want)-1] {
			t.Fatalf("latest %s: got %+v want %+v", tag, l[0].Sample, want[len(want)-1])
		}
	}
}

// dayPoints returns n points of tag spread over days days from t0.
func dayPoints(tag string, t0 int64, n, days int, v float64) []model.Point {
	pts := make([]model.Point, n)
	for i := range pts {
		pts[i] = model.Point{Tag: tag, T: t0 + int64(i)*int64(days)*partitionMs/int64(n), V: v + float64(i)}
	}
	return pts
}

// TestDiskFull fills the disk at each point a write reaches it: the store
// reports ErrDiskFull (and ENOSPC), keeps every acknowledged sample
// readable, writes again once space returns without a restart, and a
// reopen, clean or after a power cut, shows exactly the acknowledged data.
func TestDiskFull(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	tests := []struct {
		name  string
		match func(string) bool
		// op is what runs while the disk is full; it reports whether its
		// points were acknowledged.
		op func(db *DB, m naive) error
	}{
		{"wal append", inWAL, func(db *DB, m naive) error {
			return db.Write(context.Background(), dayPoints("a", t0+5, 50, 1, 1000))
		}},
		{"flush", inRuns, func(db *DB, m naive) error {
			if err := db.Write(context.Background(), dayPoints("b", t0+7, 150, 3, 2000)); err != nil {
				return fmt.Errorf("write while runs cannot be written: %w", err)
			}
			m.write(dayPoints("b", t0+7, 150, 3, 2000))
			return db.Flush()
		}},
		{"merge", inRuns, func(db *DB, m naive) error {
			// Overlapping runs of a day force a merge when installed.
			if err := db.Write(context.Background(), dayPoints("a", t0+3, 100, 2, 3000)); err != nil {
				return err
			}
			m.write(dayPoints("a", t0+3, 100, 2, 3000))
			return db.Flush()
		}},
		{"bulk commit", inRuns, func(db *DB, m naive) error {
			return db.Write(context.Background(), dayPoints("c", t0+11, 500, 4, 4000))
		}},
		{"manifest write", isManifest, func(db *DB, m naive) error {
			if err := db.Write(context.Background(), dayPoints("b", t0+13, 120, 2, 5000)); err != nil {
				return err
			}
			m.write(dayPoints("b", t0+13, 120, 2, 5000))
			return db.Flush()
		}},
		{"series file", isSeries, func(db *DB, m naive) error {
			if err := db.Write(context.Background(), dayPoints("new.tag", t0+17, 20, 1, 6000)); err != nil {
				return err
			}
			m.write(dayPoints("new.tag", t0+17, 20, 1, 6000))
			return db.Flush()
		}},
		{"delete", isManifest, func(db *DB, m naive) error {
			_, err := db.Delete(context.Background(), "a", t0, t0+partitionMs)
			return err
		}},
	}
	for _, tt := range tests {
		for _, crash := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/crash=%v", tt.name, crash), func(t *testing.T) {
				fs := newFullFS()
				db, err := Open("/data", diskFullOptions(fs))
				if err != nil {
					t.Fatal(err)
				}
				db.nospace.hold = -1 // report recovery at once
				m := naive{}
				for i, tag := range []string{"a", "b"} {
					pts := dayPoints(tag, t0, 400, 3, float64(i))
					if err := db.Write(context.Background(), pts); err != nil {
						t.Fatal(err)
					}
					m.write(pts)
				}
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
				more := dayPoints("a", t0+1, 30, 1, 10)
				if err := db.Write(context.Background(), more); err != nil {
					t.Fatal(err)
				}
				m.write(more)

				fs.fill(tt.match)
				err = tt.op(db, m)
				if !errors.Is(err, ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("op on a full disk: got %v, want ErrDiskFull wrapping ENOSPC", err)
				}
				if fs.hits.Load() == 0 {
					t.Fatal("the full disk was never hit")
				}
				if !db.DiskFull() || db.DiskFullErrors() == 0 {
					t.Errorf("DiskFull() = %v, errors %d; want true, > 0", db.DiskFull(), db.DiskFullErrors())
				}
				checkStore(t, db, m)

				fs.fill(nil)
				again := dayPoints("a", t0+2, 40, 2, 7000)
				if err := db.Write(context.Background(), again); err != nil {
					t.Fatalf("write after space returned: %v", err)
				}
				m.write(again)
				if err := db.Flush(); err != nil {
					t.Fatalf("flush after space returned: %v", err)
				}
				if db.DiskFull() {
					t.Error("DiskFull() still true after space returned")
				}
				checkStore(t, db, m)

				var after vfs.FS = fs
				if crash {
					after = fs.Crash(vfs.CrashOptions{})
					db.Close()
				} else if err := db.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				db, err = Open("/data", diskFullOptions(after))
				if err != nil {
					t.Fatalf("reopen: %v", err)
				}
				defer db.Close()
				checkStore(t, db, m)
			})
		}
	}
}

// TestDiskFullHeadBound: while flushes fail for lack of space the head
// keeps what was acknowledged, and once it is full further writes are
// refused before the WAL rather than growing memory.
func TestDiskFullHeadBound(t *testing.T) {
	fs := newFullFS()
	db, err := Open("/data", diskFullOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := naive{}
	fs.fill(inRuns)
	const t0 = int64(1_700_000_000_000)
	refused := false
	for i := 0; i < 40 && !refused; i++ {
		pts := dayPoints("x", t0+int64(i), 50, 1, float64(i))
		err := db.Write(context.Background(), pts)
		switch {
		case err == nil:
			m.write(pts)
		case errors.Is(err, ErrDiskFull):
			refused = true
		default:
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if !refused {
		t.Fatal("writes never refused while the head could not be flushed")
	}
	checkStore(t, db, m)
	fs.fill(nil)
	if err := db.Flush(); err != nil {
		t.Fatalf("flush after space returned: %v", err)
	}
	pts := dayPoints("x", t0+5000, 10, 1, 99)
	if err := db.Write(context.Background(), pts); err != nil {
		t.Fatalf("write after space returned: %v", err)
	}
	m.write(pts)
	checkStore(t, db, m)
}

// TestDiskFullLoopMount runs the store on a real, tiny tmpfs until it is
// full. It needs root and PITH_TEST_DISKFULL=1; elsewhere it is skipped.
func TestDiskFullLoopMount(t *testing.T) {
	if os.Getenv("PITH_TEST_DISKFULL") != "1" {
		t.Skip("set PITH_TEST_DISKFULL=1 (needs root to mount a tmpfs) to run")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v: %s", err, out)
	}
	// Cleanups run last first: close the store, unmount, then TempDir's removal.
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	data := filepath.Join(dir, "data")
	o := quietOptions(nil)
	o.HeadMaxSamples = 2000
	db, err := Open(data, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	m := naive{}
	const t0 = int64(1_700_000_000_000)
	var full error
	for i := 0; i < 10000 && full == nil; i++ {
		// Noisy values compress badly, so the disk fills quickly.
		pts := make([]model.Point, 100)
		for k := range pts {
			pts[k] = model.Point{Tag: fmt.Sprintf("t%d", k%10), T: t0 + int64(i*100+k)*1000, V: math.Sin(float64(i*100+k)) * 1e6}
		}
		if err := db.Write(context.Background(), pts); err != nil {
			full = err
			break
		}
		m.write(pts)
		if i%50 == 0 {
			if err := db.Flush(); err != nil && !errors.Is(err, ErrDiskFull) {
				t.Fatal(err)
			}
		}
	}
	if !errors.Is(full, ErrDiskFull) || !errors.Is(full, syscall.ENOSPC) {
		t.Fatalf("filling the disk: got %v, want ErrDiskFull", full)
	}
	if free, err := db.FreeBytes(); err != nil || free > 1<<20 {
		t.Errorf("FreeBytes = %d, %v", free, err)
	}
	checkStore(t, db, m)
	// Make room (a file outside the store) and write again, no restart.
	if err := exec.Command("mount", "-o", "remount,size=16m", dir).Run(); err != nil {
		t.Fatalf("grow tmpfs: %v", err)
	}
	// The store notices by itself: its flusher retries every second.
	pts := []model.Point{{Tag: "t0", T: t0 - 1000, V: 1}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := db.Write(context.Background(), pts)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrDiskFull) || time.Now().After(deadline) {
			t.Fatalf("write after space returned: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.write(pts)
	if db.DiskFull() {
		if err := db.Flush(); err != nil {
			t.Fatalf("flush after space returned: %v", err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	db, err = Open(data, o)
	if err != nil {
		t.Fatal(err)
	}
	checkStore(t, db, m)
}

// TestDiskFullHold: the store reports a full disk for a while after the
// last refused write, so that small writes slipping through between
// refused ones do not make the flag and the log flap.
func TestDiskFullHold(t *testing.T) {
	fs := newFullFS()
	db, err := Open("/data", diskFullOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	fs.fill(inWAL)
	if err := db.Write(ctx, []model.Point{{Tag: "a", T: 1, V: 1}}); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("write on a full disk: %v", err)
	}
	fs.fill(nil)
	if err := db.Write(ctx, []model.Point{{Tag: "a", T: 2, V: 1}}); err != nil {
		t.Fatal(err)
	}
	if !db.DiskFull() {
		t.Error("DiskFull() false right after a refused write")
	}
	db.nospace.lastFull.Add(-int64(diskFullHold)) // as if the refusal were 10 s ago
	if err := db.Write(ctx, []model.Point{{Tag: "a", T: 3, V: 1}}); err != nil {
		t.Fatal(err)
	}
	if db.DiskFull() {
		t.Error("DiskFull() still true after the hold")
	}
}
