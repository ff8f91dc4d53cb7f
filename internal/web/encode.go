package web

import (
	"github.com/pith-historian/pith/internal/jsonenc"
	"strconv"
)

// appendEvent appends one server-sent event whose data is
// {"now":MS,"values":[[tag,ms,value|null,quality],...]} on a single line;
// the value of a text tag is a JSON string.
// JSON never contains a raw newline, so one "data:" line is enough.
func appendEvent(b []byte, event string, now int64, vals []liveValue) []byte {
	b = append(b, "event: "...)
	b = append(b, event...)
	b = append(b, "\ndata: {\"now\":"...)
	b = strconv.AppendInt(b, now, 10)
	b = append(b, `,"values":[`...)
	for i := range vals {
		v := &vals[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = jsonenc.AppendString(b, v.Tag)
		b = append(b, ',')
		b = strconv.AppendInt(b, v.T, 10)
		b = append(b, ',')
		if v.Has && v.IsText {
			b = jsonenc.AppendString(b, v.Text)
		} else if v.Has {
			b = jsonenc.AppendFloat(b, v.V)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, ",\""...)
		b = append(b, v.Q.String()...)
		b = append(b, "\"]"...)
	}
	return append(b, "]}\n\n"...)
}
