package archive

import (
	"context"
	"fmt"
	"testing"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
)

// kindStore refuses numbers for the tag "text" as the store does.
type kindStore struct{ fakeStore }

func (k *kindStore) Write(ctx context.Context, pts []model.Point) error {
	for i, p := range pts {
		if p.Tag == "text" {
			return &model.PointError{Index: i, Tag: p.Tag, Err: fmt.Errorf("kind: %w", store.ErrKind)}
		}
	}
	return k.fakeStore.Write(ctx, pts)
}

// TestQueueDropsWrongKind: a queued number for a tag the store holds as
// text can never be written; it is dropped and counted, and the rest of
// its batch is written, instead of the batch being retried for ever.
func TestQueueDropsWrongKind(t *testing.T) {
	ks := &kindStore{fakeStore: *newFakeStore()}
	q := New(ks, nil, DefaultOptions())
	q.Enqueue([]model.Point{{Tag: "a", T: 1}, {Tag: "text", T: 2}, {Tag: "b", T: 3}})
	ks.waitFor(t, 2)
	if err := q.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := q.Stats(); st.WrongKind != 1 || st.Written != 2 {
		t.Fatalf("stats %+v", st)
	}
	if err := q.WriteMixed(context.Background(), nil, []model.TextPoint{{Tag: "t", Text: "x"}}); err != ErrNoText {
		t.Fatalf("a writer without text: %v", err)
	}
}
