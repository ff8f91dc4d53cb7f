package tag

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/pith-historian/pith/internal/model"
)

// Sink is the archive: the table hands it what is to be stored, by one of
// two roads.
//
// Enqueue takes the samples of Update (acquisition, system tags) that pass
// their archive policies. The table calls it while holding its own lock,
// once per Update batch, so the per-tag order of the hand-off is the order
// in which the table accepted samples. It must never block (the archive
// queue only appends to memory and counts an overflow when its byte bound
// is reached) and must copy pts: the table reuses the slice after Enqueue
// returns. The boolean result reports whether the batch was accepted; the
// table counts refusals.
//
// Write takes the points of Table.Write (push inputs), whose caller waits
// for them: it returns once all of pts are durable, or stores none of them
// and returns why (a *model.PointError naming a refused point, a full
// disk, a closed store). It is called without the table's lock, from many
// goroutines at once, and must not keep pts.
type Sink interface {
	Enqueue(pts []model.Point) bool
	Write(ctx context.Context, pts []model.Point) error
}

// ErrNoArchive is returned by Write on a table without a Sink.
var ErrNoArchive = errors.New("the tag table has no archive")

// Sample is one new value for a defined tag, the unit of Update.
type Sample struct {
	ID ID
	Q  model.Quality
	// Hold keeps the tag's current value and only sets Q and T. A failed
	// poll uses it to mark tags bad without inventing a value; a tag that
	// never had a value only gets its quality and time set.
	Hold bool
	// NoArchive sets the current value (and tells subscribers) without
	// handing the sample to the archive: the system tags are read every
	// second and archived every ten (internal/diag).
	NoArchive bool
	T         int64   // Unix milliseconds
	V         float64 // ignored when Hold is set
}

// Value is the current value of one tag as the API shows it.
type Value struct {
	Tag string
	T   int64 // Unix milliseconds of the newest sample
	V   float64
	Q   model.Quality
	// Has is false for a tag that is defined but never received a value
	// (it may still carry a quality and time, e.g. bad from a dead station).
	Has bool
	// IsText marks a text tag: its value is Text and V is 0.
	IsText bool
	Text   string
}

// Stats are the table's counters since New.
type Stats struct {
	Tags       int    // defined tags
	Updates    uint64 // samples applied
	Changes    uint64 // samples that changed a current value or quality
	Late       uint64 // samples older than the current value (archived, not current)
	Archived   uint64 // samples handed to the archive sink
	Refused    uint64 // samples in batches the archive sink refused (overflow)
	NonFinite  uint64 // NaN/Inf samples turned into a bad-quality hold
	UnknownIDs uint64 // samples naming an ID that was never defined
	WrongKind  uint64 // numbers for a text tag, refused (text goes by WriteText)
}

// Options tunes a Table.
type Options struct {
	// SubscriberQueue is the default bound, in changes, of a Queue-mode
	// subscription's pending list.
	SubscriberQueue int
}

// Default option values.
const (
	defaultSubscriberQueue = 1 << 16 // changes
)

// DefaultOptions returns the options used when a field is zero.
func DefaultOptions() Options {
	return Options{SubscriberQueue: defaultSubscriberQueue}
}

type entry struct {
	def     Def
	cur     model.Sample // newest value
	has     bool         // cur.V is a real value
	seen    bool         // cur.T/cur.Q were set at least once
	arch    model.Sample // last archived sample, for the policies
	archHas bool
	isText  bool   // a text tag (WriteText, StoredText): cur.V is 0
	text    string // the current text of a text tag
}

// Table is the current-value table. All methods are safe for concurrent use.
type Table struct {
	log  *slog.Logger
	opts Options
	sink Sink // may be nil: nothing is archived

	mu    sync.RWMutex
	ents  []entry
	names map[string]ID
	// waiting holds labels given (Label) for tags not defined yet.
	waiting map[string]model.Labels
	subs    []*Subscription // change subscribers, copied on write
	abuf    []model.Point   // archive batch, reused under mu
	cbuf    []Change        // changes of the current batch, reused under mu
	stats   Stats

	// byName lists the IDs of ents[:len(byName)] sorted by name, for
	// Latest of every tag. Tags are only ever added (names never change),
	// so it is extended, not rebuilt, when ents grew. sortMu guards it and
	// is taken with mu held for reading, never the other way round.
	sortMu sync.Mutex
	byName []ID
}

// New returns an empty table handing archived samples to sink (nil for
// none).
func New(log *slog.Logger, opts Options, sink Sink) *Table {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.SubscriberQueue <= 0 {
		opts.SubscriberQueue = defaultSubscriberQueue
	}
	return &Table{log: log, opts: opts, sink: sink, names: make(map[string]ID)}
}

// Define adds a tag, or replaces the metadata and policy of an existing one
// (keeping its current value), and returns its ID.
func (t *Table) Define(d Def) (ID, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.defineLocked(d)
}

// defineLocked is Define with t.mu held.
func (t *Table) defineLocked(d Def) (ID, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	if id, ok := t.names[d.Name]; ok {
		if d.Labels == nil {
			// A definition from the configuration says nothing of the
			// labels the tag was pushed with: they stay.
			d.Labels = t.ents[id].def.Labels
		}
		t.ents[id].def = d
		return id, nil
	}
	if uint64(len(t.ents)) >= math.MaxUint32 {
		return 0, fmt.Errorf("define tag %q: table full", d.Name)
	}
	if d.Labels == nil {
		d.Labels = t.takeWaitingLabels(d.Name)
	}
	id := ID(len(t.ents))
	t.ents = append(t.ents, entry{def: d})
	t.names[d.Name] = id
	return id, nil
}

// Lookup returns the ID of a defined tag.
func (t *Table) Lookup(name string) (ID, bool) {
	t.mu.RLock()
	id, ok := t.names[name]
	t.mu.RUnlock()
	return id, ok
}

// Def returns the definition of a tag.
func (t *Table) Def(id ID) (Def, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if int(id) >= len(t.ents) {
		return Def{}, false
	}
	return t.ents[id].def, true
}

// Defs lists every definition, sorted by name.
func (t *Table) Defs() []Def {
	t.mu.RLock()
	out := make([]Def, len(t.ents))
	for i := range t.ents {
		out[i] = t.ents[i].def
	}
	t.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Latest returns the current values of the named tags in the order given,
// or of every tag sorted by name when none is named. A name the table does
// not know yields an error wrapping ErrUnknownTag that names it.
func (t *Table) Latest(names ...string) ([]Value, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(names) == 0 {
		t.sortMu.Lock()
		defer t.sortMu.Unlock()
		t.sortNames()
		out := make([]Value, len(t.byName))
		for i, id := range t.byName {
			out[i] = t.ents[id].value()
		}
		return out, nil
	}
	out := make([]Value, 0, len(names))
	for _, n := range names {
		id, ok := t.names[n]
		if !ok {
			return nil, fmt.Errorf("look up tag %q: %w", n, ErrUnknownTag)
		}
		out = append(out, t.ents[id].value())
	}
	return out, nil
}

// sortNames extends t.byName to every tag: the tags defined since it was
// last extended are sorted and merged in, so a read of every tag costs a
// sort only of what is new. Called with t.mu held for reading and
// t.sortMu held.
func (t *Table) sortNames() {
	old := len(t.byName)
	if old == len(t.ents) {
		return
	}
	cmp := func(a, b ID) int { return strings.Compare(t.ents[a].def.Name, t.ents[b].def.Name) }
	all := slices.Grow(t.byName, len(t.ents)-old)
	for id := old; id < len(t.ents); id++ {
		all = append(all, ID(id))
	}
	slices.SortFunc(all[old:], cmp)
	if old > 0 {
		merged := make([]ID, 0, len(all))
		a, b := all[:old], all[old:]
		for len(a) > 0 && len(b) > 0 {
			if cmp(a[0], b[0]) <= 0 {
				merged, a = append(merged, a[0]), a[1:]
			} else {
				merged, b = append(merged, b[0]), b[1:]
			}
		}
		all = append(append(merged, a...), b...)
	}
	t.byName = all
}

// Get returns the current value of one tag by ID.
func (t *Table) Get(id ID) (Value, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if int(id) >= len(t.ents) {
		return Value{}, false
	}
	return t.ents[id].value(), true
}

func (e *entry) value() Value {
	return Value{Tag: e.def.Name, T: e.cur.T, V: e.cur.V, Q: e.cur.Q, Has: e.has, IsText: e.isText, Text: e.text}
}

// Stats returns the table's counters.
func (t *Table) Stats() Stats {
	t.mu.RLock()
	s := t.stats
	s.Tags = len(t.ents)
	t.mu.RUnlock()
	return s
}

// Update applies a batch of samples under one lock round, hands the ones
// that pass their archive policy to the sink in one call, and delivers the
// changes to subscribers. It never blocks on a consumer. It returns the
// number of samples that changed a current value or quality (the stations'
// "changes" statistic).
//
// Rules, per sample:
//   - a non-finite value becomes a hold with quality bad (the value is never
//     stored; the last real one is kept);
//   - a sample older than the tag's current one is late: it is archived
//     as-is (the store accepts late data) but does not change the current
//     value, and the policies do not apply to it;
//   - otherwise it becomes the current value, and is archived when its
//     tag's policy lets it pass (quality changes always pass).
func (t *Table) Update(batch []Sample) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abuf, t.cbuf = t.abuf[:0], t.cbuf[:0]
	for i := range batch {
		t.apply(batch[i])
	}
	t.stats.Updates += uint64(len(batch))
	t.flush()
	return len(t.cbuf)
}

// MarkBad sets the quality of the given tags to bad at time ms, keeping
// their values: the shorthand for Update with Hold samples.
func (t *Table) MarkBad(ids []ID, ms int64) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abuf, t.cbuf = t.abuf[:0], t.cbuf[:0]
	for _, id := range ids {
		t.apply(Sample{ID: id, Q: model.QualityBad, Hold: true, T: ms})
	}
	t.stats.Updates += uint64(len(ids))
	t.flush()
	return len(t.cbuf)
}

// UpdatePoints applies points addressed by name, the form ingest receives.
// With create set, unknown names are defined with default metadata and the
// given source; otherwise an unknown name fails the whole batch before
// anything is applied.
func (t *Table) UpdatePoints(pts []model.Point, create bool, source string) (int, error) {
	batch := make([]Sample, len(pts))
	for i, p := range pts {
		id, ok := t.Lookup(p.Tag)
		if !ok {
			if !create {
				return 0, fmt.Errorf("update tag %q: %w", p.Tag, ErrUnknownTag)
			}
			var err error
			if id, err = t.Define(Def{Name: p.Tag, Source: source}); err != nil {
				return 0, err
			}
		}
		batch[i] = Sample{ID: id, Q: p.Q, T: p.T, V: p.V}
	}
	return t.Update(batch), nil
}

// apply handles one sample; t.mu is held.
func (t *Table) apply(s Sample) {
	if int(s.ID) >= len(t.ents) {
		t.stats.UnknownIDs++
		return
	}
	e := &t.ents[s.ID]
	if e.isText {
		// The store would refuse the number; the archive queue must not
		// hold a point it can never write.
		t.stats.WrongKind++
		return
	}
	if !s.Hold && (math.IsNaN(s.V) || math.IsInf(s.V, 0)) {
		t.stats.NonFinite++
		s.Hold, s.Q = true, model.QualityBad
	}
	if e.seen && s.T < e.cur.T {
		if s.Hold {
			return // a late quality-only mark carries nothing to store
		}
		t.stats.Late++
		if s.NoArchive {
			return
		}
		t.abuf = append(t.abuf, model.Point{Tag: e.def.Name, T: s.T, V: s.V, Q: s.Q})
		return
	}
	if s.Hold {
		if !e.has {
			// Nothing to keep and nothing to archive: record the state only.
			changed := !e.seen || e.cur.Q != s.Q
			e.cur.T, e.cur.Q, e.seen = s.T, s.Q, true
			if changed {
				t.cbuf = append(t.cbuf, Change{ID: s.ID, Tag: e.def.Name, T: s.T, Q: s.Q})
			}
			return
		}
		s.V = e.cur.V
	}
	changed := !e.has || e.cur.V != s.V || e.cur.Q != s.Q
	e.cur = model.Sample{T: s.T, V: s.V, Q: s.Q}
	e.has, e.seen = true, true
	if changed {
		t.cbuf = append(t.cbuf, Change{ID: s.ID, Tag: e.def.Name, T: s.T, V: s.V, Q: s.Q, Has: true})
	}
	if !s.NoArchive && e.pass(s) {
		e.arch, e.archHas = e.cur, true
		t.abuf = append(t.abuf, model.Point{Tag: e.def.Name, T: s.T, V: s.V, Q: s.Q})
	}
}

// pass applies the archive policy to a sample that is becoming current.
func (e *entry) pass(s Sample) bool {
	if !e.archHas || e.arch.Q != s.Q {
		return true
	}
	switch e.def.Archive {
	case ArchiveAll:
		return true
	case ArchiveDeadband:
		return math.Abs(s.V-e.arch.V) >= e.def.Deadband
	default:
		return s.V != e.arch.V
	}
}

// flush hands the batch's archive points and changes on; t.mu is held.
func (t *Table) flush() {
	if len(t.abuf) > 0 && t.sink != nil {
		if t.sink.Enqueue(t.abuf) {
			t.stats.Archived += uint64(len(t.abuf))
		} else {
			t.stats.Refused += uint64(len(t.abuf))
		}
	}
	t.fanOut()
}

// fanOut delivers the batch's changes to the subscribers; t.mu is held.
func (t *Table) fanOut() {
	t.stats.Changes += uint64(len(t.cbuf))
	if len(t.cbuf) > 0 {
		for _, s := range t.subs {
			s.push(t.cbuf)
		}
	}
	// A large pushed batch grew the reused buffers: let them go rather
	// than hold that memory for good.
	if cap(t.cbuf) > maxKeptBatch {
		t.cbuf = nil
	}
	if cap(t.abuf) > maxKeptBatch {
		t.abuf = nil
	}
}

// maxKeptBatch is the largest capacity, in entries, of the batch buffers
// the table keeps between batches.
const maxKeptBatch = 1 << 14
