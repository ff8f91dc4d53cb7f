package influxql

import (
	"compress/gzip"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/store"
)

// Handler serves InfluxDB 1.x's /query: GET or POST with q (the
// statements), db and rp (ignored: Pith has one namespace), epoch (ns, u,
// µ, ms, s, m, h; RFC 3339 strings without it) and the answer as JSON,
// or CSV for Accept: application/csv or text/csv.
type Handler struct {
	eng *Engine
	log *slog.Logger
	now func() time.Time
}

// NewHandler returns the /query handler over eng. now is the clock now()
// reads (time.Now when nil).
func NewHandler(eng *Engine, now func() time.Time, log *slog.Logger) *Handler {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	return &Handler{eng: eng, log: log, now: now}
}

// ServeHTTP answers one request. A query that does not parse is refused
// whole with 400 {"error": "error parsing query: ..."}; a statement Pith
// does not answer carries its error in its result, with status 200, as
// InfluxDB does for statements that fail to run.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Influxdb-Version", "1.8.10-pith")
	w.Header().Set("X-Influxdb-Build", "OSS")
	useCSV := wantsCSV(r)
	if r.Method != http.MethodGet && r.Method != http.MethodPost && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD, POST")
		h.fail(w, useCSV, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
		return
	}
	mul, div, ok := epochScale(r.FormValue("epoch"))
	if !ok {
		h.fail(w, useCSV, http.StatusBadRequest, "invalid epoch "+r.FormValue("epoch")+": want ns, u, µ, ms, s, m or h")
		return
	}
	f := formatter{mul: mul, div: div}
	q := r.FormValue("q")
	if strings.TrimSpace(q) == "" {
		h.fail(w, useCSV, http.StatusBadRequest, `missing required parameter "q"`)
		return
	}
	stmts, err := Parse(q, h.now())
	if err != nil {
		h.fail(w, useCSV, http.StatusBadRequest, "error parsing query: "+err.Error())
		return
	}
	ans := h.eng.Execute(r.Context(), stmts)
	defer ans.Release()
	if ans.Busy {
		w.Header().Set("Retry-After", "2")
		h.fail(w, useCSV, http.StatusServiceUnavailable, errBusy{}.Error())
		return
	}
	if ans.Failed != nil {
		status := http.StatusInternalServerError
		if errors.Is(ans.Failed, store.ErrClosed) {
			status = http.StatusServiceUnavailable
		} else {
			h.log.Error("influxql query failed", "err", ans.Failed)
		}
		h.fail(w, useCSV, status, "query failed: "+ans.Failed.Error())
		return
	}
	results := ans.Results
	for _, res := range results {
		if res.Err != "" {
			h.log.Debug("influxql statement refused", "statement", res.StatementID, "err", res.Err)
		}
	}
	var body []byte
	if useCSV {
		w.Header().Set("Content-Type", "application/csv")
		body = f.CSV(results)
	} else {
		w.Header().Set("Content-Type", "application/json")
		body = f.JSON(results)
	}
	if len(body) >= gzipMinBytes && acceptsGzip(r) {
		// Answers of a day of buckets compress tenfold; InfluxDB
		// compresses them too, and Grafana asks for it.
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Vary", "Accept-Encoding")
		w.WriteHeader(http.StatusOK)
		zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		zw.Write(body)
		zw.Close()
		return
	}
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// gzipMinBytes is the smallest answer sent compressed to a client that
// accepts gzip.
const gzipMinBytes = 1024

// acceptsGzip reports whether the request's Accept-Encoding allows gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			return strings.TrimSpace(params) != "q=0"
		}
	}
	return false
}

// fail writes a request-level error in InfluxDB's shape.
func (h *Handler) fail(w http.ResponseWriter, useCSV bool, status int, msg string) {
	if useCSV {
		w.Header().Set("Content-Type", "application/csv")
		w.WriteHeader(status)
		w.Write(formatter{}.CSV([]Result{{Err: msg}}))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Influxdb-Error", msg)
	w.WriteHeader(status)
	w.Write(append(append([]byte(`{"error":`), jsonString(msg)...), "}\n"...))
}

func jsonString(s string) []byte {
	return formatter{}.appendValue(nil, stringV(s))
}

// wantsCSV reports whether the Accept header asks for CSV before JSON.
func wantsCSV(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/csv", "text/csv":
			return true
		case "application/json", "*/*", "application/*":
			return false
		}
	}
	return false
}
