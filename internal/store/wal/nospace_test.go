package wal

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// TestNoSpaceRecovers fills the filesystem, checks that the records that
// did not fit fail with ENOSPC and leave no trace, and that the WAL takes
// records again once space returns, without reopening.
func TestNoSpaceRecovers(t *testing.T) {
	for _, mode := range []Durability{DurabilityFsync, DurabilityRelaxed} {
		t.Run(mode.String(), func(t *testing.T) {
			fs := vfs.NewFaultFS()
			w := openWAL(t, fs, "wal", func(o *Options) {
				o.Durability = mode
				o.SegmentSize = 300 // cuts, so segment creation fails too
			})
			ctx := context.Background()
			var acked []string
			fs.SetCapacity(1000)
			failures := 0
			for i := 0; i < 60; i++ {
				rec := fmt.Sprintf("record-%03d-%s", i, string(make([]byte, i%17)))
				_, err := w.Commit(ctx, []byte(rec))
				switch {
				case err == nil:
					acked = append(acked, rec)
				case errors.Is(err, syscall.ENOSPC) && errors.Is(err, ErrNoSpace):
					failures++
					if failures%3 == 0 {
						fs.SetCapacity(int64(1000 + 400*failures))
					}
				default:
					t.Fatalf("commit %d: %v", i, err)
				}
			}
			if failures == 0 {
				t.Fatal("no commit ran out of space")
			}
			fs.SetCapacity(0)
			last := "after-space-returned"
			if _, err := w.Commit(ctx, []byte(last)); err != nil {
				t.Fatalf("commit after space returned: %v", err)
			}
			acked = append(acked, last)
			if got := w.Stats().NoSpace; got == 0 {
				t.Error("NoSpace counter not raised")
			}
			if err := w.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			w = openWAL(t, fs.Crash(vfs.CrashOptions{}), "wal", nil)
			defer w.Close()
			got, err := replayAll(t, w)
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			if fmt.Sprint(recs(got)) != fmt.Sprint(acked) {
				t.Fatalf("replay:\n got %q\nwant %q", recs(got), acked)
			}
		})
	}
}

// TestNoSpaceConcurrent fails random writes with ENOSPC under concurrent
// committers: every acknowledged record is replayed once, in order, and
// no refused record is.
func TestNoSpaceConcurrent(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 7))
			fs := vfs.NewFaultFS()
			w := openWAL(t, fs, "wal", func(o *Options) { o.SegmentSize = 2000 })
			var mu sync.Mutex
			acked := map[string]bool{}
			refused := map[string]bool{}
			// commit writes rec and sorts it by the answer.
			commit := func(rec string) {
				_, err := w.Commit(context.Background(), []byte(rec))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					acked[rec] = true
				case errors.Is(err, syscall.ENOSPC):
					refused[rec] = true
				default:
					t.Errorf("commit %s: %v", rec, err)
				}
			}
			// The committers run until the faults are all injected, so
			// they overlap them however slowly the machine schedules.
			var injected atomic.Bool
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 50 || !injected.Load(); i++ {
						commit(fmt.Sprintf("g%d-%d", g, i))
					}
				}()
			}
			for i := 0; i < 20; i++ {
				fs.FailWrite(rnd.IntN(10), syscall.ENOSPC)
				commit(fmt.Sprintf("main-%d", i))
			}
			injected.Store(true)
			wg.Wait()
			fs.FailWrite(-1, nil)
			if w.Stats().NoSpace == 0 || len(refused) == 0 {
				t.Fatalf("no write ran out of space (%d refused)", len(refused))
			}
			if err := w.Close(); err != nil {
				t.Fatalf("close: %v", err)
			}
			w = openWAL(t, fs.Crash(vfs.CrashOptions{}), "wal", nil)
			defer w.Close()
			got, err := replayAll(t, w)
			if err != nil {
				t.Fatalf("replay: %v", err)
			}
			seen := map[string]bool{}
			last := map[byte]int{}
			for _, r := range got {
				if seen[r.rec] {
					t.Fatalf("record %q replayed twice", r.rec)
				}
				seen[r.rec] = true
				if refused[r.rec] {
					t.Fatalf("refused record %q was replayed", r.rec)
				}
				var g byte
				var i int
				if _, err := fmt.Sscanf(r.rec, "g%c-%d", &g, &i); err == nil {
					if prev, ok := last[g]; ok && i <= prev {
						t.Fatalf("records of goroutine %c out of order", g)
					}
					last[g] = i
				}
			}
			for rec := range acked {
				if !seen[rec] {
					t.Fatalf("acknowledged record %q lost", rec)
				}
			}
		})
	}
}
