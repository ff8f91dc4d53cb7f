// Package web serves Pith's dashboard: embedded static pages (plain
// JavaScript modules and a vendored uPlot, no build step), a server-sent
// events stream of current values at /api/v1/live, and the public display
// page at /display.
//
// The pages read data only through the HTTP API (/api/v1/data, /latest,
// /tags) and this package's live stream; they render every data string as
// text. Every response carries a strict Content-Security-Policy: scripts
// and styles only from this origin, no inline script, no eval, no frames.
package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ContentSecurityPolicy is sent with every response of the package. It
// allows nothing but same-origin scripts, styles, images and fetches, so an
// injected tag name can neither run script nor load anything.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; " +
	"img-src 'self' data: blob:; connect-src 'self'; manifest-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Default option values.
const (
	defaultPollInterval  = time.Second            // Source polling when no Table pushes changes
	defaultFlushInterval = 500 * time.Millisecond // at most two live messages per second per client
	defaultHeartbeat     = 15 * time.Second       // SSE comment keeping proxies from closing idle streams
	defaultMaxStreams    = 64                     // concurrent live streams; more get 503
	defaultDisplayPoints = 120                    // sparkline buckets of the public display
)

// Options tune a Server. Start from DefaultOptions.
type Options struct {
	// Source answers the live stream's snapshot and, when Table is nil, is
	// polled every PollInterval for changes. Required for /api/v1/live.
	Source Source
	// Table, when set, pushes changes to the live stream instead of
	// polling (the tag table in Coalesce mode) and answers its snapshot.
	Table Table
	// History answers the sparklines of the public display. Required for
	// /display/data when Display is set.
	History History
	// Display configures the public display page; nil serves 404 at
	// /display.
	Display       *DisplayConfig
	PollInterval  time.Duration // how often Source is polled when Table is nil
	FlushInterval time.Duration // shortest time between two live messages to one client
	Heartbeat     time.Duration // SSE comment interval on a quiet stream
	MaxStreams    int           // concurrent live streams; more are refused with 503
	// Now is the clock of the live stream's "now" (the pages' ages); nil
	// is time.Now. Tests fix it for screenshots.
	Now func() time.Time
}

// DefaultOptions returns the options the dashboard runs with when the
// config says nothing. Source, Table, History and Display are left nil.
func DefaultOptions() Options {
	return Options{
		PollInterval:  defaultPollInterval,
		FlushInterval: defaultFlushInterval,
		Heartbeat:     defaultHeartbeat,
		MaxStreams:    defaultMaxStreams,
	}
}

// Server serves the dashboard. It is safe for concurrent use.
type Server struct {
	opts    Options
	log     *slog.Logger
	assets  map[string]*asset
	display []byte // the public display's config as JSON, nil when none
	dcache  displayCache
	streams chan struct{}
	done    chan struct{}
	closeMu sync.Once
}

// New returns a dashboard server. Zero fields of opts take their
// DefaultOptions value. It fails when the display configuration is
// invalid.
func New(opts Options, log *slog.Logger) (*Server, error) {
	def := DefaultOptions()
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = def.PollInterval
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = def.FlushInterval
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = def.Heartbeat
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = def.MaxStreams
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, log: log, streams: make(chan struct{}, opts.MaxStreams), done: make(chan struct{})}
	var err error
	if s.assets, err = loadAssets(); err != nil {
		return nil, err
	}
	if opts.Display != nil {
		if opts.History == nil || opts.Source == nil {
			return nil, errors.New("configure display: Options.Source and Options.History are required")
		}
		if s.display, err = opts.Display.encode(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Close ends every open live stream and refuses new ones. Call it when the
// HTTP server starts shutting down (context.AfterFunc(ctx, s.Close)):
// streams never end by themselves, and a graceful shutdown waits for them.
func (s *Server) Close() {
	s.closeMu.Do(func() { close(s.done) })
}

// Handler returns the handler of the pages and the public display: mount
// it at "/". Under /api/ it serves only /api/v1/live (as LiveHandler) and
// answers 404 to the rest. The display paths (/display,
// /display/config.json, /display/data) hold data only when a display is
// configured; wrap them with authentication unless it is public.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serve)
}

// LiveHandler returns the handler of GET /api/v1/live, the server-sent
// events stream of current values. It needs read access like the rest of
// the API.
func (s *Server) LiveHandler() http.Handler {
	return http.HandlerFunc(s.serveLive)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	p := r.URL.Path
	switch {
	case p == "/api/v1/live":
		s.serveLive(w, r)
		return
	case strings.HasPrefix(p, "/api/"):
		http.Error(w, "no such endpoint: "+p, http.StatusNotFound)
		return
	case p == "/display/config.json" || p == "/display/data":
		s.serveDisplayData(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch p {
	case "/", "/index.html":
		p = "/static/index.html"
	case "/display", "/display/":
		if s.display == nil {
			http.Error(w, "no public display is configured", http.StatusNotFound)
			return
		}
		p = "/static/display.html"
	}
	a, ok := s.assets[p]
	if !ok {
		http.Error(w, "not found: "+r.URL.Path, http.StatusNotFound)
		return
	}
	a.serve(w, r)
}

// setSecurityHeaders adds the headers every dashboard response carries.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// closed reports whether Close was called.
func (s *Server) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// streamContext returns a context ended by the request or by Close.
func (s *Server) streamContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
