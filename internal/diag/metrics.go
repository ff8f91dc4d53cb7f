package diag

import (
	"bufio"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// promName turns a system tag name into a Prometheus metric name:
// "pith.sys.archive.pending" -> "pith_sys_archive_pending", counters
// getting the conventional "_total" suffix.
func promName(m Metric) string {
	n := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, m.Name)
	if m.Counter {
		n += "_total"
	}
	return n
}

// WritePrometheus writes metrics in the Prometheus text exposition format
// (version 0.0.4). Metrics without a value yet (a rate before its second
// reading) are left out rather than served as NaN.
func WritePrometheus(w io.Writer, ms []Metric) error {
	bw := bufio.NewWriter(w)
	var num []byte
	for _, m := range ms {
		if math.IsNaN(m.Value) {
			continue
		}
		n := promName(m)
		typ := "gauge"
		if m.Counter {
			typ = "counter"
		}
		bw.WriteString("# HELP " + n + " " + escapeHelp(m.Help) + " (" + m.Unit + ")\n")
		bw.WriteString("# TYPE " + n + " " + typ + "\n")
		bw.WriteString(n)
		bw.WriteByte(' ')
		num = strconv.AppendFloat(num[:0], m.Value, 'g', -1, 64)
		bw.Write(num)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// escapeHelp escapes a HELP text as the format requires.
func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

// Handler serves GET /metrics (Prometheus text format) and the probes
// GET /-/healthy (200 while the process answers) and GET /-/ready (200
// once Start ran and until Stop, else 503). Mount it at "/metrics" and
// "/-/".
func (c *Collector) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", c.serveMetrics)
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, r *http.Request) {
		if !getOnly(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "Pith is Healthy.\n")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, r *http.Request) {
		if !getOnly(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !c.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "Pith is not ready.\n")
			return
		}
		io.WriteString(w, "Pith is Ready.\n")
	})
	return mux
}

func getOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

func (c *Collector) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if !getOnly(w, r) {
		return
	}
	// Without running clocks (a collector never started) the scrape takes
	// its own reading, so /metrics is never empty.
	if !c.hasReading() {
		c.Collect(true)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	WritePrometheus(w, c.Metrics())
}

// CountRequests wraps h so that every answered request counts in
// pith.sys.http.requests_per_s and every 5xx answer in pith.sys.http.errors.
// Wrap the server's root handler once.
func (c *Collector) CountRequests(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &codeWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		c.httpRequests.Add(1)
		if sw.code >= 500 {
			c.httpErrors.Add(1)
		}
	})
}

// codeWriter records the status code of an answer.
type codeWriter struct {
	http.ResponseWriter
	code int
}

func (w *codeWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach Flush on the real writer, which
// the streaming FREEZE answer needs.
func (w *codeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
