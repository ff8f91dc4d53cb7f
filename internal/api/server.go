// Package api serves Pith's native HTTP API (/api/v1/...): CSV import, data
// queries, latest values, the tag list and control writes. The contract is
// docs/api.md; every error is JSON {"error": "..."}.
package api

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/ingest"
)

// Options tune a Server. Start from DefaultOptions.
type Options struct {
	MaxImportBytes         int64         // largest import body on the wire (the compressed size when gzipped)
	MaxImportInflatedBytes int64         // largest import body after gunzip, against gzip bombs
	ImportBatch            int           // points handed to Tx.Add at a time (bounds import memory)
	MaxConcurrentImports   int           // imports parsed at once; more wait their turn (bounds memory and CPU)
	DefaultPoints          int           // buckets of /api/v1/data when points is not given
	MaxPoints              int           // largest points parameter accepted
	MaxControlBytes        int64         // largest /api/v1/control body
	ControlTimeout         time.Duration // how long a control write may wait for the device
	Controller             Controller    // nil: /api/v1/control answers 404 "no control path"
	Meta                   MetaFunc      // nil: /api/v1/tags lists names and time ranges only
	Deleter                Deleter       // nil: DELETE /api/v1/data uses the Store when it can delete, else 501
	Current                Current       // nil: /api/v1/latest answers from the Store alone
}

// DefaultOptions returns the options Pith serves with when the config says nothing.
func DefaultOptions() Options {
	return Options{
		MaxImportBytes:         1 << 30,
		MaxImportInflatedBytes: 8 << 30,
		ImportBatch:            64 << 10,
		MaxConcurrentImports:   4,
		DefaultPoints:          1000,
		MaxPoints:              100_000,
		MaxControlBytes:        4 << 10,
		ControlTimeout:         10 * time.Second,
	}
}

// Server holds the API handlers. It is safe for concurrent use.
type Server struct {
	st   Store
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux

	importSlots chan struct{} // one token per running import

	bufs    bufPool
	csv     sync.Pool // *ingest.CSVReader: each holds a 256 KiB buffer
	batches sync.Pool // *[]store.Point of cap opts.ImportBatch
	gzips   sync.Pool // *gzip.Reader

	// latestOrder sorts the store's latest values by tag as the last read
	// of every tag found them (storedOrder).
	latestOrder atomic.Pointer[[]int32]
}

// NewServer returns a Server answering from st. Zero or negative fields of
// opts take their DefaultOptions value.
func NewServer(st Store, opts Options, log *slog.Logger) *Server {
	def := DefaultOptions()
	if opts.MaxImportBytes <= 0 {
		opts.MaxImportBytes = def.MaxImportBytes
	}
	if opts.MaxImportInflatedBytes <= 0 {
		opts.MaxImportInflatedBytes = def.MaxImportInflatedBytes
	}
	if opts.ImportBatch <= 0 {
		opts.ImportBatch = def.ImportBatch
	}
	if opts.MaxConcurrentImports <= 0 {
		opts.MaxConcurrentImports = def.MaxConcurrentImports
	}
	if opts.MaxPoints <= 0 {
		opts.MaxPoints = def.MaxPoints
	}
	if opts.DefaultPoints <= 0 {
		opts.DefaultPoints = def.DefaultPoints
	}
	opts.DefaultPoints = min(opts.DefaultPoints, opts.MaxPoints)
	if opts.MaxControlBytes <= 0 {
		opts.MaxControlBytes = def.MaxControlBytes
	}
	if opts.ControlTimeout <= 0 {
		opts.ControlTimeout = def.ControlTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{st: st, opts: opts, log: log, mux: http.NewServeMux(),
		importSlots: make(chan struct{}, opts.MaxConcurrentImports)}
	s.csv.New = func() any { return ingest.NewCSVReader(nil) }
	s.batches.New = func() any {
		b := make([]model.Point, 0, opts.ImportBatch)
		return &b
	}
	// Methods are checked in the handlers rather than with method patterns
	// so that a wrong method also gets a JSON error.
	s.mux.HandleFunc("/api/v1/import", s.handleImport)
	s.mux.HandleFunc("/api/v1/data", s.routeData) // GET: data.go, DELETE: delete.go
	s.mux.HandleFunc("/api/v1/latest", s.handleLatest)
	s.mux.HandleFunc("/api/v1/tags", s.handleTags)
	s.mux.HandleFunc("/api/v1/control", s.handleControl)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	})
	return s
}

// Handler returns the HTTP handler of the API. It serves the /api/v1/
// endpoints and answers a JSON 404 for any other path, so mount it under
// "/api/" beside other handlers.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			s.mux.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		s.mux.ServeHTTP(sw, r)
		s.log.LogAttrs(r.Context(), slog.LevelDebug, "http request",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.String("remote", r.RemoteAddr),
			slog.Int("status", sw.status),
			slog.Int64("bytes", sw.bytes),
			slog.Duration("took", time.Since(start)))
	})
}

// statusWriter records what the access log reports.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// allowMethod answers 405 with an Allow header unless r uses one of
// methods. HEAD is accepted wherever GET is.
func allowMethod(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m || (m == http.MethodGet && r.Method == http.MethodHead) {
			return true
		}
	}
	allow := strings.Join(methods, ", ")
	if strings.Contains(allow, http.MethodGet) {
		allow += ", " + http.MethodHead
	}
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed (allowed: "+allow+")")
	return false
}
