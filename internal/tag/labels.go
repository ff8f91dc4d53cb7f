package tag

import (
	"context"
	"fmt"

	"github.com/pith-historian/pith/internal/model"
)

// LabelSink is the archive side of tag labels. A Sink that implements it
// keeps labels durably (the archive queue hands them to the store, which
// keeps them with its series); with any other Sink labels live in the
// table only.
type LabelSink interface {
	// SetLabels makes each series' labels durable. It is called without
	// the table's lock, from many goroutines at once, and must not keep
	// series.
	SetLabels(ctx context.Context, series []model.Series) error
}

// Label gives tags their labels, the key/value pairs a push input received
// them with. Series whose labels the table already holds cost a read lock;
// the others are checked (name and labels, refused whole with a
// *model.PointError naming the first bad one), made durable through the
// Sink when it is a LabelSink, and then set on the definitions. A tag the
// table does not define yet is not defined here: its labels wait until its
// first stored value defines it (Write, Stored), so a write refused after
// its labels leaves no empty tag behind. Push inputs call Label before
// Write, so a point is never acknowledged without its tag's labels.
//
// Label keeps the Labels slices it is given (the store and the table share
// one copy): callers hand over fresh slices and never modify them after.
//
// When two label sets name the same tag (line protocol's `m,a=x f=1` and
// `m,b=x f=1`), the tag keeps the last one given.
func (t *Table) Label(ctx context.Context, series []model.Series) error {
	var set func(context.Context, []model.Series) error
	if ls, ok := t.sink.(LabelSink); ok {
		set = ls.SetLabels
	}
	return t.LabelVia(ctx, series, set)
}

// LabelVia is Label making the labels durable with set instead of the
// Sink (nil: in the table only): a redundant pair's mirror stores the
// other box's labels as replicas.
func (t *Table) LabelVia(ctx context.Context, series []model.Series, set func(context.Context, []model.Series) error) error {
	changed, err := t.changedLabels(series)
	if err != nil || len(changed) == 0 {
		return err
	}
	if set != nil {
		if err := set(ctx, changed); err != nil {
			return err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, x := range changed {
		if id, ok := t.names[x.Tag]; ok {
			t.ents[id].def.Labels = x.Labels
			continue
		}
		if len(t.waiting) >= maxWaitingLabels {
			// Labels of writes that never came: start over rather than grow.
			clear(t.waiting)
		}
		if t.waiting == nil {
			t.waiting = make(map[string]model.Labels)
		}
		t.waiting[x.Tag] = x.Labels
	}
	return nil
}

// maxWaitingLabels bounds the labels kept for tags not defined yet.
const maxWaitingLabels = 1 << 16

// takeWaitingLabels returns and forgets the labels waiting for name; t.mu
// is held for writing.
func (t *Table) takeWaitingLabels(name string) model.Labels {
	ls, ok := t.waiting[name]
	if ok {
		delete(t.waiting, name)
	}
	return ls
}

// changedLabels returns the series whose labels differ from the table's,
// refusing a bad name or label set.
func (t *Table) changedLabels(series []model.Series) ([]model.Series, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var changed []model.Series
	for i, x := range series {
		if id, ok := t.names[x.Tag]; ok {
			if t.ents[id].def.Labels.Equal(x.Labels) {
				continue
			}
		} else if ls, ok := t.waiting[x.Tag]; ok && ls.Equal(x.Labels) {
			continue
		} else if err := CheckName(x.Tag); err != nil {
			return nil, &model.PointError{Index: i, Tag: x.Tag, Err: fmt.Errorf("%w: %w", ErrBadName, err)}
		}
		if err := x.Labels.Check(); err != nil {
			return nil, &model.PointError{Index: i, Tag: x.Tag, Err: err}
		}
		changed = append(changed, x)
	}
	return changed, nil
}
