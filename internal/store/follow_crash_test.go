package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// TestFollowPowerCut runs the power-cut campaign of crash_power_test.go
// (small writes, bulk transactions, rollbacks, flushes, cuts inside all of
// them and inside recovery) with a follower reading and acknowledging
// concurrently. After the last recovery the follower, drained, must have
// received every point of every write the store holds, and no point of a
// write it does not hold (rolled back, or lost unacknowledged in a cut).
//
// PITH_POWERCUT_ROUNDS=400 go test -run TestFollowPowerCut ./internal/store
// runs a longer campaign.
func TestFollowPowerCut(t *testing.T) {
	rounds := 48
	if testing.Short() {
		rounds = 16
	}
	if v := os.Getenv("PITH_POWERCUT_ROUNDS"); v != "" {
		fmt.Sscan(v, &rounds)
	}
	const perCampaign = 8
	for c := 0; c*perCampaign < rounds; c++ {
		seed := uint64(500 + c)
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			followPowerCutCampaign(t, seed, min(perCampaign, rounds-c*perCampaign))
		})
	}
}

type pointKey struct {
	tag string
	t   int64
}

// received is what the follower got over every round.
type received struct {
	mu    sync.Mutex
	pts   map[pointKey]model.Point
	texts map[pointKey]model.TextPoint
}

func (r *received) addText(t *testing.T, pts []model.TextPoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range pts {
		k := pointKey{p.Tag, p.T}
		if old, ok := r.texts[k]; ok && old != p {
			t.Errorf("text %s@%d received as %+v and as %+v", p.Tag, p.T, old, p)
		}
		r.texts[k] = p
	}
}

func (r *received) add(t *testing.T, pts []model.Point) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range pts {
		k := pointKey{p.Tag, p.T}
		if old, ok := r.pts[k]; ok && old != p {
			t.Errorf("point %s@%d received as %+v and as %+v", p.Tag, p.T, old, p)
		}
		r.pts[k] = p
	}
}

// follow reads until ctx ends or the store fails, acknowledging about
// every other batch.
func (r *received) follow(t *testing.T, ctx context.Context, f *Follower, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 5))
	for {
		b, err := f.Next(ctx, 1+rnd.IntN(500))
		if err != nil {
			return
		}
		for _, e := range b.Entries {
			r.add(t, e.Points)
			r.addText(t, e.Texts)
		}
		if rnd.IntN(2) == 0 && f.Ack(b.End) != nil {
			return
		}
	}
}

func followPowerCutCampaign(t *testing.T, seed uint64, rounds int) {
	rnd := rand.New(rand.NewPCG(seed, 0x51ed27))
	const dir = "/data"
	fs := vfs.NewFaultFS()
	st := &pcState{}
	got := &received{pts: make(map[pointKey]model.Point), texts: make(map[pointKey]model.TextPoint)}
	db, err := Open(dir, powerCutOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Follow("up", FollowOptions{}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for round := 0; round < rounds; round++ {
		copts := vfs.CrashOptions{}
		if rnd.IntN(2) == 1 {
			copts.Rand = rand.New(rand.NewPCG(seed, uint64(round)))
			copts.ZeroTail = rnd.IntN(2) == 0
		}
		at := int64(1 + rnd.IntN(700))
		if rnd.IntN(6) == 0 {
			at = int64(1 + rnd.IntN(40))
		}
		cfs := &crashFS{fs: fs, at: at, opts: copts}
		db, err := Open(dir, powerCutOptions(cfs))
		if err != nil {
			if !cfs.crashed.Load() {
				t.Fatalf("round %d: recovery failed without a power cut: %v", round, err)
			}
			fs = cfs.crash()
			continue
		}
		f, err := db.Follow("up", FollowOptions{})
		if err != nil {
			if !cfs.crashed.Load() {
				t.Fatalf("round %d: follow: %v", round, err)
			}
			fs = cfs.crash()
			db.Close()
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		readSeed := rnd.Uint64()
		go func() {
			defer wg.Done()
			got.follow(t, ctx, f, readSeed)
		}()
		pcWork(rnd, db, st, cfs)
		fs = cfs.crash()
		cancel()
		db.Close() // every call fails now: the process is gone
		wg.Wait()
	}
	db, err = Open(dir, powerCutOptions(fs))
	if err != nil {
		t.Fatalf("final recovery: %v", err)
	}
	defer db.Close()
	pcCheck(t, db, st, rounds)
	f, err := db.Follow("up", FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got.follow(t, ctx, f, seed)
	present, delivered, texts := 0, 0, 0
	for _, op := range st.ops {
		n := 0
		for _, p := range op.tpts {
			if q, ok := got.texts[pointKey{p.Tag, p.T}]; ok {
				if q != p {
					t.Fatalf("op %d (%s): text %+v received as %+v", op.id, op.kind, p, q)
				}
				n++
			}
		}
		if len(op.tpts) > 0 {
			switch {
			case op.state == opPresent && n != len(op.tpts):
				t.Fatalf("text op %d (%s) is in the store but the follower received %d of its %d values", op.id, op.kind, n, len(op.tpts))
			case op.state != opPresent && n > 0:
				t.Fatalf("text op %d (%s) is not in the store but the follower received %d of its values", op.id, op.kind, n)
			}
			if op.state == opPresent {
				present++
				texts += n
			}
			continue
		}
		for _, p := range op.pts {
			if q, ok := got.pts[pointKey{p.Tag, p.T}]; ok {
				if q != p {
					t.Fatalf("op %d (%s): point %+v received as %+v", op.id, op.kind, p, q)
				}
				n++
			}
		}
		switch {
		case op.state == opPresent && n != len(op.pts):
			t.Fatalf("op %d (%s, acked %v) is in the store but the follower received %d of its %d points", op.id, op.kind, op.acked, n, len(op.pts))
		case op.state != opPresent && n > 0:
			t.Fatalf("op %d (%s, acked %v) is not in the store but the follower received %d of its points", op.id, op.kind, op.acked, n)
		}
		if op.state == opPresent {
			present++
			delivered += n
		}
	}
	if len(got.pts) != delivered || len(got.texts) != texts {
		t.Fatalf("the follower received %d points and %d texts, the stored ops hold %d and %d", len(got.pts), len(got.texts), delivered, texts)
	}
	t.Logf("%d ops, %d stored, %d points and %d texts delivered", len(st.ops), present, delivered, texts)
}
