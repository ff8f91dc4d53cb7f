// Package promapi answers Prometheus's HTTP query API (/api/v1/query,
// /api/v1/query_range, /api/v1/labels, /api/v1/label/NAME/values,
// /api/v1/series, /api/v1/status/buildinfo) from Pith's store, so
// Grafana's built-in Prometheus datasource and promtool work against
// Pith unchanged. Queries run on the upstream PromQL engine over a
// storage.Queryable that maps every Pith tag to one series and answers
// *_over_time windows from the store's rollups (plan.go).
package promapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// Options tune the handler. Start from DefaultOptions.
type Options struct {
	Timeout            time.Duration // longest a query may run (the query's own timeout parameter may lower it)
	MaxSamples         int           // samples one query may hold in memory at once (the engine's limit)
	MaxRawSamples      int           // raw samples one series may read; more is an error naming the tag
	MaxPoints          int           // evaluation steps of a range query, as Prometheus's 11000
	MaxPushdownBuckets int           // rollup buckets one window plan may ask for; more falls back to raw samples
	LookbackDelta      time.Duration // how far back an instant selector looks for a sample
	Version            string        // reported by /api/v1/status/buildinfo
	MaxConcurrent      int           // queries (instant and range) evaluated at once
	MaxQueued          int           // queries waiting for a turn; more get 503 with Retry-After
	QueueWait          time.Duration // longest a query waits for a turn before 503
	Budget             Reserver      // memory budget answers are reserved from; nil reserves nothing
}

// DefaultOptions returns the options Pith serves with. The sample limits
// keep one query within about 150 MB on a small board, and two run at once.
func DefaultOptions() Options {
	return Options{
		Timeout:            2 * time.Minute,
		MaxSamples:         5_000_000,
		MaxRawSamples:      5_000_000,
		MaxPoints:          11_000,
		MaxPushdownBuckets: 1_000_000,
		LookbackDelta:      5 * time.Minute,
		Version:            "pith",
		MaxConcurrent:      defaultMaxConcurrent,
		MaxQueued:          defaultMaxQueued,
		QueueWait:          defaultQueueWait,
	}
}

// promVersion is the Prometheus version buildinfo claims: Grafana turns
// features on by it, and this is the engine version Pith embeds.
const promVersion = "3.0.1"

// Handler serves the API. It is safe for concurrent use.
type Handler struct {
	st     Store
	opts   Options
	log    *slog.Logger
	engine *promql.Engine
	admit  *admission // bounds the queries running and waiting
	// noPushdown makes every selector read raw samples; tests compare
	// the two paths with it.
	noPushdown bool
	// onPrepare, when set (by tests), sees each query's stats before it
	// runs.
	onPrepare func(*queryStats)
}

// New returns the handler over st. Mount it at each of the paths listed
// in the package comment (or at /api/v1/ beside them): it answers only
// those, plus /api/v1/metadata and /api/v1/query_exemplars (empty, which
// Grafana asks for), and a Prometheus-style 404 for any other path.
// Zero fields of opts take their DefaultOptions value.
func New(st Store, opts Options, log *slog.Logger) http.Handler {
	return NewHandler(st, opts, log)
}

// NewHandler is New returning the concrete type.
func NewHandler(st Store, opts Options, log *slog.Logger) *Handler {
	def := DefaultOptions()
	if opts.Timeout <= 0 {
		opts.Timeout = def.Timeout
	}
	if opts.MaxSamples <= 0 {
		opts.MaxSamples = def.MaxSamples
	}
	if opts.MaxRawSamples <= 0 {
		opts.MaxRawSamples = def.MaxRawSamples
	}
	if opts.MaxPoints <= 0 {
		opts.MaxPoints = def.MaxPoints
	}
	if opts.MaxPushdownBuckets <= 0 {
		opts.MaxPushdownBuckets = def.MaxPushdownBuckets
	}
	if opts.LookbackDelta <= 0 {
		opts.LookbackDelta = def.LookbackDelta
	}
	if opts.Version == "" {
		opts.Version = def.Version
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = def.MaxConcurrent
	}
	if opts.MaxQueued <= 0 {
		opts.MaxQueued = def.MaxQueued
	}
	if opts.QueueWait <= 0 {
		opts.QueueWait = def.QueueWait
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	eng := promql.NewEngine(promql.EngineOpts{
		Logger:               log.With("part", "promql"),
		MaxSamples:           opts.MaxSamples,
		Timeout:              opts.Timeout,
		LookbackDelta:        opts.LookbackDelta,
		EnableAtModifier:     true,
		EnableNegativeOffset: true,
	})
	return &Handler{st: st, opts: opts, log: log, engine: eng, admit: newAdmission(opts.MaxConcurrent, opts.MaxQueued, opts.QueueWait)}
}

// ServeHTTP routes by path; GET and POST (form) are both accepted.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, POST, HEAD")
		writeError(w, http.StatusMethodNotAllowed, errBadData, "method "+r.Method+" not allowed")
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, errBadData, "parse form: "+err.Error())
		return
	}
	p := r.URL.Path
	switch {
	case p == "/api/v1/query":
		if h.admit.enter(w, r) {
			defer h.admit.leave()
			h.query(w, r)
		}
	case p == "/api/v1/query_range":
		if h.admit.enter(w, r) {
			defer h.admit.leave()
			h.queryRange(w, r)
		}
	case p == "/api/v1/labels":
		h.labelNames(w, r)
	case strings.HasPrefix(p, "/api/v1/label/") && strings.HasSuffix(p, "/values"):
		h.labelValues(w, r, strings.TrimSuffix(strings.TrimPrefix(p, "/api/v1/label/"), "/values"))
	case p == "/api/v1/series":
		h.series(w, r)
	case p == "/api/v1/status/buildinfo":
		h.buildinfo(w)
	case p == "/api/v1/metadata":
		writeSuccess(w, []byte(`{}`))
	case p == "/api/v1/query_exemplars":
		writeSuccess(w, []byte(`[]`))
	default:
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+p)
	}
}

// prepare parses qs, rewrites count_over_time (rewriteCounts) and returns
// the queryable for it: pushdown is off when qs has a subquery, whose
// inner evaluation times the select hints do not give.
func (h *Handler) prepare(qs string) (string, parser.Expr, *queryable, error) {
	expr, err := parser.ParseExpr(qs)
	if err != nil {
		return "", nil, nil, err
	}
	q := &queryable{st: h.st, opts: &h.opts, pushdown: !h.noPushdown && !hasSubquery(expr), stats: &queryStats{}}
	if h.onPrepare != nil {
		h.onPrepare(q.stats)
	}
	if rewriteCounts(expr) {
		qs = expr.String()
	}
	return qs, expr, q, nil
}

func (h *Handler) timeout(r *http.Request) (context.Context, context.CancelFunc, error) {
	t := h.opts.Timeout
	if s := r.Form.Get("timeout"); s != "" {
		d, err := parseDuration(s)
		if err != nil {
			return nil, nil, fieldError("timeout", err)
		}
		if d > 0 && d < t {
			t = d
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), t)
	return ctx, cancel, nil
}

func (h *Handler) query(w http.ResponseWriter, r *http.Request) {
	ts := time.Now()
	if s := r.Form.Get("time"); s != "" {
		t, err := parseTime(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, errBadData, fieldError("time", err).Error())
			return
		}
		ts = t
	}
	qs, expr, q, err := h.prepare(r.Form.Get("query"))
	if err != nil {
		writeError(w, http.StatusBadRequest, errBadData, fieldError("query", err).Error())
		return
	}
	ctx, cancel, err := h.timeout(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, errBadData, err.Error())
		return
	}
	defer cancel()
	work, ok := h.reserveWork(w, expr, ts.Add(-h.opts.LookbackDelta).UnixMilli(), ts.UnixMilli(), 1)
	if !ok {
		return
	}
	if work > 0 {
		defer h.opts.Budget.Release(work)
	}
	qry, err := h.engine.NewInstantQuery(ctx, q, nil, qs, ts)
	if err != nil {
		writeError(w, http.StatusBadRequest, errBadData, fieldError("query", err).Error())
		return
	}
	h.run(ctx, w, qry, q, work)
}

func (h *Handler) queryRange(w http.ResponseWriter, r *http.Request) {
	start, err := parseTime(r.Form.Get("start"))
	if err != nil {
		writeError(w, http.StatusBadRequest, errBadData, fieldError("start", err).Error())
		return
	}
	end, err := parseTime(r.Form.Get("end"))
	if err != nil {
		writeError(w, http.StatusBadRequest, errBadData, fieldError("end", err).Error())
		return
	}
	if end.Before(start) {
		writeError(w, http.StatusBadRequest, errBadData, "invalid parameter \"end\": end timestamp must not be before start time")
		return
	}
	step, err := parseDuration(r.Form.Get("step"))
	if err != nil {
		writeError(w, http.StatusBadRequest, errBadData, fieldError("step", err).Error())
		return
	}
	if step <= 0 {
		writeError(w, http.StatusBadRequest, errBadData, "invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer")
		return
	}
	if end.Sub(start)/step >= time.Duration(h.opts.MaxPoints) {
		writeError(w, http.StatusBadRequest, errBadData, "exceeded maximum resolution of "+itoa(h.opts.MaxPoints)+" points per timeseries. Try decreasing the query resolution (?step=XX)")
		return
	}
	qs, expr, q, err := h.prepare(r.Form.Get("query"))
	if err != nil {
		writeError(w, http.StatusBadRequest, errBadData, fieldError("query", err).Error())
		return
	}
	ctx, cancel, err := h.timeout(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, errBadData, err.Error())
		return
	}
	defer cancel()
	work, ok := h.reserveWork(w, expr, start.Add(-h.opts.LookbackDelta).UnixMilli(), end.UnixMilli(), int64(end.Sub(start)/step)+1)
	if !ok {
		return
	}
	if work > 0 {
		defer h.opts.Budget.Release(work)
	}
	qry, err := h.engine.NewRangeQuery(ctx, q, nil, qs, start, end, step)
	if err != nil {
		writeError(w, http.StatusBadRequest, errBadData, fieldError("query", err).Error())
		return
	}
	h.run(ctx, w, qry, q, work)
}

// run executes qry, which holds work bytes of the budget, and writes its
// result, or the error with the status Prometheus gives it.
func (h *Handler) run(ctx context.Context, w http.ResponseWriter, qry promql.Query, q *queryable, work int64) {
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		var (
			eCancel  promql.ErrQueryCanceled
			eTimeout promql.ErrQueryTimeout
			eStorage promql.ErrStorage
		)
		switch {
		case errors.As(res.Err, &eCancel):
			writeError(w, 499, "canceled", res.Err.Error())
		case errors.As(res.Err, &eTimeout), errors.Is(res.Err, context.DeadlineExceeded):
			writeError(w, http.StatusServiceUnavailable, "timeout", res.Err.Error())
		case errors.Is(res.Err, errTooManySamples):
			writeError(w, http.StatusUnprocessableEntity, "execution", res.Err.Error())
		case errors.As(res.Err, &eStorage):
			writeError(w, http.StatusInternalServerError, "internal", res.Err.Error())
		default:
			writeError(w, http.StatusUnprocessableEntity, "execution", res.Err.Error())
		}
		return
	}
	if h.log.Enabled(ctx, slog.LevelDebug) {
		q.stats.mu.Lock()
		h.log.Debug("promql query", "query", qry.String(), "rollup_selects", q.stats.rollupSelects,
			"raw_selects", q.stats.rawSelects, "raw_samples", q.stats.rawSamples)
		q.stats.mu.Unlock()
	}
	n, ok := h.reserveAnswer(w, res.Value, work)
	if !ok {
		return
	}
	if n > 0 {
		defer h.opts.Budget.Release(n)
	}
	buf := appendResult(make([]byte, 0, 16<<10), res.Value)
	writeSuccessWarnings(w, buf, res.Warnings)
}
