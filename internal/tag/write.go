package tag

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/pith-historian/pith/internal/model"
)

// ErrBadName is wrapped by Write, in a *model.PointError naming the point,
// for a tag name CheckName refuses; the push inputs answer it as any
// refused point (400 naming the line).
var ErrBadName = errors.New("bad tag name")

// Write is the road of a pushed value (line protocol, emoncms, MQTT,
// remote_write, event counts): the caller waits until its points are
// durable, and a request is stored entirely or not at all.
//
// Write checks the names first (unknown ones are defined with the given
// source once stored), hands the whole batch to the archive's Sink.Write,
// and only when that succeeded applies the points as Stored does: current
// values and changes for subscribers (live view, alarms, calculated tags,
// Modbus server). Forwarders read what is stored from the store's log.
// On error nothing of the batch is stored or applied.
//
// Unlike Update, no archive policy applies: every pushed point is stored,
// as its sender asked. A pushed value and an acquired value of the same tag
// and timestamp take different queues to the store; the later write wins
// there, as for any repeated timestamp.
func (t *Table) Write(ctx context.Context, pts []model.Point, source string) error {
	if t.sink == nil {
		return ErrNoArchive
	}
	if len(pts) == 0 {
		return nil
	}
	ids := idPool.Get().(*[]ID)
	defer idPool.Put(ids)
	var err error
	if *ids, err = t.resolve(pts, (*ids)[:0]); err != nil {
		return err
	}
	if err := t.sink.Write(ctx, pts); err != nil {
		return err
	}
	t.applyDurable(pts, *ids, source)
	return nil
}

// noID marks a point whose tag the table does not know yet.
const noID = ^ID(0)

// idPool recycles the per-request ID slices of Write.
var idPool = sync.Pool{New: func() any { return new([]ID) }}

// resolve appends the ID of every point's tag to ids (noID for a name the
// table does not know yet), refusing a batch naming an unknown tag that
// Define would not accept, before anything is stored.
func (t *Table) resolve(pts []model.Point, ids []ID) ([]ID, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	last, lastID := "", noID
	for i := range pts {
		name := pts[i].Tag
		if name != last || i == 0 {
			id, ok := t.names[name]
			if !ok {
				if err := CheckName(name); err != nil {
					return ids, &model.PointError{Index: i, Tag: name, Err: fmt.Errorf("%w: %w", ErrBadName, err)}
				}
				id = noID
			}
			last, lastID = name, id
		}
		ids = append(ids, lastID)
	}
	return ids, nil
}

// Stored applies points that are already durable in the store: the points
// of Write, and the points of a committed import. Unknown names are defined
// with the given source (a name CheckName refuses is skipped: the store
// keeps it, the table cannot show it). A point newer than its tag's current
// value becomes current; an older one is late and changes nothing current.
// The changes reach the subscribers in the order given.
func (t *Table) Stored(pts []model.Point, source string) {
	if len(pts) == 0 {
		return
	}
	t.applyDurable(pts, nil, source)
}

// applyDurable applies durable points, with their IDs when resolve found them
// (ids nil: every name is looked up).
func (t *Table) applyDurable(pts []model.Point, ids []ID, source string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abuf, t.cbuf = t.abuf[:0], t.cbuf[:0]
	lastName, lastID, lastOK := "", ID(0), false
	for i := range pts {
		p := &pts[i]
		if ids != nil && ids[i] != noID {
			t.applyStored(ids[i], p)
			continue
		}
		if p.Tag != lastName || !lastOK {
			lastName = p.Tag
			lastID, lastOK = t.names[p.Tag]
			if !lastOK {
				id, err := t.defineLocked(Def{Name: p.Tag, Source: source})
				if err != nil {
					t.stats.UnknownIDs++
					continue
				}
				lastID, lastOK = id, true
			}
		}
		t.applyStored(lastID, p)
	}
	t.stats.Updates += uint64(len(pts))
	t.stats.Archived += uint64(len(pts))
	t.fanOut()
}

// applyStored applies one durable point; t.mu is held.
func (t *Table) applyStored(id ID, p *model.Point) {
	e := &t.ents[id]
	if e.isText {
		t.stats.WrongKind++ // the store refused it too, unless it raced the first text
		return
	}
	if e.seen && p.T < e.cur.T {
		t.stats.Late++
		return
	}
	changed := !e.has || e.cur.V != p.V || e.cur.Q != p.Q
	e.cur = model.Sample{T: p.T, V: p.V, Q: p.Q}
	e.has, e.seen = true, true
	// What is stored is the policies' new reference.
	e.arch, e.archHas = e.cur, true
	if changed {
		t.cbuf = append(t.cbuf, Change{ID: id, Tag: e.def.Name, T: p.T, V: p.V, Q: p.Q, Has: true, Pushed: true})
	}
}
