package events

import (
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
)

// TestIDTable runs random adds, removals and expiries against a plain
// slice of the same entries, with a hash of few values so that probe
// runs are long and the index's backward shifts are exercised.
func TestIDTable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    int
		hashes uint64
	}{
		{"collisions", 300, 7},
		{"spread", 3000, 1 << 40},
		{"tiny", 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(1, 2))
			tab := newIDTable(tc.max)
			var model []idEntry // live entries, oldest first
			now := int64(0)
			for step := range 20000 {
				switch r := rnd.IntN(10); {
				case r < 7:
					h := rnd.Uint64N(tc.hashes)
					e := idEntry{hash: h, exp: now + 1 + rnd.Int64N(50), seg: uint32(step), off: uint32(rnd.IntN(1000))}
					tab.add(h, wal.Pos{Segment: e.seg, Offset: int64(e.off)}, e.exp)
					if len(model) == tc.max {
						model = model[1:]
					}
					model = append(model, e)
				case r < 8 && len(model) > 0:
					i := rnd.IntN(len(model))
					e := model[i]
					tab.remove(e.hash, wal.Pos{Segment: e.seg, Offset: int64(e.off)})
					model[i].exp = 0
				default:
					now += rnd.Int64N(5)
					tab.expire(now)
					for len(model) > 0 && model[0].exp <= now {
						model = model[1:]
					}
				}
				if tab.len() != len(model) {
					t.Fatalf("step %d: %d entries, want %d", step, tab.len(), len(model))
				}
				if step%97 != 0 {
					continue
				}
				for _, e := range model {
					n := 0
					tab.find(e.hash, func(got *idEntry) bool {
						if *got == e {
							n++
						}
						return false
					})
					if want := map[bool]int{true: 0, false: 1}[e.exp == 0]; n != want {
						t.Fatalf("step %d: entry %+v found %d times, want %d", step, e, n, want)
					}
				}
			}
			tab.expire(now + 1000)
			if tab.len() != 0 || tab.memory() != 0 {
				t.Errorf("after every id expired: %d entries, %d bytes, want none", tab.len(), tab.memory())
			}
		})
	}
}

// TestIDTableCap checks that the table's memory at its largest stays
// within the bound it was sized for.
func TestIDTableCap(t *testing.T) {
	for _, bytes := range []int64{64 << 10, 1 << 20, 14 << 20, DefaultDedupMemory} {
		n := idTableCap(bytes, 1<<30)
		tab := newIDTable(n)
		for i := range n + 10 {
			tab.add(uint64(i)*0x9e3779b97f4a7c15, wal.Pos{}, 1)
		}
		if tab.len() != n || tab.memory() > bytes {
			t.Errorf("bound %d: %d entries in %d bytes, want %d in at most %d", bytes, tab.len(), tab.memory(), n, bytes)
		}
		if per := float64(tab.memory()) / float64(n); per > 40 {
			t.Errorf("bound %d: %.1f bytes per id", bytes, per)
		}
	}
}

// collide is a dedup hash that every id shares.
func collide(maphash.Seed, []byte) uint64 { return 42 }

// TestDedupWindowAcrossCrash posts events with client ids, lets the sink
// deliver them (files complete, WAL segments past the cursor), retries
// them, cuts the power, reopens and retries them again: every retry is
// a duplicate, every new id after the restart is stored, and the sink
// files hold each id exactly once. With a hash that every id shares,
// each match has to be confirmed against the stored id.
func TestDedupWindowAcrossCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		hash func(maphash.Seed, []byte) uint64
	}{{"maphash", nil}, {"collisions", collide}} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := vfs.NewFaultFS()
			opts := testOptions(fsys)
			opts.SegmentSize = 4096 // many segments, delivered ones included
			opts.MaxFileBytes = 1000
			opts.RotateEvery = 20 * time.Millisecond
			opts.DrainTimeout = 50 * time.Millisecond
			opts.dedupHash = tc.hash
			c, err := New("/data", opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			body := func(from, to int) string {
				var b strings.Builder
				for i := from; i < to; i++ {
					fmt.Fprintf(&b, "{\"id\":\"ev-%d\",\"name\":\"door.open\",\"num\":{\"i\":%d}}\n", i, i)
				}
				return b.String()
			}
			postAll := func(c *Collector, from, to int, want string) {
				t.Helper()
				for i := from; i < to; i += 5 {
					if code, got := post(t, c.Handler(), body(i, i+5)); code != 200 || strings.TrimSpace(got) != want {
						t.Fatalf("post ev-%d..: got %d %s, want %s", i, code, got, want)
					}
				}
			}
			postAll(c, 0, 400, `{"accepted":5,"duplicates":0}`)
			// Wait until the sink holds them all, so that the old code's
			// dedup state, rebuilt from undelivered records, would be empty.
			deadline := time.Now().Add(10 * time.Second)
			for c.Stats().Backlog.Events > 0 && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			postAll(c, 0, 400, `{"accepted":0,"duplicates":5}`)
			after := fsys.Crash(vfs.CrashOptions{})
			c.Close() // fails on the crashed filesystem; it only stops goroutines

			opts.FS = after
			c, err = New("/data", opts, nil)
			if err != nil {
				t.Fatalf("reopen after crash: %v", err)
			}
			postAll(c, 0, 400, `{"accepted":0,"duplicates":5}`)
			postAll(c, 400, 450, `{"accepted":5,"duplicates":0}`)
			postAll(c, 400, 450, `{"accepted":0,"duplicates":5}`)
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			seen := map[string]int{}
			for _, ev := range sinkEvents(t, after, "/data") {
				seen[ev.ID]++
			}
			for i := range 450 {
				if n := seen[fmt.Sprintf("ev-%d", i)]; n != 1 {
					t.Errorf("ev-%d is in the sink files %d times, want once", i, n)
				}
			}
			if len(seen) != 450 {
				t.Errorf("%d ids in the sink files, want 450", len(seen))
			}
		})
	}
}

// TestDedupWALBytes: delivered segments kept for the window stay within
// DedupWALBytes, the ids of older ones are forgotten, and the newest ids
// are still duplicates.
func TestDedupWALBytes(t *testing.T) {
	fsys := vfs.NewFaultFS()
	opts := testOptions(fsys)
	opts.SegmentSize = 4096
	opts.DedupWALBytes = 2 * 4096
	opts.MaxFileBytes = 1000
	opts.RotateEvery = 20 * time.Millisecond
	c, err := New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 300 {
		if code, got := post(t, c.Handler(), fmt.Sprintf(`{"id":"w-%d","name":"a","str":{"pad":"%0100d"}}`, i, i)); code != 200 {
			t.Fatalf("post: %d %s", code, got)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().Backlog.Events > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// One more file completes and truncates the WAL: the limit, the
	// cursor's segment and the one being written are left.
	post(t, c.Handler(), `{"name":"a"}`)
	var names []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if names, err = fsys.ReadDir("/data/wal"); err != nil {
			t.Fatal(err)
		}
		if len(names) <= 4 || time.Now().After(deadline) {
			break
		}
	}
	if len(names) > 4 {
		t.Errorf("%d wal segments kept, want at most 4: %v", len(names), names)
	}
	if code, got := post(t, c.Handler(), `{"id":"w-299","name":"a"}`); code != 200 || strings.TrimSpace(got) != `{"accepted":0,"duplicates":1}` {
		t.Errorf("newest id again: %d %s, want a duplicate", code, got)
	}
}
