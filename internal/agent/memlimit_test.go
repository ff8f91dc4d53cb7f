package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestMemoryLimitFor(t *testing.T) {
	const base = 136 << 20
	for _, c := range []struct {
		live, inflight, want int64
	}{
		{0, 0, base},
		{10 << 20, 0, base + 10<<20},
		{10 << 20, 10 << 20, base},             // all of it bodies
		{10 << 20, 50 << 20, base},             // bodies reserved, not yet read
		{500 << 20, 100 << 20, base + 400<<20}, // an import's staging beside bodies
	} {
		if got := memoryLimitFor(base, c.live, c.inflight); got != c.want {
			t.Errorf("memoryLimitFor(%d, %d, %d) = %d, want %d", base, c.live, c.inflight, got, c.want)
		}
	}
}

// TestMemoryLimitFollowsLiveHeap: the soft limit rises with what is held
// live beyond bodies in flight, after the next collection, and comes back
// down once it is gone.
func TestMemoryLimitFollowsLiveHeap(t *testing.T) {
	if os.Getenv("GOMEMLIMIT") != "" || os.Getenv("GOGC") != "" {
		t.Skip("GOMEMLIMIT or GOGC is set: the part leaves the runtime alone")
	}
	oldLimit, oldGC := debug.SetMemoryLimit(-1), debug.SetGCPercent(-1)
	debug.SetGCPercent(oldGC)
	t.Cleanup(func() {
		debug.SetMemoryLimit(oldLimit)
		debug.SetGCPercent(oldGC)
	})
	const base, held = 32 << 20, 96 << 20
	m := newMemoryLimitPart(base-memoryHeadroom, func() int64 { return 0 }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if got := debug.SetMemoryLimit(-1); got != base {
		t.Fatalf("limit at start %d, want %d", got, base)
	}
	// waitLimit collects until the limit satisfies ok.
	waitLimit := func(what string, ok func(int64) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			runtime.GC()
			time.Sleep(10 * time.Millisecond) // the cleanup goroutine runs
			got := debug.SetMemoryLimit(-1)
			if ok(got) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: limit %d MiB", what, got>>20)
			}
		}
	}
	live := make([]byte, held)
	for i := range live {
		live[i] = byte(i)
	}
	waitLimit("holding 96 MiB", func(l int64) bool { return l >= base+held })
	runtime.KeepAlive(live)
	live = nil
	waitLimit("after it is gone", func(l int64) bool { return l < base+held/4 })

	// Stopped, it no longer moves.
	m.Stop()
	debug.SetMemoryLimit(base)
	again := make([]byte, held)
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	if got := debug.SetMemoryLimit(-1); got != base {
		t.Errorf("limit moved after Stop: %d MiB", got>>20)
	}
	runtime.KeepAlive(again)
}
