package ingest

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// LineProtocolOptions tune the InfluxDB line-protocol input.
type LineProtocolOptions struct {
	MaxBodyBytes int64            // largest body accepted, before and after gunzip (413 beyond)
	Gate         *TagGate         // cap on new tags; nil admits every tag
	Logger       *slog.Logger     // where refused writes are logged at debug level
	Now          func() time.Time // clock for lines without a timestamp
}

// DefaultLineProtocolOptions returns the options Pith runs with.
func DefaultLineProtocolOptions() LineProtocolOptions {
	return LineProtocolOptions{
		MaxBodyBytes: DefaultMaxBodyBytes,
		Logger:       slog.Default(),
		Now:          time.Now,
	}
}

// LineProtocol serves the InfluxDB write API, so Telegraf's
// outputs.influxdb and outputs.influxdb_v2 write to Pith unchanged:
//
//	POST /write?db=&precision=                (1.x: n|ns, u|us, ms, s, m, h)
//	POST /api/v2/write?org=&bucket=&precision= (2.x: ns, us, ms, s)
//
// Mount the same handler on both paths and Ping on /ping (/query is
// internal/influxql's). db, org and bucket are accepted and ignored: the
// tag name alone says where a value goes (docs/design/0002-tag-names.md).
//
// A line `measurement,k1=v1,k2=v2 f1=1,f2=2i ts` gives one point per
// numeric field, named measurement.v1.v2.f1 (tag values in key order).
// Integers, unsigned integers and booleans (1 or 0) are stored as float64;
// string fields are skipped and counted in the X-Pith-Skipped-Strings
// response header. A line without a timestamp takes the server's time.
//
// A request is atomic: one bad line and the answer is 400 naming the line,
// and nothing of the body is stored. InfluxDB 1.x instead stores the good
// lines and answers 400 "partial write"; since Telegraf drops a batch that
// got a 400 (it does not retry), a sender that mixes bad lines into good
// ones loses more with Pith than with InfluxDB. Success is 204, as with
// InfluxDB, once the points are durable.
type LineProtocol struct {
	sink Sink
	opts LineProtocolOptions
	free chan *lpState // warm per-request states (a sync.Pool would lose them at every GC)
}

// lpState is the per-request memory, pooled so a steady stream of
// requests allocates nothing once warm.
type lpState struct {
	body  bodyReader
	rows  LPRows
	pts   []model.Point
	lines []int32 // the body line of each point, to name a refused one
	texts []model.TextPoint
	tline []int32 // the body line of each text point
	namer namer
	key   []byte // scratch: series key + ' ' + field key
	// labels are the labels of the series new to namer in this request.
	labels pendingLabels
}

// NewLineProtocol returns the handler writing to sink.
func NewLineProtocol(sink Sink, opts LineProtocolOptions) *LineProtocol {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &LineProtocol{sink: sink, opts: opts}
	h.free = make(chan *lpState, 2*runtime.GOMAXPROCS(0))
	return h
}

// ServeHTTP serves POST /write and POST /api/v2/write.
func (h *LineProtocol) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSONError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed (want POST)", 0)
		return
	}
	precision := r.URL.Query().Get("precision")
	mul, div, ok := precisionScale(precision)
	if !ok {
		h.fail(w, http.StatusBadRequest, fmt.Sprintf("unknown precision %q (want ns, us, ms, s, m or h)", precision), 0)
		return
	}
	st := h.get()
	defer h.put(st)

	body, err := st.body.read(r, maxBody(r.Context(), h.opts.MaxBodyBytes))
	if err != nil {
		h.fail(w, writeStatus(w, err), err.Error(), 0)
		return
	}
	ts, keepText := h.sink.(TextSink)
	points, skipped, err := st.convert(body, mul, div, h.opts.Now().UnixMilli(), keepText)
	if err != nil {
		var le *LineError
		line := 0
		if errors.As(err, &le) {
			line = le.Line
		}
		h.fail(w, http.StatusBadRequest, err.Error(), line)
		return
	}
	if len(st.texts) > 0 {
		err = commitMixed(r.Context(), ts, h.opts.Gate, points, st.texts, &st.labels)
	} else {
		err = commit(r.Context(), h.sink, h.opts.Gate, points, &st.labels)
	}
	if err != nil {
		line := 0
		var pe *model.PointError
		if errors.As(err, &pe) && pe.Index < len(st.lines) {
			line = int(st.lines[pe.Index])
			err = &LineError{Line: line, Err: pe.Err}
		} else if pe != nil && pe.Index-len(st.lines) < len(st.tline) {
			line = int(st.tline[pe.Index-len(st.lines)])
			err = &LineError{Line: line, Err: pe.Err}
		}
		status := writeStatus(w, err)
		h.opts.Logger.Debug("line protocol write refused", "err", err, "status", status)
		h.fail(w, status, err.Error(), line)
		return
	}
	w.Header().Set("X-Pith-Points", strconv.Itoa(len(points)+len(st.texts)))
	w.Header().Set("X-Pith-Skipped-Strings", strconv.Itoa(skipped))
	w.WriteHeader(http.StatusNoContent)
}

func (h *LineProtocol) get() *lpState {
	select {
	case st := <-h.free:
		return st
	default:
		return new(lpState)
	}
}

func (h *LineProtocol) put(st *lpState) {
	st.rows.Reset()
	clear(st.pts) // the pool must not pin tag strings of old bodies
	st.pts = st.pts[:0]
	st.lines = st.lines[:0]
	st.labels.reset()
	clear(st.texts)
	st.texts, st.tline = st.texts[:0], st.tline[:0]
	if st.retained() > poolKeepBytes {
		return // do not pin one huge body
	}
	select {
	case h.free <- st:
	default:
	}
}

// fail answers an InfluxDB-style error: JSON {"error"} plus the
// X-Influxdb-Error header that Influx clients print.
func (h *LineProtocol) fail(w http.ResponseWriter, status int, msg string, line int) {
	w.Header().Set("X-Influxdb-Error", msg)
	writeJSONError(w, status, msg, line)
}

// convert parses body and turns its rows into points named per the rule.
// String fields become text points in st.texts when keepText is set, and
// are skipped otherwise. It returns the points, the number of string
// fields skipped, and the first error as a *LineError.
func (st *lpState) convert(body []byte, mul, div, nowMs int64, keepText bool) ([]model.Point, int, error) {
	st.rows.Reset()
	st.labels.reset()
	if err := st.rows.Unmarshal(body); err != nil {
		return nil, 0, err
	}
	skipped := 0
	pts := st.pts[:0]
	for i := range st.rows.Rows {
		row := &st.rows.Rows[i]
		t := nowMs
		if row.HasTime {
			var err error
			if t, err = millisFromUnits(row.Timestamp, mul, div); err != nil {
				return nil, 0, &LineError{Line: row.Line, Err: err}
			}
		}
		for j := range row.Fields {
			f := &row.Fields[j]
			if f.Kind == LPString && !keepText {
				skipped++
				continue
			}
			// Names are cached by the raw series and field key: a series
			// met before costs one copy and one map lookup, not the rule.
			st.key = append(append(append(st.key[:0], row.SeriesKey...), ' '), f.Key...)
			e, ok := st.namer.lookupEntry(st.key)
			if !ok {
				nb := &st.namer
				nb.Reset()
				nb.Add(row.Measurement)
				for k := range row.Tags {
					nb.Add(row.Tags[k].Value)
				}
				nb.Add(f.Key)
				var err error
				if e, err = nb.rememberEntry(st.key); err != nil {
					return nil, 0, &LineError{Line: row.Line, Err: err}
				}
			}
			if !e.labelled && !st.labels.has(e) {
				ls, err := lpLabels(row, f.Key)
				if err != nil {
					return nil, 0, &LineError{Line: row.Line, Err: err}
				}
				st.labels.add(e, ls)
			}
			if f.Kind == LPString {
				x := UnescapeString(row.Str(f))
				if err := model.CheckText(x); err != nil {
					return nil, 0, &LineError{Line: row.Line, Err: fmt.Errorf("field %q: %w", f.Key, err)}
				}
				st.texts = append(st.texts, model.TextPoint{Tag: e.name, T: t, Text: x})
				st.tline = append(st.tline, int32(row.Line))
				continue
			}
			pts = append(pts, model.Point{Tag: e.name, T: t, V: f.Value})
			st.lines = append(st.lines, int32(row.Line))
		}
	}
	st.pts = pts
	return pts, skipped, nil
}

// Ping serves /ping: 204 with the version header Influx clients look for.
func (h *LineProtocol) Ping(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Influxdb-Version", "1.8.10-pith")
	w.Header().Set("X-Influxdb-Build", "OSS")
	w.WriteHeader(http.StatusNoContent)
}
