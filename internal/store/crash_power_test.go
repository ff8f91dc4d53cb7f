package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// The power-cut suite runs the store on vfs.FaultFS and cuts the power at
// a chosen filesystem operation: the Nth write, sync, rename, remove,
// directory sync or file creation of a round, whichever goroutine makes
// it, so crashes land inside WAL commits, flushes, merges, bulk commits
// and even inside recovery. After each cut the store is reopened on what
// was durable and checked against the acknowledged writes.
//
// PITH_POWERCUT_ROUNDS=2000 go test -run TestPowerCut ./internal/store
// runs a longer campaign.

// crashFS counts the mutating operations on a FaultFS and cuts the power
// at operation number at. Read-only calls are not counted.
type crashFS struct {
	fs   *vfs.FaultFS
	at   int64
	opts vfs.CrashOptions

	n       atomic.Int64
	once    sync.Once
	after   *vfs.FaultFS // what the power cut left, once it happened
	crashed atomic.Bool
}

var _ vfs.FS = (*crashFS)(nil)

// tick counts one operation and cuts the power when it is the chosen one.
// The operation itself then runs on the crashed filesystem and fails.
func (c *crashFS) tick() {
	if c.n.Add(1) == c.at {
		c.crash()
	}
}

// crash cuts the power now (once) and returns what survived.
func (c *crashFS) crash() *vfs.FaultFS {
	c.once.Do(func() {
		c.after = c.fs.Crash(c.opts)
		c.crashed.Store(true)
	})
	return c.after
}

func (c *crashFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		c.tick()
	}
	f, err := c.fs.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, c: c}, nil
}

func (c *crashFS) Remove(name string) error { c.tick(); return c.fs.Remove(name) }
func (c *crashFS) Rename(oldname, newname string) error {
	c.tick()
	return c.fs.Rename(oldname, newname)
}
func (c *crashFS) ReadDir(dir string) ([]string, error) { return c.fs.ReadDir(dir) }
func (c *crashFS) MkdirAll(dir string, perm os.FileMode) error {
	c.tick()
	return c.fs.MkdirAll(dir, perm)
}
func (c *crashFS) SyncDir(dir string) error { c.tick(); return c.fs.SyncDir(dir) }

type crashFile struct {
	vfs.File
	c *crashFS
}

func (f *crashFile) Write(p []byte) (int, error) { f.c.tick(); return f.File.Write(p) }
func (f *crashFile) WriteAt(p []byte, off int64) (int, error) {
	f.c.tick()
	return f.File.WriteAt(p, off)
}
func (f *crashFile) Sync() error               { f.c.tick(); return f.File.Sync() }
func (f *crashFile) Truncate(size int64) error { f.c.tick(); return f.File.Truncate(size) }

// pcOp is one write attempt: its points are unique to it (tag and
// timestamp), so after a crash each op is checkable on its own.
type pcOp struct {
	id    int
	kind  string
	pts   []model.Point
	tpts  []model.TextPoint // a text op's points (pts is then empty)
	acked bool              // the call returned nil: every point must survive
	// state after the last recovery: unknown (not yet seen), present or
	// absent. A present op must stay present; an absent unacknowledged
	// op must stay absent (nothing comes back from the dead).
	state int
}

const (
	opUnknown = iota
	opPresent
	opAbsent
)

// pcState is what a power-cut campaign knows about every write.
type pcState struct {
	mu  sync.Mutex
	ops []*pcOp
}

var pcTags = []string{"pc.a", "pc.b", "pc.c", "pc.d"}

// pcDays are the day partitions the campaign writes to; writes to older
// days arrive late and force merges with existing runs.
var pcDays = []int64{19670, 19671, 19672}

func (s *pcState) newOp(rnd *rand.Rand, kind string, n int) *pcOp {
	s.mu.Lock()
	op := &pcOp{id: len(s.ops), kind: kind}
	s.ops = append(s.ops, op)
	s.mu.Unlock()
	day := pcDays[rnd.IntN(len(pcDays))]
	// Op id*4000 + i keeps every op's timestamps apart within a day.
	base := day*partitionMs + int64(op.id)*4000
	for i := 0; i < n; i++ {
		op.pts = append(op.pts, model.Point{Tag: pcTags[(op.id+i)%len(pcTags)], T: base + int64(i), V: float64(op.id) + float64(i)/4096, Q: model.Quality(i % 3)})
	}
	return op
}

var pcTextTags = []string{"pc.state", "pc.batch"}

// newTextOp is newOp for text: values of up to the maximum length.
func (s *pcState) newTextOp(rnd *rand.Rand, kind string, n int) *pcOp {
	op := s.newOp(rnd, kind, n)
	for _, p := range op.pts {
		x := fmt.Sprintf("op %d %s", op.id, strings.Repeat("é", rnd.IntN(model.MaxTextLen/2-8)))
		op.tpts = append(op.tpts, model.TextPoint{Tag: pcTextTags[p.T%int64(len(pcTextTags))], T: p.T, Text: x, Q: p.Q})
	}
	op.pts = nil
	return op
}

func (s *pcState) ack(op *pcOp) {
	s.mu.Lock()
	op.acked = true
	s.mu.Unlock()
}

func powerCutOptions(fs vfs.FS) Options {
	o := quietOptions(nil)
	o.FS = fs
	o.Durability = DurabilityFsync
	o.HeadMaxSamples = 400
	o.BulkPoints = 250
	o.MaxRunsPerPart = 3
	return o
}

func TestPowerCut(t *testing.T) {
	rounds := 120
	if testing.Short() {
		rounds = 30
	}
	if v := os.Getenv("PITH_POWERCUT_ROUNDS"); v != "" {
		fmt.Sscan(v, &rounds)
	}
	const perCampaign = 8
	var padded uint64
	for c := 0; c*perCampaign < rounds; c++ {
		seed := uint64(c + 1)
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			padded += powerCutCampaign(t, seed, min(perCampaign, rounds-c*perCampaign))
		})
	}
	t.Logf("%d bytes of WAL padding appended", padded)
	if !t.Failed() && padded == 0 {
		t.Error("no WAL round was padded: the test does not exercise padding")
	}
}

// powerCutCampaign runs rounds of random work on one data directory, each
// ended by a power cut, and checks the store after every recovery. It
// returns the bytes of WAL padding appended.
func powerCutCampaign(t *testing.T, seed uint64, rounds int) (padded uint64) {
	rnd := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	const dir = "/data"
	fs := vfs.NewFaultFS()
	st := &pcState{}
	var inOpen, inWork, atEnd int
	for round := 0; round < rounds; round++ {
		copts := vfs.CrashOptions{}
		switch rnd.IntN(3) {
		case 1:
			copts.Rand = rand.New(rand.NewPCG(seed, uint64(round)))
		case 2:
			copts.Rand = rand.New(rand.NewPCG(seed, uint64(round)))
			copts.ZeroTail = true
		}
		// Most cuts land in the work; some in the recovery itself.
		at := int64(1 + rnd.IntN(600))
		if rnd.IntN(6) == 0 {
			at = int64(1 + rnd.IntN(40))
		}
		cfs := &crashFS{fs: fs, at: at, opts: copts}
		db, err := Open(dir, powerCutOptions(cfs))
		if err != nil {
			if !cfs.crashed.Load() {
				t.Fatalf("round %d: recovery failed without a power cut: %v", round, err)
			}
			inOpen++
			fs = cfs.crash()
			continue
		}
		if !cfs.crashed.Load() {
			pcCheck(t, db, st, round)
		}
		pcWork(rnd, db, st, cfs)
		padded += db.wal.Stats().PadBytes
		if cfs.crashed.Load() {
			inWork++
		} else {
			atEnd++
		}
		fs = cfs.crash()
		db.Close() // every call fails now: the process is gone
	}
	// A last recovery with no cut, and a clean close and reopen.
	db, err := Open(dir, powerCutOptions(fs))
	if err != nil {
		t.Fatalf("final recovery: %v", err)
	}
	pcCheck(t, db, st, rounds)
	if err := db.Close(); err != nil {
		t.Fatalf("close after recovery: %v", err)
	}
	db, err = Open(dir, powerCutOptions(fs))
	if err != nil {
		t.Fatalf("reopen after clean close: %v", err)
	}
	pcCheck(t, db, st, rounds+1)
	db.Close()
	acked := 0
	for _, op := range st.ops {
		if op.acked {
			acked++
		}
	}
	t.Logf("%d writes, %d acknowledged; power cut in recovery %d, in work %d, after work %d", len(st.ops), acked, inOpen, inWork, atEnd)
	return padded
}

// pcWork writes until the power is cut (or a fixed amount of work is
// done): a background writer of small batches and a foreground mix of
// small writes, bulk transactions, rollbacks and flushes.
func pcWork(rnd *rand.Rand, db *DB, st *pcState, cfs *crashFS) {
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Add(1)
	bgSeed := rnd.Uint64()
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(bgSeed, 1))
		for i := 0; i < 40 && !cfs.crashed.Load(); i++ {
			op := st.newOp(r, "bg-write", 1+r.IntN(60))
			if db.Write(ctx, op.pts) == nil {
				st.ack(op)
			}
		}
	}()
	for i := 0; i < 40 && !cfs.crashed.Load(); i++ {
		if rnd.IntN(4) == 0 {
			// Text: a small write, or a transaction large enough to be
			// a bulk load, mixed with numbers.
			if rnd.IntN(2) == 0 {
				op := st.newTextOp(rnd, "text", 1+rnd.IntN(40))
				if db.WriteText(ctx, op.tpts) == nil {
					st.ack(op)
				}
				continue
			}
			op := st.newTextOp(rnd, "text-bulk", 260+rnd.IntN(400))
			tx := db.Begin()
			pts, err := op.tpts, error(nil)
			for len(pts) > 0 && err == nil {
				n := 1 + rnd.IntN(len(pts))
				err = tx.AddText(pts[:n])
				pts = pts[n:]
			}
			if err != nil {
				tx.Rollback()
			} else if tx.Commit(ctx) == nil {
				st.ack(op)
			}
			continue
		}
		switch k := rnd.IntN(10); {
		case k < 4:
			op := st.newOp(rnd, "write", 1+rnd.IntN(200))
			if db.Write(ctx, op.pts) == nil {
				st.ack(op)
			}
		case k < 7:
			op := st.newOp(rnd, "bulk", 260+rnd.IntN(1500))
			tx := db.Begin()
			pts, err := op.pts, error(nil)
			for len(pts) > 0 && err == nil {
				n := 1 + rnd.IntN(len(pts))
				err = tx.Add(pts[:n])
				pts = pts[n:]
			}
			if err != nil {
				tx.Rollback()
			} else if tx.Commit(ctx) == nil {
				st.ack(op)
			}
		case k < 8:
			op := st.newOp(rnd, "rollback", 1+rnd.IntN(600))
			tx := db.Begin()
			tx.Add(op.pts)
			tx.Rollback()
		default:
			db.Flush()
		}
	}
	wg.Wait()
}

// pcCheck verifies a recovered store: every acknowledged op is whole, every
// other op is whole or absent (and stays as the last recovery found it),
// nothing else is stored, and aggregates and Latest agree with that.
func pcCheck(t *testing.T, db *DB, st *pcState, round int) {
	t.Helper()
	stored := make(map[string]map[int64]model.Sample)
	lo, hi := pcDays[0]*partitionMs, (pcDays[len(pcDays)-1]+1)*partitionMs
	for _, tag := range pcTags {
		got, err := db.Raw(tag, lo, hi, 0)
		if errors.Is(err, ErrUnknownTag) {
			continue
		}
		if err != nil {
			t.Fatalf("round %d: raw %s: %v", round, tag, err)
		}
		m := make(map[int64]model.Sample, len(got))
		for i, s := range got {
			if i > 0 && s.T <= got[i-1].T {
				t.Fatalf("round %d: raw %s out of order at %d", round, tag, i)
			}
			m[s.T] = s
		}
		stored[tag] = m
	}
	texts := make(map[string]map[int64]model.TextSample)
	for _, tag := range pcTextTags {
		got, err := db.RawText(tag, lo, hi, 0)
		if errors.Is(err, ErrUnknownTag) {
			continue
		}
		if err != nil {
			t.Fatalf("round %d: raw text %s: %v", round, tag, err)
		}
		m := make(map[int64]model.TextSample, len(got))
		for _, s := range got {
			m[s.T] = s
		}
		texts[tag] = m
		if len(got) > 0 {
			l, err := db.Latest(tag)
			if err != nil || l[0].Text != got[len(got)-1].Text || l[0].T != got[len(got)-1].T {
				t.Fatalf("round %d: latest %s: %+v, %v; want %+v", round, tag, l, err, got[len(got)-1])
			}
		}
	}
	want := naive{}
	total := 0
	for _, op := range st.ops {
		present := 0
		for _, p := range op.tpts {
			s, ok := texts[p.Tag][p.T]
			if !ok {
				continue
			}
			if s.Text != p.Text || s.Q != p.Q {
				t.Fatalf("round %d: text op %d point %s@%d: stored %+v, wrote %+v", round, op.id, p.Tag, p.T, s, p)
			}
			present++
			delete(texts[p.Tag], p.T)
		}
		if len(op.tpts) > 0 {
			switch {
			case present == len(op.tpts):
				if op.state == opAbsent {
					t.Fatalf("round %d: text op %d came back", round, op.id)
				}
				op.state = opPresent
			case present == 0 && !op.acked:
				if op.state == opPresent {
					t.Fatalf("round %d: text op %d was present and is gone", round, op.id)
				}
				op.state = opAbsent
			case present == 0:
				t.Fatalf("round %d: acknowledged text op %d (%s, %d points) is lost", round, op.id, op.kind, len(op.tpts))
			default:
				t.Fatalf("round %d: text op %d (%s, acked %v) is half there: %d of %d points", round, op.id, op.kind, op.acked, present, len(op.tpts))
			}
			continue
		}
		for _, p := range op.pts {
			s, ok := stored[p.Tag][p.T]
			if !ok {
				continue
			}
			if s.V != p.V || s.Q != p.Q {
				t.Fatalf("round %d: op %d (%s) point %s@%d: stored %+v, wrote %+v", round, op.id, op.kind, p.Tag, p.T, s, p)
			}
			present++
		}
		switch {
		case present == len(op.pts):
			if op.kind == "rollback" {
				t.Fatalf("round %d: rolled back op %d is stored", round, op.id)
			}
			if op.state == opAbsent {
				t.Fatalf("round %d: op %d (%s, %d points) was absent after an earlier recovery and came back", round, op.id, op.kind, len(op.pts))
			}
			op.state = opPresent
			want.write(op.pts)
			total += len(op.pts)
		case present == 0 && !op.acked:
			if op.state == opPresent {
				t.Fatalf("round %d: op %d (%s, %d points) was present after an earlier recovery and is gone", round, op.id, op.kind, len(op.pts))
			}
			op.state = opAbsent
		case present == 0:
			t.Fatalf("round %d: acknowledged op %d (%s, %d points) is lost", round, op.id, op.kind, len(op.pts))
		default:
			t.Fatalf("round %d: op %d (%s, acked %v) is half there: %d of %d points", round, op.id, op.kind, op.acked, present, len(op.pts))
		}
	}
	for tag, m := range texts {
		if len(m) > 0 {
			t.Fatalf("round %d: %d text values of %s that no op wrote", round, len(m), tag)
		}
	}
	n := 0
	for _, m := range stored {
		n += len(m)
	}
	if n != total {
		t.Fatalf("round %d: %d samples stored, but the present ops hold %d", round, n, total)
	}
	for _, tag := range pcTags {
		s := want.sorted(tag)
		if len(s) == 0 {
			continue
		}
		l, err := db.Latest(tag)
		if err != nil {
			t.Fatalf("round %d: latest %s: %v", round, tag, err)
		}
		if l[0].Sample != s[len(s)-1] {
			t.Fatalf("round %d: latest %s: got %+v want %+v", round, tag, l[0].Sample, s[len(s)-1])
		}
		for _, n := range []int{1, 3, 97} {
			for _, agg := range []model.Agg{model.AggCount, model.AggSum, model.AggMin, model.AggLast} {
				got, err := db.Aggregate(tag, lo, hi, n, agg)
				if err != nil {
					t.Fatal(err)
				}
				w := want.aggregate(tag, lo, hi, n, agg)
				for i := range w {
					if got[i].OK != w[i].OK || (w[i].OK && !close1(got[i].V, w[i].V)) {
						t.Fatalf("round %d: %s %s n=%d bucket %d: got %+v want %+v", round, tag, agg, n, i, got[i], w[i])
					}
				}
			}
		}
	}
}

// TestFsyncFailure makes one fsync fail at a random point (the data dirty
// at that moment is then never durable, as on Linux after a writeback
// error), lets the work go on, then cuts the power. A write acknowledged
// after the failure would be a write whose bytes may be gone: every
// acknowledged op must survive, and none may be half there.
func TestFsyncFailure(t *testing.T) {
	campaigns := 20
	if testing.Short() {
		campaigns = 5
	}
	for c := 0; c < campaigns; c++ {
		seed := uint64(1000 + c)
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 3))
			fs := vfs.NewFaultFS()
			st := &pcState{}
			// A clean round first, so the failure can also hit flushes
			// and merges of existing data.
			db, err := Open("/data", powerCutOptions(fs))
			if err != nil {
				t.Fatal(err)
			}
			pcWork(rnd, db, st, &crashFS{fs: fs, at: -1})
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			cfs := &crashFS{fs: fs, at: -1}
			db, err = Open("/data", powerCutOptions(cfs))
			if err != nil {
				t.Fatal(err)
			}
			fs.FailSync(rnd.IntN(80), errors.New("injected EIO"))
			pcWork(rnd, db, st, cfs)
			after := cfs.crash()
			db.Close()
			db, err = Open("/data", powerCutOptions(after))
			if err != nil {
				t.Fatalf("recovery after a failed fsync: %v", err)
			}
			defer db.Close()
			pcCheck(t, db, st, 1)
			failed := 0
			for _, op := range st.ops {
				if !op.acked && op.kind != "rollback" {
					failed++
				}
			}
			t.Logf("%d ops, %d not acknowledged", len(st.ops), failed)
		})
	}
}
