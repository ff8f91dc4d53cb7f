package api

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/jsonenc"
	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// paramError is a bad query parameter; the message names it.
type paramError struct{ msg string }

func (e *paramError) Error() string { return e.msg }

// dataQuery is a parsed /api/v1/data request.
type dataQuery struct {
	tag      string
	from, to int64
	points   int
	agg      model.Agg
}

func (s *Server) parseDataQuery(q url.Values) (dataQuery, error) {
	d := dataQuery{tag: q.Get("tag"), points: s.opts.DefaultPoints, agg: model.AggMean}
	if d.tag == "" {
		return d, &paramError{"missing parameter tag"}
	}
	var err error
	if d.from, err = intParam(q, "from"); err != nil {
		return d, err
	}
	if d.to, err = intParam(q, "to"); err != nil {
		return d, err
	}
	if d.to <= d.from {
		return d, &paramError{"parameter to must be greater than from"}
	}
	if d.to-d.from < 0 { // the width overflows int64
		return d, &paramError{"parameters from and to span more than the int64 range"}
	}
	if v := q.Get("points"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > s.opts.MaxPoints {
			return d, &paramError{"parameter points must be an integer from 1 to " + strconv.Itoa(s.opts.MaxPoints) + ", got " + strconv.Quote(v)}
		}
		d.points = n
	}
	if v := q.Get("agg"); v != "" {
		if d.agg, err = model.ParseAgg(v); err != nil {
			return d, &paramError{"parameter agg: " + err.Error()}
		}
	}
	return d, nil
}

// intParam parses a required integer millisecond parameter.
func intParam(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, &paramError{"missing parameter " + name + " (Unix milliseconds)"}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, &paramError{"parameter " + name + " must be integer Unix milliseconds, got " + strconv.Quote(v)}
	}
	return n, nil
}

// handleData serves GET /api/v1/data: bucketed aggregates or raw samples of
// one tag, written by hand into a pooled buffer (the dashboard's hot path).
// A raw answer holds at most points samples; when the range holds more it
// ends with "truncated": true and "next", the time of the first sample
// left out, which the client passes as from to read the next page.
func (s *Server) handleData(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	d, err := s.parseDataQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	buf := s.bufs.get()
	defer s.bufs.put(buf)
	b := append(*buf, `{"tag":`...)
	b = jsonenc.AppendString(b, d.tag)
	b = append(b, `,"agg":"`...)
	b = append(b, d.agg.String()...)
	b = append(b, `","points":[`...)
	truncated := false
	var next int64
	if d.agg == model.AggRaw {
		// One sample more than the cap tells a full answer from a cut one;
		// the extra sample's time is where the next page starts.
		err := s.st.RawFunc(d.tag, d.from, d.to, d.points+1, func(ts []int64, vs []float64, _ []model.Quality) {
			if len(ts) > d.points {
				truncated, next = true, ts[d.points]
				ts = ts[:d.points]
			}
			for i, t := range ts {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, '[')
				b = strconv.AppendInt(b, t, 10)
				b = append(b, ',')
				b = jsonenc.AppendFloat(b, vs[i])
				b = append(b, ']')
			}
		})
		if errors.Is(err, store.ErrKind) {
			s.handleTextData(w, d, b[:0])
			return
		}
		if err != nil {
			s.queryError(w, d.tag, err)
			return
		}
	} else {
		buckets, err := s.st.Aggregate(d.tag, d.from, d.to, d.points, d.agg)
		if errors.Is(err, model.ErrTextAgg) && (d.agg == model.AggFirst || d.agg == model.AggLast) {
			s.handleTextData(w, d, b[:0])
			return
		}
		if err != nil {
			s.queryError(w, d.tag, err)
			return
		}
		for i, bk := range buckets {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = strconv.AppendInt(b, bk.T, 10)
			b = append(b, ',')
			if bk.OK {
				b = jsonenc.AppendFloat(b, bk.V)
			} else {
				b = append(b, "null"...)
			}
			b = append(b, ']')
		}
	}
	b = append(b, ']')
	if truncated {
		// Only a cut answer carries these keys, so clients that never ask
		// for more than the cap see the same JSON as before.
		b = append(b, `,"truncated":true,"next":`...)
		b = strconv.AppendInt(b, next, 10)
	}
	b = append(b, '}')
	*buf = b
	writeJSON(w, http.StatusOK, b)
}

// queryError answers a failed read: 404 for an unknown tag, 503 when the
// store is closed, 500 otherwise.
func (s *Server) queryError(w http.ResponseWriter, tag string, err error) {
	switch {
	case errors.Is(err, store.ErrUnknownTag):
		msg := err.Error()
		if tag != "" && !strings.Contains(msg, tag) {
			msg = "unknown tag " + strconv.Quote(tag)
		}
		writeError(w, http.StatusNotFound, msg)
	case errors.Is(err, model.ErrTextAgg), errors.Is(err, store.ErrKind):
		writeError(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, store.ErrClosed):
		writeError(w, http.StatusServiceUnavailable, err.Error())
	default:
		s.log.Error("query failed", "tag", tag, "err", err)
		writeError(w, http.StatusInternalServerError, err.Error())
	}
}

// handleTags serves GET /api/v1/tags: every stored tag sorted by name, with
// the metadata Options.Meta knows.
func (s *Server) handleTags(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	// Clone before sorting: the store's slice may be shared.
	tags := slices.Clone(s.st.Tags())
	slices.SortFunc(tags, func(a, b store.TagInfo) int { return strings.Compare(a.Name, b.Name) })
	buf := s.bufs.get()
	defer s.bufs.put(buf)
	b := append(*buf, `{"tags":[`...)
	for i, t := range tags {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = jsonenc.AppendString(b, t.Name)
		b = append(b, `,"first":`...)
		b = strconv.AppendInt(b, t.First, 10)
		b = append(b, `,"last":`...)
		b = strconv.AppendInt(b, t.Last, 10)
		if t.Text {
			b = append(b, `,"kind":"text"`...)
		}
		ls := t.Labels
		if s.opts.Meta != nil {
			if m, ok := s.opts.Meta(t.Name); ok {
				b = appendMeta(b, m)
				if len(ls) == 0 {
					ls = m.Labels
				}
			}
		}
		if len(ls) > 0 {
			b = appendLabels(b, ls)
		}
		b = append(b, '}')
	}
	b = append(b, "]}"...)
	*buf = b
	writeJSON(w, http.StatusOK, b)
}

// appendLabels appends `,"labels":{"name":"value",...}` in label order.
func appendLabels(b []byte, ls model.Labels) []byte {
	b = append(b, `,"labels":{`...)
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, l.Name)
		b = append(b, ':')
		b = jsonenc.AppendString(b, l.Value)
	}
	return append(b, '}')
}

// appendMeta appends the non-empty metadata fields, each led by a comma.
func appendMeta(b []byte, m TagMeta) []byte {
	for _, f := range [...]struct{ key, val string }{
		{"unit", m.Unit}, {"description", m.Description}, {"source", m.Source}, {"archive", m.Archive}, {"status", m.Status},
	} {
		if f.val == "" {
			continue
		}
		b = append(b, `,"`...)
		b = append(b, f.key...)
		b = append(b, `":`...)
		b = jsonenc.AppendString(b, f.val)
	}
	return b
}
