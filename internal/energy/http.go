package energy

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/pith-historian/pith/internal/store"
)

// Options configure the HTTP handlers.
type Options struct {
	Queries  Queries
	Location *time.Location          // the site's zone for local days; nil: UTC
	Tariffs  []*Tariff               // by name; the first is the default
	Unit     func(tag string) string // a tag's engineering unit, "" when unknown; nil: none known
	Log      *slog.Logger
}

// Handler serves GET /api/v1/energy, /api/v1/histogram and /api/v1/report.
type Handler struct {
	o   Options
	mux *http.ServeMux
}

// Paths are the routes Handler serves, for the agent to mount.
var Paths = []string{"/api/v1/energy", "/api/v1/histogram", "/api/v1/report"}

// NewHandler returns the energy, histogram and report endpoints.
func NewHandler(o Options) *Handler {
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Unit == nil {
		o.Unit = func(string) string { return "" }
	}
	h := &Handler{o: o, mux: http.NewServeMux()}
	h.mux.HandleFunc("/api/v1/energy", h.energy)
	h.mux.HandleFunc("/api/v1/histogram", h.histogram)
	h.mux.HandleFunc("/api/v1/report", h.report)
	return h
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeErr(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed (allowed: GET, HEAD)")
		return
	}
	h.mux.ServeHTTP(w, r)
}

type badParam string

func (e badParam) Error() string { return string(e) }

func writeErr(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (h *Handler) fail(w http.ResponseWriter, err error) {
	var bp badParam
	switch {
	case errors.As(err, &bp):
		writeErr(w, http.StatusBadRequest, err.Error())
	case errors.Is(err, store.ErrUnknownTag):
		writeErr(w, http.StatusNotFound, err.Error())
	case errors.Is(err, store.ErrClosed):
		writeErr(w, http.StatusServiceUnavailable, err.Error())
	default:
		h.o.Log.Error("energy query failed", "err", err)
		writeErr(w, http.StatusInternalServerError, err.Error())
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// period parses from and to (Unix ms), or month=YYYY-MM in the zone.
func period(q url.Values, loc *time.Location) (int64, int64, error) {
	if m := q.Get("month"); m != "" {
		t, err := time.ParseInLocation("2006-01", m, loc)
		if err != nil {
			return 0, 0, badParam("parameter month must be YYYY-MM, got " + strconv.Quote(m))
		}
		return t.UnixMilli(), t.AddDate(0, 1, 0).UnixMilli(), nil
	}
	from, err := msParam(q, "from")
	if err != nil {
		return 0, 0, err
	}
	to, err := msParam(q, "to")
	if err != nil {
		return 0, 0, err
	}
	if to <= from {
		return 0, 0, badParam("parameter to must be greater than from")
	}
	return from, to, nil
}

func msParam(q url.Values, name string) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, badParam("missing parameter " + name + " (Unix milliseconds)")
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, badParam("parameter " + name + " must be integer Unix milliseconds, got " + strconv.Quote(v))
	}
	return n, nil
}

func (h *Handler) location(q url.Values) (*time.Location, error) {
	tz := q.Get("tz")
	if tz == "" {
		return h.o.Location, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, badParam("parameter tz: unknown time zone " + strconv.Quote(tz))
	}
	return loc, nil
}

// tariff returns the named tariff, the default one for "", or nil for
// "none" or when no tariff is configured.
func (h *Handler) tariff(q url.Values) (*Tariff, error) {
	name := q.Get("tariff")
	switch {
	case name == "none":
		return nil, nil
	case name == "":
		if len(h.o.Tariffs) == 0 {
			return nil, nil
		}
		return h.o.Tariffs[0], nil
	}
	for _, t := range h.o.Tariffs {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, badParam("parameter tariff: no tariff named " + strconv.Quote(name))
}

// source reads a tag as energy: its kind and scale from its unit unless
// the kind and scale parameters say otherwise.
func (h *Handler) source(q url.Values, tag string) (Source, error) {
	src := SourceFor(tag, h.o.Unit(tag))
	src.Until = time.Now().UnixMilli()
	switch k := q.Get("kind"); k {
	case "":
	case "power":
		src.Kind = Power
	case "counter":
		src.Kind = Counter
	default:
		return src, badParam("parameter kind must be power or counter, got " + strconv.Quote(k))
	}
	if v := q.Get("scale"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f == 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return src, badParam("parameter scale must be a non-zero number, got " + strconv.Quote(v))
		}
		src.Scale = f
	}
	return src, nil
}

// num keeps JSON numbers short and exact enough for money and kWh.
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, round(float64(n)), 'g', -1, 64), nil
}

// round keeps nine significant decimals: sums of rollup means carry float
// noise below that.
func round(f float64) float64 {
	if f == 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return f
	}
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 9, 64), 64)
	return v
}

type bucketJSON struct {
	T        int64 `json:"t"`
	End      int64 `json:"end"`
	KWh      *num  `json:"kwh"`
	Import   num   `json:"import_kwh"`
	Export   num   `json:"export_kwh"`
	Cost     *num  `json:"cost,omitempty"`
	Coverage num   `json:"coverage"`
}

func bucketOut(b Bucket, priced bool) bucketJSON {
	out := bucketJSON{T: b.Start, End: b.End, Import: num(b.Import), Export: num(b.Export)}
	if b.WithData > 0 {
		k := num(b.KWh)
		out.KWh = &k
	}
	if priced {
		c := num(b.Cost)
		out.Cost = &c
	}
	if b.Pieces > 0 {
		out.Coverage = num(float64(b.WithData) / float64(b.Pieces))
	}
	return out
}

// energy serves GET /api/v1/energy.
func (h *Handler) energy(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	err := func() error {
		tag := q.Get("tag")
		if tag == "" {
			return badParam("missing parameter tag")
		}
		loc, err := h.location(q)
		if err != nil {
			return err
		}
		from, to, err := period(q, loc)
		if err != nil {
			return err
		}
		unit := Day
		if v := q.Get("bucket"); v != "" {
			if unit, err = ParseUnit(v); err != nil {
				return badParam("parameter bucket: " + err.Error())
			}
		}
		src, err := h.source(q, tag)
		if err != nil {
			return err
		}
		tr, err := h.tariff(q)
		if err != nil {
			return err
		}
		edges, err := Edges(from, to, unit, loc)
		if err != nil {
			return badParam(err.Error())
		}
		bs, err := Compute(h.o.Queries, src, edges, loc, tr)
		if err != nil {
			return err
		}
		var total Bucket
		out := make([]bucketJSON, len(bs))
		for i, b := range bs {
			out[i] = bucketOut(b, tr != nil)
			total.KWh += b.KWh
			total.Import += b.Import
			total.Export += b.Export
			total.Cost += b.Cost
			total.Pieces += b.Pieces
			total.WithData += b.WithData
		}
		total.Start, total.End = edges[0], edges[len(edges)-1]
		resp := map[string]any{"tag": tag, "kind": src.Kind.String(), "scale": src.Scale, "bucket": unit.String(),
			"timezone": loc.String(), "buckets": out, "total": bucketOut(total, tr != nil)}
		if tr != nil {
			resp["tariff"], resp["currency"] = tr.Name, tr.Currency
		}
		writeJSON(w, resp)
		return nil
	}()
	if err != nil {
		h.fail(w, err)
	}
}

// histogram serves GET /api/v1/histogram.
func (h *Handler) histogram(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	err := func() error {
		tag := q.Get("tag")
		if tag == "" {
			return badParam("missing parameter tag")
		}
		from, to, err := period(q, h.o.Location)
		if err != nil {
			return err
		}
		o := HistogramOptions{Bins: 10}
		if v := q.Get("bins"); v != "" {
			if o.Bins, err = strconv.Atoi(v); err != nil || o.Bins < 1 || o.Bins > 1000 {
				return badParam("parameter bins must be an integer from 1 to 1000, got " + strconv.Quote(v))
			}
		}
		if v := q.Get("res"); v != "" {
			if o.Res, err = strconv.ParseInt(v, 10, 64); err != nil || o.Res < 1000 {
				return badParam("parameter res must be integer milliseconds of at least 1000, got " + strconv.Quote(v))
			}
		}
		lo, hi := q.Get("min"), q.Get("max")
		if (lo == "") != (hi == "") {
			return badParam("parameters min and max go together")
		}
		if lo != "" {
			o.Range = true
			o.Lo, err = strconv.ParseFloat(lo, 64)
			if err != nil || math.IsInf(o.Lo, 0) || math.IsNaN(o.Lo) {
				return badParam("parameter min must be a number, got " + strconv.Quote(lo))
			}
			o.Hi, err = strconv.ParseFloat(hi, 64)
			if err != nil || !(o.Hi > o.Lo) || math.IsInf(o.Hi, 0) {
				return badParam("parameter max must be a number greater than min, got " + strconv.Quote(hi))
			}
		}
		hg, err := ComputeHistogram(h.o.Queries, tag, from, to, o)
		if err != nil {
			if errors.Is(err, store.ErrUnknownTag) {
				return err
			}
			return badParam(err.Error())
		}
		type binJSON struct {
			Lo num   `json:"lo"`
			Hi num   `json:"hi"`
			Ms int64 `json:"ms"`
		}
		bins := make([]binJSON, len(hg.Ms))
		for i := range bins {
			bins[i] = binJSON{num(hg.Edges[i]), num(hg.Edges[i+1]), hg.Ms[i]}
		}
		writeJSON(w, map[string]any{"tag": tag, "from": from, "to": to, "res": hg.Res, "bins": bins,
			"no_data_ms": hg.NoData, "exact_slots": hg.Exact, "split_slots": hg.Split, "unit": h.o.Unit(tag)})
		return nil
	}()
	if err != nil {
		h.fail(w, err)
	}
}

// report serves GET /api/v1/report as JSON or, with format=csv, CSV.
func (h *Handler) report(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	err := func() error {
		loc, err := h.location(q)
		if err != nil {
			return err
		}
		from, to, err := period(q, loc)
		if err != nil {
			return err
		}
		format := q.Get("format")
		if format != "" && format != "json" && format != "csv" {
			return badParam("parameter format must be json or csv, got " + strconv.Quote(format))
		}
		var srcs []Source
		for _, tag := range q["energy"] {
			src, err := h.source(url.Values{}, tag)
			if err != nil {
				return err
			}
			srcs = append(srcs, src)
		}
		stats := q["tag"]
		if len(srcs)+len(stats) == 0 {
			return badParam("name at least one tag: energy=T for energy, tag=T for minimum, mean and maximum")
		}
		if len(srcs)+len(stats) > 50 {
			return badParam("at most 50 tags in one report")
		}
		tr, err := h.tariff(q)
		if err != nil {
			return err
		}
		if days := (to - from) / (24 * hourMs); days > 3*366 {
			return badParam("a report covers at most three years")
		}
		rep, err := ComputeReport(h.o.Queries, srcs, stats, from, to, loc, tr)
		if err != nil {
			return err
		}
		if format == "csv" {
			w.Header().Set("Content-Type", "text/csv; charset=utf-8")
			name := "pith-report-" + time.UnixMilli(rep.From).In(loc).Format("2006-01-02") + ".csv"
			w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
			return WriteReportCSV(w, rep, loc, tr)
		}
		writeJSON(w, reportJSON(rep, loc, tr))
		return nil
	}()
	if err != nil {
		h.fail(w, err)
	}
}

func optNum(f float64, ok bool) *num {
	if !ok {
		return nil
	}
	n := num(f)
	return &n
}

// change returns the relative change from prev to cur in percent.
func change(cur, prev float64) (float64, bool) {
	if prev == 0 {
		return 0, false
	}
	return (cur - prev) / math.Abs(prev) * 100, true
}

func reportJSON(rep *Report, loc *time.Location, tr *Tariff) map[string]any {
	type energyJSON struct {
		Tag       string       `json:"tag"`
		Kind      string       `json:"kind"`
		Days      []bucketJSON `json:"days"`
		KWh       num          `json:"kwh"`
		Cost      *num         `json:"cost,omitempty"`
		PrevKWh   num          `json:"previous_kwh"`
		PrevCost  *num         `json:"previous_cost,omitempty"`
		ChangePct *num         `json:"change_pct"`
		PeakKW    *num         `json:"peak_kw"`
		PeakAt    *int64       `json:"peak_at"`
	}
	type statJSON struct {
		Tag      string `json:"tag"`
		Min      *num   `json:"min"`
		Mean     *num   `json:"mean"`
		Max      *num   `json:"max"`
		PrevMin  *num   `json:"previous_min"`
		PrevMean *num   `json:"previous_mean"`
		PrevMax  *num   `json:"previous_max"`
	}
	en := []energyJSON{}
	for _, e := range rep.Energy {
		j := energyJSON{Tag: e.Tag, Kind: e.Kind.String(), KWh: num(e.KWh), PrevKWh: num(e.PrevKWh)}
		for _, d := range e.Days {
			j.Days = append(j.Days, bucketOut(d, tr != nil))
		}
		if tr != nil {
			j.Cost, j.PrevCost = optNum(e.Cost, true), optNum(e.PrevCost, true)
		}
		j.ChangePct = optNum(change(e.KWh, e.PrevKWh))
		if e.HasPeak {
			j.PeakKW, j.PeakAt = optNum(e.PeakKW, true), &e.PeakAt
		}
		en = append(en, j)
	}
	st := []statJSON{}
	for _, s := range rep.Stats {
		st = append(st, statJSON{Tag: s.Tag, Min: optNum(s.Min, s.Has), Mean: optNum(s.Mean, s.Has), Max: optNum(s.Max, s.Has),
			PrevMin: optNum(s.PrevMin, s.PrevHas), PrevMean: optNum(s.PrevMean, s.PrevHas), PrevMax: optNum(s.PrevMax, s.PrevHas)})
	}
	out := map[string]any{"from": rep.From, "to": rep.To, "previous_from": rep.PrevFrom, "previous_to": rep.PrevTo,
		"timezone": loc.String(), "days": rep.Days, "energy": en, "stats": st}
	if tr != nil {
		out["tariff"], out["currency"] = tr.Name, tr.Currency
	}
	return out
}

func fmtNum(f float64) string { return strconv.FormatFloat(round(f), 'f', -1, 64) }

// WriteReportCSV writes the report as one table a spreadsheet opens: a row
// per day with each energy tag's kWh (and cost), then totals, the previous
// period, the change and the peaks, then a table of the other tags.
func WriteReportCSV(w io.Writer, rep *Report, loc *time.Location, tr *Tariff) error {
	c := newCSVWriter(w)
	c.text("date")
	for _, e := range rep.Energy {
		c.text(e.Tag + " kWh")
		if tr != nil {
			c.text(e.Tag + " cost " + tr.Currency)
		}
	}
	c.end()
	row := func(label string, f func(e EnergyReport) (string, string)) {
		c.text(label)
		for _, e := range rep.Energy {
			a, b := f(e)
			c.num(a)
			if tr != nil {
				c.num(b)
			}
		}
		c.end()
	}
	for i, d := range rep.Days {
		day := time.UnixMilli(d).In(loc).Format("2006-01-02")
		row(day, func(e EnergyReport) (string, string) {
			b := e.Days[i]
			if b.WithData == 0 {
				return "", fmtNum(b.Cost)
			}
			return fmtNum(b.KWh), fmtNum(b.Cost)
		})
	}
	row("total", func(e EnergyReport) (string, string) { return fmtNum(e.KWh), fmtNum(e.Cost) })
	row("previous period", func(e EnergyReport) (string, string) { return fmtNum(e.PrevKWh), fmtNum(e.PrevCost) })
	row("change %", func(e EnergyReport) (string, string) {
		a, ok := change(e.KWh, e.PrevKWh)
		b, ok2 := change(e.Cost, e.PrevCost)
		s1, s2 := "", ""
		if ok {
			s1 = strconv.FormatFloat(a, 'f', 1, 64)
		}
		if ok2 {
			s2 = strconv.FormatFloat(b, 'f', 1, 64)
		}
		return s1, s2
	})
	row("peak kW", func(e EnergyReport) (string, string) {
		if !e.HasPeak {
			return "", ""
		}
		return fmtNum(e.PeakKW), ""
	})
	c.text("peak at")
	for _, e := range rep.Energy {
		at := ""
		if e.HasPeak {
			at = time.UnixMilli(e.PeakAt).In(loc).Format("2006-01-02 15:04:05")
		}
		c.text(at)
		if tr != nil {
			c.text("")
		}
	}
	c.end()
	if len(rep.Stats) > 0 {
		c.end()
		for _, s := range []string{"tag", "min", "mean", "max", "previous min", "previous mean", "previous max"} {
			c.text(s)
		}
		c.end()
		opt := func(f float64, ok bool) string {
			if !ok {
				return ""
			}
			return fmtNum(f)
		}
		for _, s := range rep.Stats {
			c.text(s.Tag).num(opt(s.Min, s.Has)).num(opt(s.Mean, s.Has)).num(opt(s.Max, s.Has)).
				num(opt(s.PrevMin, s.PrevHas)).num(opt(s.PrevMean, s.PrevHas)).num(opt(s.PrevMax, s.PrevHas))
			c.end()
		}
	}
	return c.flush()
}

var _ http.Handler = (*Handler)(nil)
