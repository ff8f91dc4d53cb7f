package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store/vfs"
)

// sharedTmpFS is the real filesystem that reports two writers of one
// shared file at once: a second create of a ".tmp" name (outside runs/,
// whose names are never reused) before the first was renamed or removed.
// Its writes of those files are slowed down so that writers which are not
// serialised overlap on every run, not once in a while.
type sharedTmpFS struct {
	vfs.OS
	mu       sync.Mutex
	open     map[string]bool
	overlaps []string
}

func newSharedTmpFS() *sharedTmpFS { return &sharedTmpFS{open: make(map[string]bool)} }

func shared(name string) bool {
	return strings.HasSuffix(name, ".tmp") && !strings.Contains(name, string(os.PathSeparator)+"runs"+string(os.PathSeparator))
}

func (f *sharedTmpFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if shared(name) && flag&os.O_CREATE != 0 {
		f.mu.Lock()
		if f.open[name] {
			f.overlaps = append(f.overlaps, name)
		}
		f.open[name] = true
		f.mu.Unlock()
		h, err := f.OS.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		return slowFile{h}, nil
	}
	return f.OS.OpenFile(name, flag, perm)
}

func (f *sharedTmpFS) done(name string) {
	if shared(name) {
		f.mu.Lock()
		delete(f.open, name)
		f.mu.Unlock()
	}
}

func (f *sharedTmpFS) Rename(oldname, newname string) error {
	err := f.OS.Rename(oldname, newname)
	f.done(oldname)
	return err
}

func (f *sharedTmpFS) Remove(name string) error {
	err := f.OS.Remove(name)
	f.done(name)
	return err
}

func (f *sharedTmpFS) report() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.overlaps...)
}

// slowFile widens the window between creating a shared tmp file and
// renaming it.
type slowFile struct{ vfs.File }

func (s slowFile) Write(p []byte) (int, error) {
	time.Sleep(2 * time.Millisecond)
	return s.File.Write(p)
}

// TestConcurrentBulkImportsAndFlushes runs bulk transactions side by side
// with small writes of new tags, flushes and deletes, as concurrent
// imports do on a running Pith. Every shared file (the series file and
// its copy, MANIFEST) must have one writer at a time, every commit must
// succeed, and a reopened store must hold every point.
func TestConcurrentBulkImportsAndFlushes(t *testing.T) {
	importers, rounds, tags, points := 4, 6, 5, 600
	if testing.Short() {
		rounds, tags, points = 2, 3, 400
	}
	dir := t.TempDir()
	fs := newSharedTmpFS()
	opts := testOptions()
	opts.FS = fs
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	want := make(map[string]int)
	var wantMu sync.Mutex
	errc := make(chan error, importers+1)
	var wg sync.WaitGroup
	for w := 0; w < importers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				tx := db.Begin()
				for i := 0; i < points; i += 100 {
					pts := make([]model.Point, 0, 100*tags)
					for k := 0; k < tags; k++ {
						tag := fmt.Sprintf("imp%d.r%d.t%d", w, r, k)
						for j := i; j < i+100; j++ {
							pts = append(pts, model.Point{Tag: tag, T: int64(j) * 1000, V: float64(j)})
						}
					}
					if err := tx.Add(pts); err != nil {
						tx.Rollback()
						errc <- fmt.Errorf("importer %d round %d: add: %w", w, r, err)
						return
					}
				}
				if err := tx.Commit(ctx); err != nil {
					errc <- fmt.Errorf("importer %d round %d: commit: %w", w, r, err)
					return
				}
				wantMu.Lock()
				for k := 0; k < tags; k++ {
					want[fmt.Sprintf("imp%d.r%d.t%d", w, r, k)] = points
				}
				wantMu.Unlock()
			}
		}(w)
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		// Small writes of new tags give every flush a series file to save.
		defer bg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			tag := fmt.Sprintf("live.%d", i)
			if err := db.Write(ctx, []model.Point{{Tag: tag, T: 1000, V: 1}}); err != nil {
				errc <- fmt.Errorf("write %s: %w", tag, err)
				return
			}
			wantMu.Lock()
			want[tag] = 1
			wantMu.Unlock()
			if err := db.Flush(); err != nil {
				errc <- fmt.Errorf("flush: %w", err)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if o := fs.report(); len(o) > 0 {
		t.Errorf("%d overlapping writers of shared files, first %s", len(o), o[0])
	}
	if err := db.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if db, err = Open(dir, opts); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	for tag, n := range want {
		got, err := db.Aggregate(tag, 0, int64(points)*1000, 1, model.AggCount)
		if err != nil {
			t.Errorf("after reopen, count %s: %v", tag, err)
			continue
		}
		if int(got[0].V) != n {
			t.Errorf("after reopen, %s holds %v points, want %d", tag, got[0].V, n)
		}
	}
}

// TestConcurrentBackupsOneDest runs backups of one store into one
// destination side by side (two clicks of a backup button): each must
// succeed and the destination must verify.
func TestConcurrentBackupsOneDest(t *testing.T) {
	db := buildBackupStore(t, t.TempDir(), 6)
	defer db.Close()
	dest := filepath.Join(t.TempDir(), "b")
	errc := make(chan error, 4)
	var wg sync.WaitGroup
	for i := 0; i < cap(errc); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := db.backup(context.Background(), dest, false); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Errorf("backup: %v", err)
	}
	if rep, err := Verify(dest); err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}
