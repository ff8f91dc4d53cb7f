package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// drained is a context that is already done: Next returns what is durable
// now, or the context's error when nothing is.
func drained() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// item is one delivered unit, compared with the model: a point or a delete.
type item struct {
	del      bool
	tag      string
	t, to    int64
	v        float64
	q        model.Quality
	id       Position // the entry it came in
	idx      int      // its index in the entry
	wantOnce bool
}

func pointItems(pts []model.Point) []item {
	out := make([]item, len(pts))
	for i, p := range pts {
		out[i] = item{tag: p.Tag, t: p.T, v: p.V, q: p.Q}
	}
	return out
}

func same(a, b item) bool {
	return a.del == b.del && a.tag == b.tag && a.t == b.t && a.to == b.to && a.v == b.v && a.q == b.q
}

// modelFollower is a follower under test: what it received, deduplicated
// by entry identity, and how many entries came twice.
type modelFollower struct {
	name     string
	f        *Follower
	got      []item
	seen     map[Position][]item
	dups     int
	lastEnd  Position
	acked    Position
	received bool // received since the last Ack
}

// read takes every durable batch; ack says, per batch, whether to Ack it.
func (m *modelFollower) read(t *testing.T, rnd *rand.Rand, ackAll bool) {
	t.Helper()
	for {
		b, err := m.f.Next(drained(), 1+rnd.IntN(3000))
		if errors.Is(err, context.Canceled) {
			return
		}
		if err != nil {
			t.Fatalf("follower %s: next: %v", m.name, err)
		}
		if len(b.Entries) == 0 || !m.lastEnd.Less(b.End) {
			t.Fatalf("follower %s: batch of %d entries ends at %v, after %v", m.name, len(b.Entries), b.End, m.lastEnd)
		}
		m.lastEnd = b.End
		for _, e := range b.Entries {
			var its []item
			switch e.Kind {
			case EntryPoints:
				its = pointItems(e.Points)
			case EntryDelete:
				its = []item{{del: true, tag: e.Tag, t: e.From, to: e.To}}
			default:
				t.Fatalf("follower %s: entry of kind %d", m.name, e.Kind)
			}
			if prev, ok := m.seen[e.ID]; ok {
				if !reflect.DeepEqual(prev, its) {
					t.Fatalf("follower %s: entry %v delivered again with other contents", m.name, e.ID)
				}
				m.dups++
				continue
			}
			m.seen[e.ID] = its
			m.got = append(m.got, its...)
		}
		m.received = true
		if ackAll || rnd.IntN(2) == 0 {
			if err := m.f.Ack(b.End); err != nil {
				t.Fatalf("follower %s: ack: %v", m.name, err)
			}
			m.acked, m.received = b.End, false
		}
	}
}

func followOptions(fs vfs.FS) Options {
	o := quietOptions(nil)
	o.FS = fs
	o.HeadMaxSamples = 300
	o.BulkPoints = 100
	o.MaxRunsPerPart = 3
	return o
}

// TestFollowMatchesModel runs random writes (late data included), small
// and bulk transactions, rollbacks, deletes, flushes, random Acks and
// close/reopen cycles, and checks that every follower receives every
// committed change, in commit order, each at least once, exactly once when
// it had acknowledged everything before the reopen, and nothing that was
// rolled back.
func TestFollowMatchesModel(t *testing.T) {
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	for seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testFollowModel(t, uint64(seed)) })
	}
}

func testFollowModel(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 7))
	fs := vfs.NewFaultFS()
	const dir = "/data"
	db, err := Open(dir, followOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fols := []*modelFollower{{name: "a"}, {name: "b"}}
	follow := func() {
		for _, m := range fols {
			f, err := db.Follow(m.name, FollowOptions{})
			if err != nil {
				t.Fatal(err)
			}
			m.f = f
			if m.seen == nil {
				m.seen = make(map[Position][]item)
			}
		}
	}
	follow()
	// A follower that never reads keeps every segment in the WAL.
	idle, err := db.Follow("idle", FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	idle.Close()
	var want []item
	stored := naive{}
	tags := []string{"f.a", "f.b", "f.c"}
	next := 0 // makes every point unique
	points := func(n int) []model.Point {
		pts := make([]model.Point, n)
		for i := range pts {
			next++
			day := int64(19700 + rnd.IntN(3)) // late data lands in older days
			pts[i] = model.Point{Tag: tags[rnd.IntN(len(tags))], T: day*partitionMs + int64(next)*10, V: float64(next) / 8, Q: model.Quality(next % 3)}
		}
		return pts
	}
	for step := 0; step < 150; step++ {
		switch k := rnd.IntN(20); {
		case k < 7:
			pts := points(1 + rnd.IntN(80))
			if err := db.Write(ctx, pts); err != nil {
				t.Fatal(err)
			}
			want = append(want, pointItems(pts)...)
			stored.write(pts)
		case k < 10:
			pts := points(101 + rnd.IntN(900))
			tx := db.Begin()
			for rest := pts; len(rest) > 0; {
				n := 1 + rnd.IntN(len(rest))
				if err := tx.Add(rest[:n]); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			want = append(want, pointItems(pts)...)
			stored.write(pts)
		case k < 12:
			tx := db.Begin()
			if err := tx.Add(points(1 + rnd.IntN(400))); err != nil {
				t.Fatal(err)
			}
			tx.Rollback()
		case k < 13:
			tag := tags[rnd.IntN(len(tags))]
			if !db.HasTag(tag) {
				continue
			}
			from := int64(19700+rnd.IntN(3))*partitionMs + int64(rnd.IntN(next+1))*10
			to := from + int64(1+rnd.IntN(2000))
			if _, err := db.Delete(ctx, tag, from, to); err != nil {
				t.Fatal(err)
			}
			want = append(want, item{del: true, tag: tag, t: from, to: to})
			for ts := range stored[tag] {
				if ts >= from && ts < to {
					delete(stored[tag], ts)
				}
			}
		case k < 14:
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		case k < 18:
			m := fols[rnd.IntN(len(fols))]
			m.read(t, rnd, false)
		default:
			// Close and reopen; sometimes a follower acknowledged all it
			// received first and must then receive nothing twice.
			exact := make([]bool, len(fols))
			for i, m := range fols {
				if rnd.IntN(2) == 0 {
					m.read(t, rnd, true)
					exact[i] = !m.received
				}
				m.f.Close()
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = Open(dir, followOptions(fs)); err != nil {
				t.Fatal(err)
			}
			// Segments kept for the followers are not replayed again:
			// deleted samples stay deleted.
			checkStored(t, db, stored, tags)
			follow()
			for i, m := range fols {
				dups := m.dups
				m.lastEnd = m.acked
				m.read(t, rnd, false)
				if exact[i] && m.dups != dups {
					t.Fatalf("step %d: follower %s acknowledged everything before the reopen but received %d entries twice", step, m.name, m.dups-dups)
				}
			}
		}
	}
	for _, m := range fols {
		m.read(t, rnd, false)
		if len(m.got) != len(want) {
			t.Fatalf("follower %s: received %d items, want %d", m.name, len(m.got), len(want))
		}
		for i := range want {
			if !same(m.got[i], want[i]) {
				t.Fatalf("follower %s: item %d is %+v, want %+v", m.name, i, m.got[i], want[i])
			}
		}
		t.Logf("follower %s: %d items, %d entries received twice", m.name, len(m.got), m.dups)
	}
	st := db.Followers()
	if len(st) != 3 || st[0].Name != "a" || st[1].Name != "b" || !st[0].Open || st[2].Open || st[2].LagRecords == 0 {
		t.Fatalf("followers: %+v", st)
	}
	db.Close()
}

// checkStored compares the raw samples of tags with the model.
func checkStored(t *testing.T, db *DB, want naive, tags []string) {
	t.Helper()
	for _, tag := range tags {
		got, err := db.Raw(tag, 19700*partitionMs, 19703*partitionMs, 0)
		if errors.Is(err, ErrUnknownTag) {
			got, err = nil, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		w := want.sorted(tag)
		if len(got) != len(w) {
			t.Fatalf("%s: %d samples stored, want %d", tag, len(got), len(w))
		}
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("%s: sample %d is %+v, want %+v", tag, i, got[i], w[i])
			}
		}
	}
}

// TestFollowStart checks where a new follower starts, and that names are
// file names.
func TestFollowStart(t *testing.T) {
	db, err := Open("/data", followOptions(vfs.NewFaultFS()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pts := []model.Point{{Tag: "s.a", T: 1, V: 1}, {Tag: "s.a", T: 2, V: 2}}
	if err := db.Write(context.Background(), pts); err != nil {
		t.Fatal(err)
	}
	end, err := db.Follow("end", FollowOptions{Start: FollowFromEnd})
	if err != nil {
		t.Fatal(err)
	}
	oldest, err := db.Follow("oldest", FollowOptions{Start: FollowFromOldest})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := end.Next(drained(), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("a follower from the end got earlier writes: %v", err)
	}
	b, err := oldest.Next(drained(), 0)
	if err != nil || b.Points != 2 || !reflect.DeepEqual(b.Entries[0].Points, pts) {
		t.Fatalf("a follower from the oldest record: %+v, %v", b, err)
	}
	if _, err := db.Follow("end", FollowOptions{}); !errors.Is(err, ErrFollowerOpen) {
		t.Fatalf("second Follow of an open follower: %v", err)
	}
	if err := oldest.Ack(Position{Segment: b.End.Segment, Offset: b.End.Offset + 1}); err == nil {
		t.Fatal("ack of a position no batch ended at was accepted")
	}
	for _, name := range []string{"", "../x", "a/b", ".hidden", string(make([]byte, 65))} {
		if _, err := db.Follow(name, FollowOptions{}); err == nil {
			t.Fatalf("follower name %q accepted", name)
		}
	}
}

// TestFollowDurableOnly writes in relaxed mode, where a write is
// acknowledged before its fsync: a follower must not see it until the
// fsync (here, the one of the segment cut by a flush).
func TestFollowDurableOnly(t *testing.T) {
	opts := followOptions(vfs.NewFaultFS())
	opts.Durability = DurabilityRelaxed
	opts.CommitInterval = time.Hour
	db, err := Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := db.Follow("f", FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pts := []model.Point{{Tag: "d.a", T: 1, V: 1}}
	if err := db.Write(context.Background(), pts); err != nil {
		t.Fatal(err)
	}
	if b, err := f.Next(drained(), 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("a record not yet fsynced was delivered: %+v, %v", b, err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	b, err := f.Next(drained(), 0)
	if err != nil || !reflect.DeepEqual(b.Entries[0].Points, pts) {
		t.Fatalf("after the fsync: %+v, %v", b, err)
	}
}

// TestFollowToken keeps the token of AckToken with the cursor across a
// restart; a plain Ack keeps the token it had.
func TestFollowToken(t *testing.T) {
	fs := vfs.NewFaultFS()
	db, err := Open("/data", followOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	f, err := db.Follow("up", FollowOptions{Start: FollowFromOldest})
	if err != nil {
		t.Fatal(err)
	}
	if f.Token() != 0 {
		t.Fatalf("a new follower's token: %d", f.Token())
	}
	next := func(tm int64) Batch {
		t.Helper()
		if err := db.Write(context.Background(), []model.Point{{Tag: "s.a", T: tm, V: 1}}); err != nil {
			t.Fatal(err)
		}
		b, err := f.Next(drained(), 0)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := f.AckToken(next(1).End, 41); err != nil {
		t.Fatal(err)
	}
	if err := f.Ack(next(2).End); err != nil {
		t.Fatal(err)
	}
	if f.Token() != 41 {
		t.Fatalf("token after a plain Ack: %d, want 41", f.Token())
	}
	b := next(3)
	if err := f.AckToken(b.End, 42); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open("/data", followOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err = db.Follow("up", FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Token() != 42 {
		t.Fatalf("token after a restart: %d, want 42", f.Token())
	}
}
