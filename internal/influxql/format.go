package influxql

import (
	"bytes"
	"encoding/csv"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/jsonenc"
)

// epochDiv returns the divisor from ms for an epoch= precision, 0 for
// RFC 3339 strings (no epoch), and a multiplier for finer precisions.
func epochScale(epoch string) (mul, div int64, ok bool) {
	switch epoch {
	case "":
		return 0, 0, true
	case "ns", "n":
		return 1e6, 1, true
	case "u", "us", "µ", "µs":
		return 1e3, 1, true
	case "ms":
		return 1, 1, true
	case "s":
		return 1, 1e3, true
	case "m":
		return 1, 60e3, true
	case "h":
		return 1, 3600e3, true
	}
	return 0, 0, false
}

// formatter writes times with the request's epoch.
type formatter struct {
	mul, div int64 // ms*mul/div; mul 0: RFC 3339
}

func (f formatter) epochTime(ms int64) int64 {
	if f.mul == 0 {
		return ms * 1e6
	}
	return ms * f.mul / f.div
}

// appendFloat writes a float as encoding/json does (InfluxDB's encoder).
func appendFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	abs := math.Abs(v)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, v, format, -1, 64)
	if format == 'e' {
		// e-07 -> e-7, as encoding/json writes it.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

func (f formatter) appendValue(b []byte, v Value) []byte {
	switch v.kind {
	case vFloat:
		return appendFloat(b, v.f)
	case vInt:
		return strconv.AppendInt(b, v.i, 10)
	case vString:
		return jsonenc.AppendString(b, v.s)
	case vBool:
		return strconv.AppendBool(b, v.i == 1)
	case vTime:
		if f.mul == 0 {
			b = append(b, '"')
			b = time.UnixMilli(v.i).UTC().AppendFormat(b, time.RFC3339Nano)
			return append(b, '"')
		}
		return strconv.AppendInt(b, f.epochTime(v.i), 10)
	}
	return append(b, "null"...)
}

// JSON writes results as InfluxDB 1.x does.
func (f formatter) JSON(results []Result) []byte {
	size := 64
	for _, r := range results {
		for _, row := range r.Series {
			size += 64 + len(row.Values)*len(row.Columns)*24
		}
	}
	b := append(make([]byte, 0, size), `{"results":[`...)
	for i, r := range results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"statement_id":`...)
		b = strconv.AppendInt(b, int64(r.StatementID), 10)
		if r.Err != "" {
			b = append(b, `,"error":`...)
			b = jsonenc.AppendString(b, r.Err)
		} else if len(r.Series) > 0 {
			b = append(b, `,"series":[`...)
			for j, row := range r.Series {
				if j > 0 {
					b = append(b, ',')
				}
				b = f.appendRow(b, row)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

func (f formatter) appendRow(b []byte, row Row) []byte {
	b = append(b, '{')
	if row.Name != "" {
		b = append(b, `"name":`...)
		b = jsonenc.AppendString(b, row.Name)
		b = append(b, ',')
	}
	if len(row.TagKeys) > 0 {
		b = append(b, `"tags":{`...)
		for i, k := range row.TagKeys {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, k)
			b = append(b, ':')
			b = jsonenc.AppendString(b, row.TagVals[i])
		}
		b = append(b, "},"...)
	}
	b = append(b, `"columns":[`...)
	for i, c := range row.Columns {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, c)
	}
	b = append(b, `],"values":[`...)
	for i, vals := range row.Values {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		for j, v := range vals {
			if j > 0 {
				b = append(b, ',')
			}
			b = f.appendValue(b, v)
		}
		b = append(b, ']')
	}
	return append(b, "]}"...)
}

// csvValue writes one cell as InfluxDB's CSV answer does: times as
// integers (ns without epoch=), floats in plain notation, null as empty.
func (f formatter) csvValue(v Value) string {
	switch v.kind {
	case vFloat:
		return strconv.FormatFloat(v.f, 'f', -1, 64)
	case vInt:
		return strconv.FormatInt(v.i, 10)
	case vString:
		return v.s
	case vBool:
		return strconv.FormatBool(v.i == 1)
	case vTime:
		return strconv.FormatInt(f.epochTime(v.i), 10)
	}
	return ""
}

// CSV writes results as InfluxDB 1.x does for Accept: application/csv:
// per statement a header name,tags,columns... and one line per value
// row, a blank line between statements. A refused statement is written
// as an "error" header and its message (InfluxDB writes nothing for it).
func (f formatter) CSV(results []Result) []byte {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	first := true
	sep := func() {
		if !first {
			w.Flush()
			buf.WriteByte('\n')
		}
		first = false
	}
	for _, r := range results {
		if r.Err != "" {
			sep()
			w.Write([]string{"error"})
			w.Write([]string{r.Err})
			continue
		}
		if len(r.Series) == 0 {
			continue
		}
		sep()
		var cols []string
		for i, row := range r.Series {
			if i == 0 || !equal(r.Series[i-1].Columns, row.Columns) {
				if i > 0 {
					w.Flush()
					buf.WriteByte('\n')
				}
				cols = append([]string{"name", "tags"}, row.Columns...)
				w.Write(cols)
			}
			rec := make([]string, 2+len(row.Columns))
			rec[0] = row.Name
			var tags []string
			for j, k := range row.TagKeys {
				tags = append(tags, escapeTag(k)+"="+escapeTag(row.TagVals[j]))
			}
			rec[1] = strings.Join(tags, ",")
			for _, vals := range row.Values {
				for j, v := range vals {
					rec[2+j] = f.csvValue(v)
				}
				w.Write(rec)
			}
		}
	}
	w.Flush()
	return buf.Bytes()
}

// escapeTag escapes a tag key or value as line protocol (and InfluxDB's
// CSV tags column) does.
func escapeTag(s string) string {
	if !strings.ContainsAny(s, ", =") {
		return s
	}
	r := strings.NewReplacer(",", `\,`, " ", `\ `, "=", `\=`)
	return r.Replace(s)
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
