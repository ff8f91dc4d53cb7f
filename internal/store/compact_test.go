package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// settleMerges runs merge jobs in the caller's goroutine until none is
// left (the merge loop may run some of them meanwhile).
func (db *DB) settleMerges() {
	for {
		db.flushMu.Lock()
		db.awaitMerge()
		job, _ := db.nextMerge()
		db.flushMu.Unlock()
		if job == nil {
			return
		}
		db.mergeOne()
	}
}

// holdMerges makes the merge loop stop at the start of each merge until
// the test lets it go; started receives each job as it stops.
func holdMerges(db *DB) (started chan *mergeJob, release chan struct{}) {
	started, release = make(chan *mergeJob, 16), make(chan struct{})
	db.mergeHook = func(j *mergeJob) {
		started <- j
		<-release
	}
	return started, release
}

// writeMinute writes one sample a second of tags a.x and a.y for minute
// m of day (in order), then flushes.
func writeMinute(t *testing.T, db *DB, day int64, m int) {
	t.Helper()
	var pts []model.Point
	for s := range 60 {
		ts := day + int64(m*60+s)*1000
		pts = append(pts, model.Point{Tag: "a.x", T: ts, V: float64(m*60 + s)}, model.Point{Tag: "a.y", T: ts, V: -float64(m*60 + s)})
	}
	if err := db.Write(context.Background(), pts); err != nil {
		t.Fatal(err)
	}
	if err := db.flushAll(false); err != nil {
		t.Fatal(err)
	}
}

// done runs f in a goroutine and reports whether it returned within d.
func done(d time.Duration, f func()) (finished chan struct{}, ok bool) {
	finished = make(chan struct{})
	go func() {
		f()
		close(finished)
	}()
	select {
	case <-finished:
		return finished, true
	case <-time.After(d):
		return finished, false
	}
}

// checkMinutes checks that a.x holds every second of minutes [0, n) of day.
func checkMinutes(t *testing.T, db *DB, day int64, n int) {
	t.Helper()
	for _, agg := range []model.Agg{model.AggCount, model.AggSum, model.AggLast} {
		b, err := db.Aggregate("a.x", day, day+int64(n*60)*1000, 1, agg)
		if err != nil {
			t.Fatal(err)
		}
		k := float64(n * 60)
		want := map[model.Agg]float64{model.AggCount: k, model.AggSum: k * (k - 1) / 2, model.AggLast: k - 1}[agg]
		if !b[0].OK || b[0].V != want {
			t.Fatalf("%s of a.x over %d minutes: %v, want %v", agg, n, b[0], want)
		}
	}
}

// TestFlushDoesNotWaitForMerge holds a merge of the day being written and
// checks that flushes of new data go on meanwhile (the day then holds
// more than MaxRunsPerPart runs for a while), that a flush whose late
// samples meet the merge waits for it, and that the day ends merged,
// disjoint and whole.
func TestFlushDoesNotWaitForMerge(t *testing.T) {
	o := testOptions()
	o.HeadMaxSamples = 1 << 20 // flushed by the test
	o.MaxRunsPerPart = 2
	db, err := Open(t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	started, release := holdMerges(db)
	day := time.Now().Truncate(24*time.Hour).UnixMilli() - partitionMs
	for m := range 3 {
		writeMinute(t, db, day, m)
	}
	var job *mergeJob
	select {
	case job = <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("no merge started with 3 runs in the day, MaxRunsPerPart 2")
	}
	// New data meets nothing: its flushes go on while the merge is held.
	for m := 3; m < 8; m++ {
		if _, ok := done(30*time.Second, func() { writeMinute(t, db, day, m) }); !ok {
			t.Fatalf("the flush of minute %d waited for the merge in flight", m)
		}
	}
	db.mu.RLock()
	n := len(db.parts[partitionOf(day)])
	db.mu.RUnlock()
	if n != 3+5 {
		t.Fatalf("the day holds %d runs while its merge is held, want 8", n)
	}
	checkMinutes(t, db, day, 8)

	// A late sample inside the merge's span waits for it.
	late := job.runs[0].index()[0].minT + 500
	lateDone, ok := done(200*time.Millisecond, func() {
		if err := db.Write(context.Background(), []model.Point{{Tag: "a.x", T: late, V: 1e6}}); err != nil {
			t.Error(err)
		}
		if err := db.flushAll(false); err != nil {
			t.Error(err)
		}
	})
	if ok {
		t.Fatal("a flush meeting the merge in flight did not wait for it")
	}
	go func() {
		for range started {
			release <- struct{}{}
		}
	}()
	release <- struct{}{}
	<-lateDone
	db.settleMerges()
	db.mu.RLock()
	runs := db.parts[partitionOf(day)]
	n, apart := len(runs), disjoint(runs)
	db.mu.RUnlock()
	if n > o.MaxRunsPerPart || !apart {
		t.Fatalf("after the merges the day holds %d runs (disjoint: %v), want at most %d, disjoint", n, apart, o.MaxRunsPerPart)
	}
	b, err := db.Aggregate("a.x", late, late+1, 1, model.AggLast)
	if err != nil || !b[0].OK || b[0].V != 1e6 {
		t.Fatalf("late sample: %v, %v", b, err)
	}
	c, err := db.Aggregate("a.x", day, day+8*60*1000, 1, model.AggCount)
	if err != nil || c[0].V != 8*60+1 {
		t.Fatalf("count after the merges: %v, %v; want %d", c, err, 8*60+1)
	}
}

// TestCloseStopsMerge closes the store while a merge is held: Close stops
// it, merges the day itself, and the store opens again whole.
func TestCloseStopsMerge(t *testing.T) {
	o := testOptions()
	o.HeadMaxSamples = 1 << 20
	o.MaxRunsPerPart = 2
	dir := t.TempDir()
	db, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	started, release := holdMerges(db)
	day := time.Now().Truncate(24*time.Hour).UnixMilli() - partitionMs
	for m := range 3 {
		writeMinute(t, db, day, m)
	}
	<-started
	closed, _ := done(0, func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	// Close waits for the merge loop, which stops the merge once let go.
	time.Sleep(50 * time.Millisecond)
	close(release)
	<-closed
	db, err = Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.mu.RLock()
	n := len(db.parts[partitionOf(day)])
	db.mu.RUnlock()
	if n != 1 {
		t.Fatalf("after Close the day holds %d runs, want 1", n)
	}
	checkMinutes(t, db, day, 3)
	ents, err := os.ReadDir(filepath.Join(dir, "runs"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("runs/ holds %v, want the one merged run", names)
	}
}
