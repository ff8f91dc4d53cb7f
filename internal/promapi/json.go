package promapi

import (
	"github.com/pith-historian/pith/internal/jsonenc"
	"math"
	"net/http"
	"strconv"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/util/annotations"
)

// Answers are written by hand, in Prometheus's exact JSON layout
// (timestamps as seconds with up to 3 decimals, values as strings):
// encoding/json on promql.Matrix would allocate per point, and a Grafana
// panel asks for thousands of them on every refresh.

const errBadData = "bad_data"

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body) // a client gone mid-answer is not our error
}

// writeError sends Prometheus's error envelope.
func writeError(w http.ResponseWriter, status int, typ, msg string) {
	b := make([]byte, 0, 64+len(msg))
	b = append(b, `{"status":"error","errorType":`...)
	b = jsonenc.AppendString(b, typ)
	b = append(b, `,"error":`...)
	b = jsonenc.AppendString(b, msg)
	b = append(b, '}')
	writeJSON(w, status, b)
}

// writeSuccess sends {"status":"success","data":data}.
func writeSuccess(w http.ResponseWriter, data []byte) { writeSuccessWarnings(w, data, nil) }

func writeSuccessWarnings(w http.ResponseWriter, data []byte, ws annotations.Annotations) {
	b := make([]byte, 0, len(data)+64)
	b = append(b, `{"status":"success","data":`...)
	b = append(b, data...)
	if len(ws) > 0 {
		b = append(b, `,"warnings":[`...)
		i := 0
		for _, err := range ws {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, err.Error())
			i++
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	writeJSON(w, http.StatusOK, b)
}

// appendResult appends a query result: {"resultType":..., "result":...}.
func appendResult(b []byte, v parser.Value) []byte {
	switch v := v.(type) {
	case promql.Matrix:
		b = append(b, `{"resultType":"matrix","result":[`...)
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"metric":`...)
			b = appendLabels(b, s.Metric)
			b = append(b, `,"values":[`...)
			for j, p := range s.Floats {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendPoint(b, p.T, p.F)
			}
			b = append(b, "]}"...)
		}
		return append(b, "]}"...)
	case promql.Vector:
		b = append(b, `{"resultType":"vector","result":[`...)
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"metric":`...)
			b = appendLabels(b, s.Metric)
			b = append(b, `,"value":`...)
			b = appendPoint(b, s.T, s.F)
			b = append(b, '}')
		}
		return append(b, "]}"...)
	case promql.Scalar:
		b = append(b, `{"resultType":"scalar","result":`...)
		b = appendPoint(b, v.T, v.V)
		return append(b, '}')
	case promql.String:
		b = append(b, `{"resultType":"string","result":[`...)
		b = appendTime(b, v.T)
		b = append(b, ',')
		b = jsonenc.AppendString(b, v.V)
		return append(b, "]}"...)
	}
	return append(b, `{"resultType":"vector","result":[]}`...)
}

// appendPoint appends [seconds, "value"].
func appendPoint(b []byte, t int64, v float64) []byte {
	b = append(b, '[')
	b = appendTime(b, t)
	b = append(b, ',', '"')
	b = appendValue(b, v)
	return append(b, '"', ']')
}

// appendTime appends Unix milliseconds as seconds with up to three
// decimals, as Prometheus writes them.
func appendTime(b []byte, ms int64) []byte {
	if ms < 0 {
		b = append(b, '-')
		ms = -ms
	}
	b = strconv.AppendInt(b, ms/1000, 10)
	if f := ms % 1000; f != 0 {
		b = append(b, '.', byte('0'+f/100), byte('0'+f/10%10), byte('0'+f%10))
		for b[len(b)-1] == '0' {
			b = b[:len(b)-1]
		}
	}
	return b
}

// appendValue appends v as Prometheus formats sample values.
func appendValue(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'f', -1, 64)
}

func appendLabels(b []byte, ls labels.Labels) []byte {
	b = append(b, '{')
	first := true
	ls.Range(func(l labels.Label) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = jsonenc.AppendString(b, l.Name)
		b = append(b, ':')
		b = jsonenc.AppendString(b, l.Value)
	})
	return append(b, '}')
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, s)
	}
	return append(b, ']')
}
