package tag

import (
	"context"
	"errors"
	"fmt"

	"github.com/pith-historian/pith/internal/model"
)

// TextSink is an archive that stores text values: the Sink of a table
// whose WriteText is used implements it too. WriteText has Sink.Write's
// contract: it returns once all of pts are durable, or stores none of
// them and says why (a *model.PointError naming a refused point, such as
// text for a tag that holds numbers). It must not keep pts.
type TextSink interface {
	WriteMixed(ctx context.Context, pts []model.Point, texts []model.TextPoint) error
}

// WriteText is the road of text values (states, batch ids, operator
// names, string fields of pushed data, and the strings of acquisition
// drivers): like Write, the caller waits until its points are durable,
// and a batch is stored entirely or not at all, then applied to the
// table (current values, changes marked IsText for subscribers).
//
// Text takes this one road whatever its source: there is no archive
// queue or archive policy for text, every value is stored (a repeated
// state costs almost nothing in the store's text chunks). A tag holds
// numbers or text: the store refuses the other kind with a PointError.
func (t *Table) WriteText(ctx context.Context, pts []model.TextPoint, source string) error {
	return t.WriteMixed(ctx, nil, pts, source)
}

// WriteMixed is Write for a batch of numbers and text stored together,
// atomically (a line-protocol request with string fields): all of it is
// stored and applied, or none. A PointError's Index counts the numbers
// first, then the text.
func (t *Table) WriteMixed(ctx context.Context, pts []model.Point, texts []model.TextPoint, source string) error {
	if len(texts) == 0 {
		return t.Write(ctx, pts, source)
	}
	ts, ok := t.sink.(TextSink)
	if t.sink == nil || !ok {
		return ErrNoArchive
	}
	ids := idPool.Get().(*[]ID)
	defer idPool.Put(ids)
	var err error
	if *ids, err = t.resolve(pts, (*ids)[:0]); err != nil {
		return err
	}
	if err := t.checkTextNames(texts); err != nil {
		var pe *model.PointError
		if errors.As(err, &pe) {
			pe.Index += len(pts)
		}
		return err
	}
	if err := ts.WriteMixed(ctx, pts, texts); err != nil {
		return err
	}
	if len(pts) > 0 {
		t.applyDurable(pts, *ids, source)
	}
	t.StoredText(texts, source)
	return nil
}

// checkTextNames refuses a batch naming an unknown tag that Define would
// not accept, before anything is stored.
func (t *Table) checkTextNames(pts []model.TextPoint) error {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for i := range pts {
		if _, ok := t.names[pts[i].Tag]; ok {
			continue
		}
		if err := CheckName(pts[i].Tag); err != nil {
			return &model.PointError{Index: i, Tag: pts[i].Tag, Err: fmt.Errorf("%w: %w", ErrBadName, err)}
		}
	}
	return nil
}

// StoredText applies text points that are already durable in the store
// (those of WriteText, and the text of a committed import), as Stored
// does numbers: unknown names are defined with the given source, a point
// older than its tag's current value changes nothing current.
func (t *Table) StoredText(pts []model.TextPoint, source string) {
	if len(pts) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abuf, t.cbuf = t.abuf[:0], t.cbuf[:0]
	for i := range pts {
		p := &pts[i]
		id, ok := t.names[p.Tag]
		if !ok {
			var err error
			if id, err = t.defineLocked(Def{Name: p.Tag, Source: source}); err != nil {
				t.stats.UnknownIDs++
				continue
			}
		}
		e := &t.ents[id]
		if e.seen && p.T < e.cur.T {
			t.stats.Late++
			continue
		}
		changed := !e.has || !e.isText || e.text != p.Text || e.cur.Q != p.Q
		e.cur = model.Sample{T: p.T, Q: p.Q}
		e.text, e.isText = p.Text, true
		e.has, e.seen = true, true
		e.arch, e.archHas = e.cur, true
		if changed {
			t.cbuf = append(t.cbuf, Change{ID: id, Tag: e.def.Name, T: p.T, Q: p.Q, Has: true, Pushed: true, IsText: true, Text: p.Text})
		}
	}
	t.stats.Updates += uint64(len(pts))
	t.stats.Archived += uint64(len(pts))
	t.fanOut()
}
