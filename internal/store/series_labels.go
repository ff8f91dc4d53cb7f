package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/pith-historian/pith/internal/model"
)

// Labels are tag metadata the store keeps with its series, not per sample:
// a labels record in the WAL makes a change durable (and visible to the
// followers, which forward it), the series file keeps it past the WAL's
// checkpoint. The layouts are in docs/format/store.md and docs/format/wal.md.

// recLabels is the WAL record of a labels change: count uvarint, then per
// tag its name and labels (appendLabels).
const recLabels byte = 'L'

// recLabelsReplica is a labels record copied from the other box of a
// redundant pair (SetLabelsReplica): laid out and replayed as recLabels;
// followers mark its entry Replica.
const recLabelsReplica byte = 'M'

// SetLabels makes each series' labels the tag's labels, durably: it
// returns once the change is in the WAL. A series whose labels the store
// already holds costs nothing; a tag the store does not know yet gets a
// series id (and is listed by Tags once it holds data). Nil labels remove a
// tag's labels. A label set that fails model.Labels.Check is refused with a
// *model.PointError naming the tag, and nothing is changed. The store
// keeps the Labels slices it is given (the tag table shares them): callers
// must not modify them after.
func (db *DB) SetLabels(ctx context.Context, series []model.Series) error {
	return db.setLabels(ctx, series, recLabels)
}

// SetLabelsReplica sets labels copied from the other box of a redundant
// pair, as SetLabels does, in a replica record: followers mark it Replica
// and forwarders leave it out, so the labels are not sent back.
func (db *DB) SetLabelsReplica(ctx context.Context, series []model.Series) error {
	return db.setLabels(ctx, series, recLabelsReplica)
}

func (db *DB) setLabels(ctx context.Context, series []model.Series, kind byte) error {
	var changed []model.Series
	s := db.series
	s.mu.RLock()
	for i, x := range series {
		if err := x.Labels.Check(); err != nil {
			s.mu.RUnlock()
			return &model.PointError{Index: i, Tag: x.Tag, Err: err}
		}
		if x.Tag == "" {
			s.mu.RUnlock()
			return &model.PointError{Index: i, Tag: x.Tag, Err: errors.New("empty tag")}
		}
		if id, ok := s.byName[x.Tag]; ok && s.labels[id].Equal(x.Labels) {
			continue
		}
		changed = append(changed, x)
	}
	s.mu.RUnlock()
	if len(changed) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if e := db.failed.Load(); e != nil {
		return *e
	}
	if err := db.raiseVersion(formatLabels); err != nil {
		return fmt.Errorf("set labels: %w", db.noteDisk(&db.nospace.flush, "writes", err))
	}
	rec := appendLabelsRecord(nil, changed)
	rec[0] = kind
	return db.commit(rec, func() error {
		s.mu.Lock()
		for _, x := range changed {
			s.setLabelsLocked(s.getOrCreateLocked([]byte(x.Tag)), x.Labels)
		}
		s.mu.Unlock()
		return nil
	})
}

// Labels returns the labels of a tag the store knows.
func (db *DB) Labels(tag string) (model.Labels, bool) {
	s := db.series
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.byName[tag]
	if !ok {
		return nil, false
	}
	return s.labels[id], true
}

// setLabelsLocked replaces the labels of id, keeping ls; the caller holds
// s.mu for writing. The series file is marked for saving.
func (s *seriesTable) setLabelsLocked(id uint32, ls model.Labels) {
	if s.labels[id].Equal(ls) {
		return
	}
	for i := range ls {
		ls[i].Name, ls[i].Value = s.intern(ls[i].Name), s.intern(ls[i].Value)
	}
	s.labels[id] = ls
	s.labelsGen++
	s.listGen++
}

// maxInterned bounds the distinct label strings the series table shares
// between tags. Names and most values repeat across series (job, mode,
// an instance for every metric of a target), so sharing one copy saves
// about 40 bytes a label; past the bound (values unique per series) new
// strings are kept as they are.
const maxInterned = 1 << 16

// intern returns the table's copy of str, keeping str as that copy when
// there is none yet and the bound allows; s.mu is held for writing.
func (s *seriesTable) intern(str string) string {
	if c, ok := s.interned[str]; ok {
		return c
	}
	if s.interned == nil {
		s.interned = make(map[string]string)
	}
	if len(s.interned) < maxInterned {
		s.interned[str] = str
	}
	return str
}

// appendLabels encodes ls: count uvarint, then each name and value as
// uvarint length and bytes.
func appendLabels(dst []byte, ls model.Labels) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ls)))
	for _, l := range ls {
		dst = binary.AppendUvarint(dst, uint64(len(l.Name)))
		dst = append(dst, l.Name...)
		dst = binary.AppendUvarint(dst, uint64(len(l.Value)))
		dst = append(dst, l.Value...)
	}
	return dst
}

// decodeLabels decodes what appendLabels wrote and returns the rest of b.
// The result is checked with model.Labels.Check.
func decodeLabels(b []byte) (model.Labels, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, nil, errShortRecord
	}
	b = b[k:]
	if n == 0 {
		return nil, b, nil
	}
	ls := make(model.Labels, 0, n)
	for i := uint64(0); i < n; i++ {
		var name, val []byte
		var err error
		if name, b, err = decodeBytes(b); err != nil {
			return nil, nil, err
		}
		if val, b, err = decodeBytes(b); err != nil {
			return nil, nil, err
		}
		ls = append(ls, model.Label{Name: string(name), Value: string(val)})
	}
	if err := ls.Check(); err != nil {
		return nil, nil, err
	}
	return ls, b, nil
}

// decodeBytes reads one uvarint-length-prefixed byte string.
func decodeBytes(b []byte) ([]byte, []byte, error) {
	l, k := binary.Uvarint(b)
	if k <= 0 || l > uint64(len(b)-k) {
		return nil, nil, errShortRecord
	}
	return b[k : k+int(l)], b[k+int(l):], nil
}

// appendLabelsRecord encodes a labels record.
func appendLabelsRecord(dst []byte, series []model.Series) []byte {
	dst = append(dst, recLabels)
	dst = binary.AppendUvarint(dst, uint64(len(series)))
	for _, x := range series {
		dst = binary.AppendUvarint(dst, uint64(len(x.Tag)))
		dst = append(dst, x.Tag...)
		dst = appendLabels(dst, x.Labels)
	}
	return dst
}

// decodeLabelsRecord decodes a labels record.
func decodeLabelsRecord(rec []byte) ([]model.Series, error) {
	if len(rec) == 0 || rec[0] != recLabels && rec[0] != recLabelsReplica {
		return nil, errors.New("not a labels record")
	}
	b := rec[1:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errShortRecord
	}
	b = b[k:]
	out := make([]model.Series, 0, n)
	for i := uint64(0); i < n; i++ {
		name, rest, err := decodeBytes(b)
		if err != nil {
			return nil, err
		}
		if len(name) == 0 {
			return nil, errors.New("labels record names an empty tag")
		}
		ls, rest, err := decodeLabels(rest)
		if err != nil {
			return nil, fmt.Errorf("labels of %q: %w", name, err)
		}
		out = append(out, model.Series{Tag: string(name), Labels: ls})
		b = rest
	}
	if len(b) != 0 {
		return nil, errors.New("trailing bytes in labels record")
	}
	return out, nil
}

// replayLabels applies a labels record found in the WAL at open.
func (db *DB) replayLabels(rec []byte) error {
	series, err := decodeLabelsRecord(rec)
	if err != nil {
		return err
	}
	s := db.series
	s.mu.Lock()
	for _, x := range series {
		s.setLabelsLocked(s.getOrCreateLocked([]byte(x.Tag)), x.Labels)
	}
	s.mu.Unlock()
	return nil
}
