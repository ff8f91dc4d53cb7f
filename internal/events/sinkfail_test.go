package events

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// flakyFS fails a share of the writes and syncs of sink files (never the
// WAL's), as a disk with bad sectors under the sink directory would.
type flakyFS struct {
	vfs.FS
	permille atomic.Int32 // failures per thousand sink operations
	failures atomic.Int64
}

func (f *flakyFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	if err != nil || !isSinkFile(name) {
		return file, err
	}
	return &flakyFile{File: file, fs: f}, nil
}

type flakyFile struct {
	vfs.File
	fs *flakyFS
}

var errFlaky = errors.New("injected sink failure")

func (f *flakyFile) fail() bool {
	if rand.Int32N(1000) < f.fs.permille.Load() {
		f.fs.failures.Add(1)
		return true
	}
	return false
}

func (f *flakyFile) Write(p []byte) (int, error) {
	if f.fail() {
		return 0, errFlaky
	}
	return f.File.Write(p)
}

func (f *flakyFile) Sync() error {
	if f.fail() {
		return errFlaky
	}
	return f.File.Sync()
}

// TestSinkFailuresLoseNothing posts from several clients while sink files
// fail now and then: the records of every dropped file are read back from
// the WAL and written again, so the sink ends with every acknowledged
// event, each client's in the order it sent them.
func TestSinkFailuresLoseNothing(t *testing.T) {
	fsys := &flakyFS{FS: vfs.NewFaultFS()}
	fsys.permille.Store(200)
	opts := testOptions(fsys)
	opts.RotateEvery = 20 * time.Millisecond
	opts.MaxFileBytes = 4 << 10
	opts.RetryMax = 2 * time.Millisecond
	c, err := New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	const clients, requests = 4, 200
	var wg sync.WaitGroup
	acked := make([][]string, clients)
	for cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range requests {
				var body strings.Builder
				var ids []string
				for e := range 3 {
					id := fmt.Sprintf("c%d-%04d-%d", cl, r, e)
					ids = append(ids, id)
					fmt.Fprintf(&body, `{"id":%q,"name":"tap","num":{"r":%d}}`+"\n", id, r)
				}
				if code, resp := post(t, h, body.String()); code != 200 {
					t.Errorf("post: %d %s", code, resp)
					return
				}
				acked[cl] = append(acked[cl], ids...)
				if r%16 == 0 {
					time.Sleep(time.Millisecond) // let the sink rotate in between
				}
			}
		}()
	}
	wg.Wait()
	fsys.permille.Store(0)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if fsys.failures.Load() == 0 || c.Stats().SinkErrors == 0 {
		t.Fatalf("no sink failure happened (%d injected, stats %+v): the test tests nothing", fsys.failures.Load(), c.Stats())
	}
	seen := map[string]int{}
	next := make([]int, clients) // per client, the index of the next id expected first
	for _, ev := range sinkEvents(t, fsys, "/data") {
		seen[ev.ID]++
		if seen[ev.ID] > 1 {
			continue // at least once: a failure after a file was in place repeats it
		}
		var cl int
		fmt.Sscanf(ev.ID, "c%d-", &cl)
		if want := acked[cl][next[cl]]; ev.ID != want {
			t.Fatalf("client %d: sink has %s where %s was next", cl, ev.ID, want)
		}
		next[cl]++
	}
	dups := 0
	for cl := range clients {
		if next[cl] != len(acked[cl]) {
			t.Errorf("client %d: %d of %d acknowledged events in the sink", cl, next[cl], len(acked[cl]))
		}
	}
	for _, n := range seen {
		dups += n - 1
	}
	t.Logf("%d injected failures, %d sink errors, %d files, %d events repeated", fsys.failures.Load(), c.Stats().SinkErrors, c.Stats().Files, dups)
}
