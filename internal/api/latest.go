package api

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/jsonenc"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// Current holds the current value of the tags Pith acquires, as
// *tag.Table does. Values there are as new as the last poll or push, while
// the store lags behind by the archive queue's backlog (and holds nothing
// new at all while the queue is frozen).
type Current interface {
	// Latest returns the current values of the named tags in the order
	// given, or of every tag sorted by name when none is named. A name it
	// does not hold
	// yields an error wrapping tag.ErrUnknownTag. Value.Has is false for a
	// tag that never received a value. It is called concurrently.
	Latest(names ...string) ([]tag.Value, error)
}

var _ Current = (*tag.Table)(nil)

// handleLatest serves GET /api/v1/latest[?tag=T&tag=U].
func (s *Server) handleLatest(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	tags := r.URL.Query()["tag"]
	for _, t := range tags {
		if t == "" {
			writeError(w, http.StatusBadRequest, "parameter tag must not be empty")
			return
		}
	}
	values, err := s.latest(tags)
	if err != nil {
		name := ""
		if len(tags) == 1 {
			name = tags[0]
		}
		s.queryError(w, name, err)
		return
	}
	buf := s.bufs.get()
	defer s.bufs.put(buf)
	// About 70 bytes a value: one growth instead of a doubling per
	// megabyte of a large answer.
	b := append(slices.Grow(*buf, 16+70*len(values)), `{"values":[`...)
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"tag":`...)
		b = jsonenc.AppendString(b, v.Tag)
		b = append(b, `,"ts":`...)
		b = strconv.AppendInt(b, v.T, 10)
		b = append(b, `,"value":`...)
		if v.IsText {
			b = jsonenc.AppendString(b, v.Text)
		} else {
			b = jsonenc.AppendFloat(b, v.V)
		}
		b = append(b, `,"quality":`...)
		b = jsonenc.AppendString(b, v.Q.String())
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	*buf = b
	writeJSON(w, http.StatusOK, b)
}

// latest returns the newest sample of the named tags in the order given,
// or of every tag sorted by name when none is named (in the store's order
// without Options.Current). A tag Options.Current holds a value of answers
// from there; any other from the store, so imported and pushed-only tags,
// and acquired tags before their first poll after a restart, still answer.
func (s *Server) latest(names []string) ([]store.Latest, error) {
	cur := s.opts.Current
	if cur == nil {
		return s.st.Latest(names...)
	}
	if len(names) == 0 {
		return s.latestAll(cur)
	}
	out := make([]store.Latest, len(names))
	var missing []string // names the store answers, in order
	var at []int         // their places in out
	for i, n := range names {
		vs, err := cur.Latest(n)
		if err != nil && !errors.Is(err, tag.ErrUnknownTag) {
			return nil, err
		}
		if err == nil && len(vs) == 1 && vs[0].Has {
			out[i] = fromCurrent(vs[0])
			continue
		}
		missing, at = append(missing, n), append(at, i)
		if err == nil && len(vs) == 1 {
			out[i] = store.Latest{Tag: n, Sample: model.Sample{T: vs[0].T, Q: vs[0].Q}}
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	old, err := s.st.Latest(missing...)
	if err != nil {
		return nil, err
	}
	for k, l := range old {
		out[at[k]] = merge(l, out[at[k]])
	}
	return out, nil
}

// latestAll merges every current value with every stored tag, sorted by
// name: one pass over the two sorted lists, without a map or a sort of
// the answer (a box of 100,000 tags answers 100,000 values).
func (s *Server) latestAll(cur Current) ([]store.Latest, error) {
	vs, err := cur.Latest()
	if err != nil {
		return nil, err
	}
	stored, err := s.st.Latest()
	if err != nil {
		return nil, err
	}
	order := s.storedOrder(stored)
	out := make([]store.Latest, 0, max(len(vs), len(stored)))
	i, j := 0, 0
	for i < len(order) || j < len(vs) {
		c := 0 // which comes first: -1 the stored tag, 1 the current one, 0 both
		switch {
		case j == len(vs):
			c = -1
		case i == len(order):
			c = 1
		default:
			c = strings.Compare(stored[order[i]].Tag, vs[j].Tag)
		}
		switch {
		case c < 0:
			out = append(out, stored[order[i]])
			i++
		case c > 0:
			if vs[j].Has { // a tag never archived (e.g. its queue is frozen)
				out = append(out, fromCurrent(vs[j]))
			}
			j++
		default:
			if v := vs[j]; v.Has {
				out = append(out, fromCurrent(v))
			} else {
				out = append(out, merge(stored[order[i]], store.Latest{Tag: v.Tag, Sample: model.Sample{T: v.T, Q: v.Q}}))
			}
			i, j = i+1, j+1
		}
	}
	return out, nil
}

// storedOrder returns the indexes of stored sorted by tag. The store lists
// its tags in the order they were created, which rarely changes between
// two reads: the order of the last read is kept, and used again when one
// pass shows it still sorts this one (a permutation under which every tag
// is above the one before sorts the list); otherwise the list is sorted
// and the new order kept.
func (s *Server) storedOrder(stored []store.Latest) []int32 {
	if p := s.latestOrder.Load(); p != nil && len(*p) == len(stored) {
		order, sorted := *p, true
		for k := 1; k < len(order) && sorted; k++ {
			sorted = stored[order[k-1]].Tag < stored[order[k]].Tag
		}
		if sorted {
			return order
		}
	}
	order := make([]int32, len(stored))
	for k := range order {
		order[k] = int32(k)
	}
	slices.SortFunc(order, func(a, b int32) int { return strings.Compare(stored[a].Tag, stored[b].Tag) })
	s.latestOrder.Store(&order)
	return order
}

func fromCurrent(v tag.Value) store.Latest {
	return store.Latest{Tag: v.Tag, Sample: model.Sample{T: v.T, V: v.V, Q: v.Q}, IsText: v.IsText, Text: v.Text}
}

// merge answers a tag the table knows without a value: the stored value,
// with the table's newer quality and time when it has them (a station
// that went dead after a restart marks its tags bad without a value, the
// way the table itself holds the last value with bad quality).
func merge(stored, cur store.Latest) store.Latest {
	if cur.T > stored.T {
		stored.T, stored.Q = cur.T, cur.Q
	}
	return stored
}
