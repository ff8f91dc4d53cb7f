package wal

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// crashRecord builds the record with id: the id, then bytes derived from
// it, so that a replayed record can be checked whole.
func crashRecord(id uint64, size int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, id)
	r := rand.New(rand.NewPCG(id, 7))
	for range size {
		b = append(b, byte(r.Uint32()))
	}
	return b
}

// appended is one record handed to Append, with whether its Sync returned nil.
type appended struct {
	id    uint64
	pos   Pos
	acked bool
}

// TestCrashProperty appends random records with random Syncs and Cuts,
// cuts the power at a random point, reopens, and checks that every record
// whose Sync returned nil is back, that the log is a prefix of what was
// appended (nothing after a torn record, nothing half-present), and that
// recovery can go on appending. Several power cuts hit the same log.
func TestCrashProperty(t *testing.T) {
	iterations := 120
	if testing.Short() {
		iterations = 20
	}
	var acked, lost, torn, padded int
	defer func() {
		t.Logf("acked records %d, unacked records lost %d, torn tails cut %d, generations with padding %d", acked, lost, torn, padded)
		if !t.Failed() && (acked == 0 || lost == 0 || torn == 0 || padded == 0) {
			t.Errorf("the test did not exercise acks, losses, torn tails and padding")
		}
	}()
	for it := range iterations {
		seed := uint64(it)
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			fs := vfs.NewFaultFS()
			var all []appended // every record appended in all generations
			nextID := uint64(1)
			for gen := range 3 {
				// Relaxed mode leaves written but unsynced tails for the
				// power cut to tear; its Syncs do not promise durability.
				relaxed := it%4 == 0
				o := Options{FS: fs, SegmentSize: 2048, BufferSize: 4096}
				if it%3 == 2 {
					// Segments of several pages, so that rounds of the
					// larger records end in padding.
					o.SegmentSize = 16 << 10
				}
				if relaxed {
					o.Durability = DurabilityRelaxed
				}
				w, err := Open("data/wal", o, nil)
				if err != nil {
					t.Fatalf("gen %d: open: %v", gen, err)
				}
				// Records lost in the crash are forgotten: the next
				// generation must find exactly what this one replayed.
				kept := checkReplay(t, w, all)
				for _, a := range all {
					if a.acked {
						acked++
					}
				}
				lost += countIDs(all) - len(kept)
				if w.Stats().TornBytes > 0 {
					torn++
				}
				all = kept
				var mu sync.Mutex
				record := func(a appended) {
					mu.Lock()
					all = append(all, a)
					mu.Unlock()
				}
				// The power cut happens while the WAL runs, perhaps
				// while its committer writes.
				opts := vfs.CrashOptions{Rand: rand.New(rand.NewPCG(seed, uint64(gen))), ZeroTail: rng.IntN(4) == 0}
				var once sync.Once
				var after *vfs.FaultFS
				crash := func() { once.Do(func() { after = fs.Crash(opts) }) }
				if it%2 == 0 {
					runSequential(rng, w, relaxed, &nextID, record)
				} else {
					runConcurrent(rng, w, crash, &nextID, record)
				}
				crash()
				if w.Stats().PadBytes > 0 {
					padded++
				}
				w.Close()
				fs = after
			}
			w, err := Open("data/wal", Options{FS: fs, SegmentSize: 2048}, nil)
			if err != nil {
				t.Fatalf("final open: %v", err)
			}
			checkReplay(t, w, all)
			w.Close()
		})
	}
}

// runSequential appends, syncs and cuts from one goroutine for a random
// number of operations.
func runSequential(rng *rand.Rand, w *WAL, relaxed bool, nextID *uint64, record func(appended)) {
	ops := rng.IntN(60)
	var last appended
	for range ops {
		switch k := rng.IntN(10); {
		case k < 6:
			id := *nextID
			*nextID++
			size := rng.IntN(200)
			if rng.IntN(10) == 0 {
				size = 3000 // larger than a segment
			}
			pos, err := w.Append(crashRecord(id, size))
			if err != nil {
				return
			}
			last = appended{id: id, pos: pos}
			record(last)
		case k < 9:
			if last.id != 0 && w.Sync(context.Background(), last.pos) == nil && !relaxed {
				last.acked = true
				record(last)
			}
		default:
			w.Cut()
		}
	}
}

// runConcurrent runs three committing goroutines and cuts the power under
// them after a random number of records.
func runConcurrent(rng *rand.Rand, w *WAL, crash func(), nextID *uint64, record func(appended)) {
	var ids atomic.Uint64
	ids.Store(*nextID)
	limit := *nextID + uint64(rng.IntN(80))
	crashAt := *nextID + uint64(rng.IntN(80))
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				id := ids.Add(1) - 1
				if id >= limit {
					return
				}
				if id == crashAt {
					crash()
					return
				}
				pos, err := w.Append(crashRecord(id, int(id%5)*40+g))
				if err != nil {
					return
				}
				record(appended{id: id, pos: pos})
				if id%3 != 0 {
					continue
				}
				if w.Sync(context.Background(), pos) == nil {
					record(appended{id: id, pos: pos, acked: true})
				}
			}
		}()
	}
	wg.Wait()
	*nextID = max(limit, crashAt) + 1
}

// checkReplay checks that the replayed log is a prefix, in position order,
// of the appended records, that each record is whole, and that every acked
// record is in it. It returns the replayed records.
func checkReplay(t *testing.T, w *WAL, all []appended) []appended {
	t.Helper()
	byID := map[uint64]appended{}
	for _, a := range all {
		if prev, ok := byID[a.id]; ok && prev.acked {
			a.acked = true
		}
		byID[a.id] = a
	}
	var order []appended
	for _, a := range byID {
		order = append(order, a)
	}
	slices.SortFunc(order, func(a, b appended) int {
		if a.pos.Less(b.pos) {
			return -1
		}
		if b.pos.Less(a.pos) {
			return 1
		}
		return 0
	})
	var got []uint64
	err := w.Replay(Pos{}, func(pos, _ Pos, rec []byte) error {
		if len(rec) < 8 {
			return fmt.Errorf("record at %v: %d bytes", pos, len(rec))
		}
		id := binary.LittleEndian.Uint64(rec)
		want := crashRecord(id, len(rec)-8)
		if string(want) != string(rec) {
			return fmt.Errorf("record %d at %v: content differs", id, pos)
		}
		a, ok := byID[id]
		if !ok || a.pos != pos {
			return fmt.Errorf("record %d at %v: appended at %v", id, pos, a.pos)
		}
		got = append(got, id)
		return nil
	})
	if err != nil {
		var cerr *CorruptionError
		if errors.As(err, &cerr) {
			t.Fatalf("replay: corruption after a power cut: %v", err)
		}
		t.Fatalf("replay: %v", err)
	}
	// got must be a prefix of order, except that records the committer
	// wrote in one piece may all be missing from the tail.
	for i, id := range got {
		if i >= len(order) || order[i].id != id {
			t.Fatalf("replayed record %d is id %d, want %v", i, id, order[i].id)
		}
	}
	for _, a := range order[len(got):] {
		if a.acked {
			t.Fatalf("acked record %d at %v lost (replayed %d of %d)", a.id, a.pos, len(got), len(order))
		}
	}
	return order[:len(got)]
}

func countIDs(all []appended) int {
	ids := map[uint64]bool{}
	for _, a := range all {
		ids[a.id] = true
	}
	return len(ids)
}
