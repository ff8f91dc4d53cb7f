package store

import (
	"context"
	"log/slog"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// TestTagsGeneration checks that TagsGeneration moves exactly when what
// Tags lists changes: a tag's first sample, new labels, deleting a tag's
// last samples; and not for more samples of a listed tag.
func TestTagsGeneration(t *testing.T) {
	opts := DefaultOptions()
	opts.Logger = slog.New(slog.DiscardHandler)
	db, err := Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	g := db.TagsGeneration()
	step := func(what string, moves bool, f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		n := db.TagsGeneration()
		if (n != g) != moves {
			t.Errorf("%s: generation %d -> %d, want moved=%v", what, g, n, moves)
		}
		g = n
	}
	step("first sample", true, func() error { return db.Write(ctx, []model.Point{{Tag: "a", T: 1000, V: 1}}) })
	step("more samples", false, func() error { return db.Write(ctx, []model.Point{{Tag: "a", T: 2000, V: 2}}) })
	step("labels", true, func() error {
		return db.SetLabels(ctx, []model.Series{{Tag: "a", Labels: model.LabelsFrom("_measurement", "m")}})
	})
	step("same labels", false, func() error {
		return db.SetLabels(ctx, []model.Series{{Tag: "a", Labels: model.LabelsFrom("_measurement", "m")}})
	})
	step("delete some", false, func() error { _, err := db.Delete(ctx, "a", 0, 1500); return err })
	step("delete the rest", true, func() error { _, err := db.Delete(ctx, "a", 0, 3000); return err })
}
