package store

import (
	"bytes"
	"context"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// TestLiveCommitStall paces the live test of `pith bench scale` in real
// time (10,000 tags, one durable write of every tag's value each 100 ms,
// up to 8 writes in flight as the benchmark client allows) and reports the
// commit latency (p50, p99, max), the writes not sent (8 in flight) and
// the flushes done, so that a flush stalling the writers shows in-process.
// PITH_STALL_SECONDS sets the duration (unset: skipped), PITH_STALL_HEAD
// the store's HeadMaxSamples, PITH_STALL_FIXED=1 stamps the writes every
// 100 ms of data time instead of the wall clock; PITH_STALL_STACKS=FILE writes every
// goroutine's stack the first few times a write has waited 300 ms.
// With -blockprofile / -mutexprofile it shows where the writers wait:
//
//	PITH_STALL_SECONDS=120 go test -run TestLiveCommitStall -v ./internal/store
func TestLiveCommitStall(t *testing.T) {
	secs, _ := strconv.Atoi(os.Getenv("PITH_STALL_SECONDS"))
	if secs <= 0 {
		t.Skip("PITH_STALL_SECONDS not set")
	}
	const tags, inFlight = 10000, 8
	names := make([]string, tags)
	for i := range names {
		names[i] = "live.t" + strconv.Itoa(i)
	}
	opts := quietOptions(nil)
	if s := os.Getenv("PITH_STALL_HEAD"); s != "" {
		opts.HeadMaxSamples, _ = strconv.Atoi(s)
	}
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var (
		mu       sync.Mutex
		lat      []time.Duration
		pending  atomic.Int32
		notSent  int
		wg       sync.WaitGroup
		started  sync.Map // write number -> start time
		stacks   bytes.Buffer
		nStacks  int
		stackOut = os.Getenv("PITH_STALL_STACKS")
	)
	stopWatch := make(chan struct{})
	if stackOut != "" {
		go func() {
			tk := time.NewTicker(50 * time.Millisecond)
			defer tk.Stop()
			for {
				select {
				case <-stopWatch:
					return
				case <-tk.C:
				}
				old := false
				started.Range(func(_, v any) bool {
					old = old || time.Since(v.(time.Time)) > 300*time.Millisecond
					return !old
				})
				if old && nStacks < 5 {
					nStacks++
					stacks.WriteString("==== a write waiting 300 ms ====\n")
					pprof.Lookup("goroutine").WriteTo(&stacks, 2)
					time.Sleep(time.Second)
				}
			}
		}()
	}
	t0 := time.Date(2026, 12, 6, 1, 0, 0, 0, time.UTC).UnixMilli()
	fixed := os.Getenv("PITH_STALL_FIXED") != ""
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	flushes0 := db.Stats().Flushes.Load()
	end := time.Now().Add(time.Duration(secs) * time.Second)
	for k := 0; time.Now().Before(end); k++ {
		<-tick.C
		if pending.Load() >= inFlight {
			mu.Lock()
			notSent++
			mu.Unlock()
			continue
		}
		// Stamped with the wall clock, as the benchmark client does: its
		// jitter is part of what the flushes encode.
		now := time.Now().UnixMilli()
		if fixed {
			now = t0 + int64(k)*100
		}
		pts := make([]model.Point, tags)
		for i := range pts {
			pts[i] = model.Point{Tag: names[i], T: now, V: float64((i+k)%1000) / 10}
		}
		pending.Add(1)
		wg.Add(1)
		go func(k int) {
			defer wg.Done()
			defer pending.Add(-1)
			s := time.Now()
			started.Store(k, s)
			// As POST /api/v1/import does: a transaction of one batch.
			tx := db.Begin()
			err := tx.Add(pts)
			if err == nil {
				err = tx.Commit(ctx)
			}
			if err != nil {
				t.Error(err)
			}
			started.Delete(k)
			d := time.Since(s)
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		}(k)
	}
	wg.Wait()
	close(stopWatch)
	if stackOut != "" {
		os.WriteFile(stackOut, stacks.Bytes(), 0o644)
	}
	slices.Sort(lat)
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	t.Logf("writes %d, not sent %d, flushes %d, commit p50 %v p99 %v max %v, last flush %d ms",
		len(lat), notSent, db.Stats().Flushes.Load()-flushes0, q(0.5), q(0.99), lat[len(lat)-1],
		db.Stats().LastFlushMillis.Load())
}
