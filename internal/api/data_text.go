package api

import (
	"net/http"
	"strconv"

	"github.com/pith-historian/pith/internal/jsonenc"
	"github.com/pith-historian/pith/internal/model"
)

// handleTextData answers /api/v1/data for a text tag: agg=raw lists its
// values, first and last give a value per bucket, as JSON strings
// (count is answered by the numeric path; other aggregates are refused).
// b is the pooled buffer, emptied.
func (s *Server) handleTextData(w http.ResponseWriter, d dataQuery, b []byte) {
	tq, ok := s.st.(TextQueries)
	if !ok {
		writeError(w, http.StatusBadRequest, "tag "+strconv.Quote(d.tag)+" holds text, which this server cannot read")
		return
	}
	b = append(b, `{"tag":`...)
	b = jsonenc.AppendString(b, d.tag)
	b = append(b, `,"agg":"`...)
	b = append(b, d.agg.String()...)
	b = append(b, `","kind":"text","points":[`...)
	truncated := false
	var next int64
	if d.agg == model.AggRaw {
		samples, err := tq.RawText(d.tag, d.from, d.to, d.points+1)
		if err != nil {
			s.queryError(w, d.tag, err)
			return
		}
		if len(samples) > d.points {
			truncated, next = true, samples[d.points].T
			samples = samples[:d.points]
		}
		for i, smp := range samples {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			b = strconv.AppendInt(b, smp.T, 10)
			b = append(b, ',')
			b = jsonenc.AppendString(b, smp.Text)
			b = append(b, ']')
		}
	} else {
		buckets, err := tq.AggregateText(d.tag, d.from, d.to, d.points, d.agg)
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
				b = jsonenc.AppendString(b, bk.Text)
			} else {
				b = append(b, "null"...)
			}
			b = append(b, ']')
		}
	}
	b = append(b, ']')
	if truncated {
		b = append(b, `,"truncated":true,"next":`...)
		b = strconv.AppendInt(b, next, 10)
	}
	b = append(b, '}')
	writeJSON(w, http.StatusOK, b)
}
