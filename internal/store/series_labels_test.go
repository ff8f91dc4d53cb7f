package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// TestLabelsKept checks that labels survive every way a store is reopened:
// from the WAL alone (a crash before any flush), from the series file
// after a flush and a clean close, and through a backup and its restore.
func TestLabelsKept(t *testing.T) {
	ctx := context.Background()
	up := model.LabelsFrom("__name__", "up", "instance", "127.0.0.1:18997", "job", "pith")
	lp := model.LabelsFrom("_measurement", "cpu", "_field", "usage_idle", "host", "pi3")
	want := map[string]model.Labels{"up.127_0_0_1:18997.pith": up, "cpu.pi3.usage_idle": lp}
	check := func(t *testing.T, db *DB, when string) {
		t.Helper()
		for tag, w := range want {
			got, ok := db.Labels(tag)
			if !ok || !got.Equal(w) {
				t.Errorf("%s: labels of %s = %v, %v; want %v", when, tag, got, ok, w)
			}
		}
		n := 0
		for _, ti := range db.Tags() {
			if w, ok := want[ti.Name]; ok {
				n++
				if !ti.Labels.Equal(w) {
					t.Errorf("%s: Tags() labels of %s = %v; want %v", when, ti.Name, ti.Labels, w)
				}
			}
		}
		if n != len(want) {
			t.Errorf("%s: Tags() lists %d labelled tags, want %d", when, n, len(want))
		}
	}

	dir := t.TempDir()
	db, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	var series []model.Series
	var pts []model.Point
	for tag, ls := range want {
		series = append(series, model.Series{Tag: tag, Labels: ls})
		pts = append(pts, model.Point{Tag: tag, T: 1000, V: 1})
	}
	if err := db.SetLabels(ctx, series); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, pts); err != nil {
		t.Fatal(err)
	}
	check(t, db, "open")
	// A crash: a copy of the directory taken while the store is open,
	// where the WAL is all there is.
	crashed := filepath.Join(t.TempDir(), "crashed")
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(crashed, testOptions()); err != nil {
		t.Fatal(err)
	}
	check(t, db, "after WAL replay")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, testOptions()); err != nil {
		t.Fatal(err)
	}
	check(t, db, "after close")
	dest := filepath.Join(t.TempDir(), "b")
	if _, err := db.Backup(ctx, dest); err != nil {
		t.Fatal(err)
	}
	db.Close()
	restored := filepath.Join(t.TempDir(), "r")
	if _, err := Restore(dest, restored, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(restored, testOptions()); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	check(t, db, "after restore")
}

// TestSetLabels checks changes, removal and refusals.
func TestSetLabels(t *testing.T) {
	ctx := context.Background()
	db, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a := model.LabelsFrom("k", "1")
	if err := db.SetLabels(ctx, []model.Series{{Tag: "x", Labels: a}}); err != nil {
		t.Fatal(err)
	}
	wal := db.Stats().WALBytes.Load()
	// The same labels again write nothing.
	if err := db.SetLabels(ctx, []model.Series{{Tag: "x", Labels: a}}); err != nil {
		t.Fatal(err)
	}
	if got := db.Stats().WALBytes.Load(); got != wal {
		t.Errorf("unchanged labels wrote %d WAL bytes", got-wal)
	}
	if err := db.SetLabels(ctx, []model.Series{{Tag: "x"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.Labels("x"); got != nil {
		t.Errorf("labels after removal = %v", got)
	}
	bad := model.Labels{{Name: "b", Value: "1"}, {Name: "a", Value: "2"}}
	err = db.SetLabels(ctx, []model.Series{{Tag: "y", Labels: a}, {Tag: "z", Labels: bad}})
	var pe *model.PointError
	if !errors.As(err, &pe) || pe.Tag != "z" || !errors.Is(err, model.ErrLabels) {
		t.Fatalf("unsorted labels: err = %v", err)
	}
	if _, ok := db.Labels("y"); ok {
		t.Error("a refused call kept the labels of another tag")
	}
}

// TestLabelsFollowed checks that followers see label changes.
func TestLabelsFollowed(t *testing.T) {
	ctx := context.Background()
	db, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := db.Follow("t", FollowOptions{Start: FollowFromEnd})
	if err != nil {
		t.Fatal(err)
	}
	ls := model.LabelsFrom("__name__", "up", "job", "pith")
	if err := db.SetLabels(ctx, []model.Series{{Tag: "up.pith", Labels: ls}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, []model.Point{{Tag: "up.pith", T: 1, V: 1}}); err != nil {
		t.Fatal(err)
	}
	b, err := f.Next(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Entries) != 2 || b.Entries[0].Kind != EntryLabels || b.Entries[1].Kind != EntryPoints {
		t.Fatalf("entries = %+v", b.Entries)
	}
	if s := b.Entries[0].Series; len(s) != 1 || s[0].Tag != "up.pith" || !s[0].Labels.Equal(ls) {
		t.Errorf("labels entry = %+v", s)
	}
}
