package store

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store/vfs"
)

// pageSize is the unit in which Linux accounts written file data
// (/proc/PID/io write_bytes counts each page when it becomes dirty).
const pageSize = 4096

// countFS counts the bytes written through it by kind of file, and the
// pages dirtied as the kernel counts them: a page counts once until a
// Sync of its file cleans it, so an fsync after each small append counts
// the last, partly filled, page again each time.
type countFS struct {
	vfs.FS
	mu    sync.Mutex
	bytes map[string]int64 // by kind: "wal", "run", "other"
	pages map[string]int64
}

func newCountFS() *countFS {
	return &countFS{FS: vfs.OS{}, bytes: map[string]int64{}, pages: map[string]int64{}}
}

func fileKind(name string) string {
	switch {
	case strings.HasSuffix(name, ".wal"):
		return "wal"
	case strings.Contains(filepath.ToSlash(name), "/runs/"):
		return "run"
	}
	return "other"
}

func (c *countFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return f, err
	}
	return &countFile{File: f, fs: c, kind: fileKind(name), dirty: map[int64]bool{}}, nil
}

type countFile struct {
	vfs.File
	fs    *countFS
	kind  string
	dirty map[int64]bool
}

func (f *countFile) note(off int64, n int) {
	if n <= 0 {
		return
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.fs.bytes[f.kind] += int64(n)
	for p := off / pageSize; p <= (off+int64(n)-1)/pageSize; p++ {
		if !f.dirty[p] {
			f.dirty[p] = true
			f.fs.pages[f.kind] += pageSize
		}
	}
}

func (f *countFile) Write(b []byte) (int, error) {
	var off int64
	if s, ok := f.File.(io.Seeker); ok {
		off, _ = s.Seek(0, io.SeekCurrent)
	}
	n, err := f.File.Write(b)
	f.note(off, n)
	return n, err
}

func (f *countFile) WriteAt(b []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(b, off)
	f.note(off, n)
	return n, err
}

func (f *countFile) Sync() error {
	err := f.File.Sync()
	f.fs.mu.Lock()
	clear(f.dirty)
	f.fs.mu.Unlock()
	return err
}

// BenchmarkLiveWriteAmp writes the live test of `pith bench scale`
// (10,000 tags, every tag's value in one durable write every 100 ms of
// data time, values stepping by 0.1) straight into the store and reports
// where the bytes go, per value: WAL records (wal-B/value) and the pages
// they dirty with an fsync each (wal-dev-B/value), run files written by
// flushes (run-B/value) and by merges (merge-B/value), every page dirtied
// (dev-B/value, what /proc/PID/io write_bytes counts) and the store's size
// after Close (disk-B/value). PITH_AMP_BATCHES sets the number of writes
// (default 1800: the 3 minutes of `--live 3m`), PITH_AMP_HEAD the
// store's HeadMaxSamples (default 1 M):
//
//	go test -run '^$' -bench LiveWriteAmp -benchtime 1x ./internal/store
func BenchmarkLiveWriteAmp(b *testing.B) {
	batches, tags := 1800, 10000
	if s := os.Getenv("PITH_AMP_BATCHES"); s != "" {
		batches, _ = strconv.Atoi(s)
	}
	names := make([]string, tags)
	for i := range names {
		names[i] = "live.t" + strconv.Itoa(i)
	}
	for b.Loop() {
		dir := b.TempDir()
		fs := newCountFS()
		opts := quietOptions(nil)
		opts.FS = fs
		if s := os.Getenv("PITH_AMP_HEAD"); s != "" {
			opts.HeadMaxSamples, _ = strconv.Atoi(s)
		}
		db, err := Open(dir, opts)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC).UnixMilli()
		pts := make([]model.Point, tags)
		start := time.Now()
		for k := 0; k < batches; k++ {
			for i := range pts {
				pts[i] = model.Point{Tag: names[i], T: t0 + int64(k)*100, V: float64((i+k)%1000) / 10}
			}
			if err := db.Write(ctx, pts); err != nil {
				b.Fatal(err)
			}
			if k == 0 {
				// The live test's tags reach the series file within a
				// second (flushLoop), when ten of its writes are done, and
				// later records name them by id: so here too.
				for _, ok := db.series.savedID(names[tags-1]); !ok; _, ok = db.series.savedID(names[tags-1]) {
					time.Sleep(10 * time.Millisecond)
				}
				start = time.Now()
			}
		}
		el := time.Since(start)
		st := db.Stats()
		fs.mu.Lock()
		walDev, dev := fs.pages["wal"], fs.pages["wal"]+fs.pages["run"]+fs.pages["other"]
		fs.mu.Unlock()
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
		values := float64(batches * tags)
		b.ReportMetric(float64(st.WALBytes.Load())/values, "wal-B/value")
		b.ReportMetric(float64(walDev)/values, "wal-dev-B/value")
		b.ReportMetric(float64(st.RunBytes.Load()-st.MergeBytes.Load())/values, "run-B/value")
		b.ReportMetric(float64(st.MergeBytes.Load())/values, "merge-B/value")
		b.ReportMetric(float64(dev)/values, "dev-B/value")
		b.ReportMetric(float64(dirSize(b, dir))/values, "disk-B/value")
		b.ReportMetric(values/el.Seconds(), "values/s")
	}
}

func dirSize(b *testing.B, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}
