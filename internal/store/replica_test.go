package store

import (
	"context"
	"math"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// TestWriteReplica checks that points written by WriteReplica are stored
// like any write (queries see them, a power cut keeps them) and that a
// follower tells them from this Pith's own writes, before and after the
// restart, including a replica larger than BulkPoints (split in records).
func TestWriteReplica(t *testing.T) {
	fs := vfs.NewFaultFS()
	opts := followOptions(fs) // BulkPoints 100
	db, err := Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f0, err := db.Follow("fwd", FollowOptions{Start: FollowFromOldest})
	if err != nil {
		t.Fatal(err)
	}
	f0.Close()
	own := []model.Point{{Tag: "s.own", T: 1, V: 1}}
	var rep []model.Point
	for i := range 250 {
		rep = append(rep, model.Point{Tag: "s.rep", T: int64(i + 1), V: float64(i)})
	}
	if err := db.Write(ctx, own); err != nil {
		t.Fatal(err)
	}
	if err := db.WriteReplica(ctx, rep); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, []model.Point{{Tag: "s.own", T: 2, V: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := db.WriteReplica(ctx, []model.Point{{Tag: "s.rep", T: 1, V: math.NaN()}}); err == nil {
		t.Fatal("a non-finite replica value was accepted")
	}
	check := func(db *DB) {
		t.Helper()
		got, err := db.Raw("s.rep", 0, 1000, -1)
		if err != nil || len(got) != len(rep) {
			t.Fatalf("replica points stored: %d, %v; want %d", len(got), err, len(rep))
		}
		ownN, repN := followReplicaCounts(t, db)
		if ownN != 2 || repN != len(rep) {
			t.Fatalf("follower got %d own and %d replica points, want 2 and %d", ownN, repN, len(rep))
		}
	}
	check(db)
	fs2 := fs.Crash(vfs.CrashOptions{})
	opts.FS = fs2
	db2, err := Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	check(db2)
}

// TestWriteTextReplica: text written by WriteTextReplica is stored (and
// kept by a power cut), and a follower marks it Replica, unlike this
// Pith's own text, before and after the restart.
func TestWriteTextReplica(t *testing.T) {
	fs := vfs.NewFaultFS()
	opts := followOptions(fs)
	db, err := Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f0, err := db.Follow("fwd", FollowOptions{Start: FollowFromOldest})
	if err != nil {
		t.Fatal(err)
	}
	f0.Close()
	var rep []model.TextPoint
	for i := range 150 {
		rep = append(rep, model.TextPoint{Tag: "s.rep", T: int64(i + 1), Text: "run"})
	}
	if err := db.WriteText(ctx, []model.TextPoint{{Tag: "s.own", T: 1, Text: "own"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.WriteTextReplica(ctx, rep); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, []model.Point{{Tag: "s.rep", T: 500, V: 1}}); err == nil {
		t.Fatal("a number for a tag holding mirrored text was accepted")
	}
	check := func(db *DB) {
		t.Helper()
		got, err := db.RawText("s.rep", 0, 1000, -1)
		if err != nil || len(got) != len(rep) {
			t.Fatalf("replica text stored: %d, %v; want %d", len(got), err, len(rep))
		}
		ownN, repN := followReplicaCounts(t, db)
		if ownN != 1 || repN != len(rep) {
			t.Fatalf("follower got %d own and %d replica text values, want 1 and %d", ownN, repN, len(rep))
		}
	}
	check(db)
	opts.FS = fs.Crash(vfs.CrashOptions{})
	db2, err := Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	check(db2)
}

// TestSetLabelsReplica: labels set by SetLabelsReplica are kept (a power
// cut too) and a follower marks their entry Replica, unlike SetLabels'.
func TestSetLabelsReplica(t *testing.T) {
	fs := vfs.NewFaultFS()
	opts := followOptions(fs)
	db, err := Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f0, err := db.Follow("fwd", FollowOptions{Start: FollowFromOldest})
	if err != nil {
		t.Fatal(err)
	}
	f0.Close()
	own := model.Labels{{Name: "room", Value: "hall"}}
	rep := model.Labels{{Name: "room", Value: "cellar"}}
	if err := db.SetLabels(ctx, []model.Series{{Tag: "s.own", Labels: own}}); err != nil {
		t.Fatal(err)
	}
	if err := db.SetLabelsReplica(ctx, []model.Series{{Tag: "s.rep", Labels: rep}}); err != nil {
		t.Fatal(err)
	}
	check := func(db *DB) {
		t.Helper()
		f, err := db.Follow("fwd", FollowOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got := map[string]bool{}
		for {
			b, err := f.Next(drained(), 0)
			if err != nil {
				break
			}
			for _, e := range b.Entries {
				for _, x := range e.Series {
					got[x.Tag] = e.Replica
				}
			}
		}
		if len(got) != 2 || got["s.own"] || !got["s.rep"] {
			t.Fatalf("follower's labels entries (tag: replica) %v, want s.own false and s.rep true", got)
		}
		if err := db.Write(ctx, []model.Point{{Tag: "s.rep", T: 1, V: 1}}); err != nil {
			t.Fatal(err)
		}
		if ls, _ := db.Labels("s.rep"); !ls.Equal(rep) {
			t.Fatalf("labels of s.rep %v, want %v", ls, rep)
		}
	}
	check(db)
	opts.FS = fs.Crash(vfs.CrashOptions{})
	db2, err := Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	check(db2)
}

// followReplicaCounts follows db from the cursor "fwd" to the end and
// counts the values (numbers and text) of its own entries and of its
// replica entries, failing on an entry whose Replica mark does not match
// its tag: s.rep is the mirrored one.
func followReplicaCounts(t *testing.T, db *DB) (own, rep int) {
	t.Helper()
	f, err := db.Follow("fwd", FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for {
		b, err := f.Next(drained(), 0)
		if err != nil {
			return own, rep
		}
		for _, e := range b.Entries {
			tags := make([]string, 0, len(e.Points)+len(e.Texts))
			for _, p := range e.Points {
				tags = append(tags, p.Tag)
			}
			for _, p := range e.Texts {
				tags = append(tags, p.Tag)
			}
			for _, tag := range tags {
				if e.Replica != (tag == "s.rep") {
					t.Fatalf("entry %v Replica=%v holds %s", e.ID, e.Replica, tag)
				}
				if e.Replica {
					rep++
				} else {
					own++
				}
			}
		}
	}
}
