package archive

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/tag"
)

// fakeStore records writes. failFirst makes the first N calls fail; block
// makes every call wait for ctx.
type fakeStore struct {
	mu        sync.Mutex
	pts       []model.Point
	calls     int
	maxBatch  int
	failFirst int
	block     bool
	changed   chan struct{}
}

func newFakeStore() *fakeStore { return &fakeStore{changed: make(chan struct{}, 1)} }

func (f *fakeStore) Write(ctx context.Context, pts []model.Point) error {
	if f.block {
		<-ctx.Done()
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls <= f.failFirst {
		return errors.New("disk on fire")
	}
	f.pts = append(f.pts, pts...)
	f.maxBatch = max(f.maxBatch, len(pts))
	notify(f.changed)
	return nil
}

func (f *fakeStore) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pts)
}

// waitFor waits until the store holds n points; it fails the test after a
// generous deadline rather than asserting any timing.
func (f *fakeStore) waitFor(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for f.count() < n {
		select {
		case <-f.changed:
		case <-deadline:
			t.Fatalf("store holds %d points, want %d", f.count(), n)
		}
	}
}

// points makes rounds x tags points with T = round, in round-major order.
func points(tags, rounds int) [][]model.Point {
	out := make([][]model.Point, rounds)
	for r := range out {
		b := make([]model.Point, tags)
		for i := range b {
			b[i] = model.Point{Tag: fmt.Sprintf("t%d", i), T: int64(r), V: float64(r)}
		}
		out[r] = b
	}
	return out
}

// checkOrder verifies that every tag's points arrived once each, in order.
func checkOrder(t *testing.T, pts []model.Point, tags, rounds int) {
	t.Helper()
	if len(pts) != tags*rounds {
		t.Fatalf("wrote %d points, want %d", len(pts), tags*rounds)
	}
	next := map[string]int64{}
	for _, p := range pts {
		if p.T != next[p.Tag] {
			t.Fatalf("tag %s: got T=%d, want %d", p.Tag, p.T, next[p.Tag])
		}
		next[p.Tag]++
	}
}

func TestQueueWritesAllInOrder(t *testing.T) {
	for _, w := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("writers=%d", w), func(t *testing.T) {
			fs := newFakeStore()
			q := New(fs, nil, Options{Writers: w, MaxBatch: 70})
			const tags, rounds = 37, 300
			for _, b := range points(tags, rounds) {
				if !q.Enqueue(b) {
					t.Fatal("Enqueue refused")
				}
			}
			if err := q.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkOrder(t, fs.pts, tags, rounds)
			if fs.maxBatch > 70 {
				t.Errorf("a write held %d points, more than MaxBatch 70", fs.maxBatch)
			}
			st := q.Stats()
			if st.Pending != 0 || st.Written != tags*rounds || st.Enqueued != tags*rounds {
				t.Errorf("stats = %+v", st)
			}
			if q.Enqueue(points(1, 1)[0]) {
				t.Error("Enqueue after Close accepted")
			}
		})
	}
}

func TestQueueMaxDelayFlushes(t *testing.T) {
	fs := newFakeStore()
	q := New(fs, nil, Options{MaxDelay: 10 * time.Millisecond})
	defer q.Close(context.Background())
	q.Enqueue(points(3, 1)[0])
	fs.waitFor(t, 3) // written by the delay, not by Close
	if st := q.Stats(); st.Writes == 0 || st.Commit.Max <= 0 {
		t.Errorf("stats after delayed write = %+v", st)
	}
}

func TestQueueFreeze(t *testing.T) {
	fs := newFakeStore()
	q := New(fs, nil, Options{MaxBatch: 100, MaxDelay: time.Millisecond})
	q.Freeze(time.Hour)
	const tags, rounds = 20, 500
	for _, b := range points(tags, rounds) {
		if !q.Enqueue(b) {
			t.Fatal("Enqueue refused while frozen")
		}
	}
	// Full chunks and expired delays both exist now; neither may be written.
	time.Sleep(20 * time.Millisecond)
	if n := fs.count(); n != 0 {
		t.Fatalf("%d points written while frozen", n)
	}
	st := q.Stats()
	if !st.Frozen || st.Pending != tags*rounds {
		t.Fatalf("frozen stats = %+v", st)
	}
	q.Thaw()
	fs.waitFor(t, tags*rounds)
	// The drain report is made under the lock that the last write's
	// accounting takes, right after the store returns.
	deadline := time.Now().Add(20 * time.Second)
	for q.Stats().LastDrain.Points == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	st = q.Stats()
	if st.LastDrain.Points != tags*rounds || st.LastDrain.PerSec <= 0 || st.Frozen || st.Draining {
		t.Errorf("drain stats = %+v", st)
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, fs.pts, tags, rounds)
}

func TestQueueCloseLiftsFreeze(t *testing.T) {
	fs := newFakeStore()
	q := New(fs, nil, DefaultOptions())
	q.Freeze(time.Hour)
	q.Enqueue(points(5, 1)[0])
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fs.count() != 5 {
		t.Errorf("Close wrote %d points, want 5", fs.count())
	}
}

func TestQueueOverflow(t *testing.T) {
	fs := newFakeStore()
	q := New(fs, nil, Options{MaxBytes: 10 * pointBytes})
	q.Freeze(time.Hour)
	b := points(4, 1)[0]
	got := []bool{q.Enqueue(b), q.Enqueue(b), q.Enqueue(b)}
	if fmt.Sprint(got) != "[true true false]" {
		t.Errorf("Enqueue results = %v, want [true true false]", got)
	}
	st := q.Stats()
	if st.Overflows != 1 || st.Dropped != 4 || st.Pending != 8 || st.PendingBytes != 8*pointBytes {
		t.Errorf("overflow stats = %+v", st)
	}
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if fs.count() != 8 {
		t.Errorf("wrote %d, want 8", fs.count())
	}
}

func TestQueueRetries(t *testing.T) {
	fs := newFakeStore()
	fs.failFirst = 3
	q := New(fs, nil, Options{Writers: 1, RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
	q.Enqueue(points(10, 1)[0])
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := q.Stats()
	if fs.count() != 10 || st.WriteErrors != 3 || st.Written != 10 {
		t.Errorf("after retries: stored %d, stats %+v", fs.count(), st)
	}
}

func TestQueueCloseGivesUp(t *testing.T) {
	fs := newFakeStore()
	fs.block = true
	q := New(fs, nil, Options{Writers: 1})
	q.Enqueue(points(10, 1)[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := q.Close(ctx)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close err = %v, want a deadline error", err)
	}
	if q.Stats().Pending != 10 {
		t.Errorf("pending after failed close = %d, want 10", q.Stats().Pending)
	}
}

// TestTableFreezeEndToEnd runs scans through the tag table into a frozen
// queue, thaws it and checks that the store got every value in per-tag
// order.
func TestTableFreezeEndToEnd(t *testing.T) {
	fs := newFakeStore()
	q := New(fs, nil, Options{MaxBatch: 64, Writers: 3})
	tab := tag.New(nil, tag.DefaultOptions(), q)
	const tags, rounds = 25, 400
	batch := make([]tag.Sample, tags)
	for i := range batch {
		id, err := tab.Define(tag.Def{Name: fmt.Sprintf("t%d", i), Archive: tag.ArchiveAll})
		if err != nil {
			t.Fatal(err)
		}
		batch[i].ID = id
	}
	q.Freeze(time.Hour)
	for r := range rounds {
		for i := range batch {
			batch[i].T, batch[i].V = int64(r), float64(r)
		}
		tab.Update(batch)
	}
	if n := fs.count(); n != 0 {
		t.Fatalf("%d points written while frozen", n)
	}
	q.Thaw()
	fs.waitFor(t, tags*rounds)
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkOrder(t, fs.pts, tags, rounds)
	if st := tab.Stats(); st.Archived != tags*rounds || st.Refused != 0 {
		t.Errorf("table stats = %+v", st)
	}
}

// TestQueueChunksFitTheirBatches: at a low rate a chunk holds room for
// what its batches hold, not MaxBatch points; a burst grows chunks to
// MaxBatch and no further, every point is still written in order, and
// after the burst, batches of a few points again leave no large spare.
func TestQueueChunksFitTheirBatches(t *testing.T) {
	fs := newFakeStore()
	q := New(fs, nil, Options{Writers: 2, MaxDelay: time.Millisecond})
	const tags = 10
	rounds := points(tags, 300)
	for _, b := range rounds[:100] {
		q.Enqueue(b)
		fs.waitFor(t, fs.count()+1) // a few points a batch
	}
	fs.waitFor(t, 100*tags)
	checkRoom := func(when string) {
		t.Helper()
		q.mu.Lock()
		room := 0
		for _, c := range q.free {
			room += cap(c)
		}
		for _, sh := range q.shards {
			for _, c := range sh.chunks {
				room += cap(c.pts)
			}
		}
		q.mu.Unlock()
		if want := 2 * (freeChunks + 1) * 4 * firstChunk; room > want {
			t.Errorf("%s: chunks hold room for %d points; want at most %d", when, room, want)
		}
	}
	checkRoom("batches of a few")
	big := make([]model.Point, 0, 50000)
	for _, b := range rounds[100:200] {
		big = append(big, b...)
	}
	for range 30 {
		q.Enqueue(big) // 1,000 points a call: chunks grow
	}
	fs.waitFor(t, 100*tags+30*1000)
	for i, b := range rounds[200:] {
		for j := range b {
			b[j].T = int64(200 + i)
		}
		q.Enqueue(b)
		fs.waitFor(t, fs.count()+1)
	}
	fs.waitFor(t, 100*tags+30*1000+100*tags)
	checkRoom("batches of a few after a burst")
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range q.free {
		if cap(c) > DefaultOptions().MaxBatch {
			t.Errorf("a chunk has room for %d points, more than MaxBatch", cap(c))
		}
	}
}

func TestGrowChunk(t *testing.T) {
	for _, tc := range []struct{ cap0, need, max, want int }{
		{256, 257, 10000, 512}, {256, 2000, 10000, 2000}, {8192, 8193, 10000, 10000}, {0, 1, 5, 1},
	} {
		c := make([]model.Point, tc.cap0/2, tc.cap0)
		if tc.cap0 > 0 {
			c[0].T = 42
		}
		g := growChunk(c, tc.need, tc.max)
		if cap(g) != tc.want || len(g) != len(c) || tc.cap0 > 0 && g[0].T != 42 {
			t.Errorf("growChunk(cap %d, need %d, max %d): cap %d len %d, want cap %d len %d", tc.cap0, tc.need, tc.max, cap(g), len(g), tc.want, len(c))
		}
	}
}
