package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/diag"
	"github.com/pith-historian/pith/internal/influxql"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/netaddr"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/promapi"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/web"
)

// httpPart is the HTTP server: every endpoint behind the request
// counting, the key check and the rate limits.
type httpPart struct {
	cfg        *config.Config
	agent      *Agent
	users      *usersPart
	keys       *keysPart
	store      *storePart
	plant      *plantPart
	automation *automation
	inputs     *inputs
	diag       *diagPart
	events     *eventsPart // nil when [events] is off
	budget     *api.Budget // memory for bodies and answers in flight
	log        *slog.Logger

	addr     string   // the bound address, once started
	patterns []string // the routes mounted, once started
	closeWeb func()   // ends the dashboard's live streams
	cancel   context.CancelFunc
	failed   chan struct{} // closed when the server stopped; err says why
	err      error
}

var _ Part = (*httpPart)(nil)

func (h *httpPart) Name() string { return "http" }

// Start mounts the routes, binds the listen address and serves in the
// background until Stop.
func (h *httpPart) Start(ctx context.Context) error {
	cfg, log, db, p := h.cfg, h.log, h.store.db, h.plant.p
	mux, closeWeb, err := routes(cfg, db, h.inputs.wr, p, h.diag.col, h.inputs.gate, h.agent.health, h.budget, log)
	if err != nil {
		return err
	}
	h.automation.mount(mux, db, log)
	mux.Handle("/api/v1/admin/reload", reloadHandler{h.agent})
	mux.Handle("/api/v1/admin/redundancy/step-down", stepDownHandler{h.agent.red})
	mux.Handle("/api/v1/redundancy", redundancyStatus{h.agent.red})
	h.users.mgr.Mount(mux)
	mux.Handle("/api/v1/audit", h.users.journal.Handler())
	if c := cfg.Central; c.NATS != "" && c.Directory != "" {
		dir := newSiteDirectory(c, cfg.Site.Name, log)
		mux.Handle("/api/v1/sites", dir)
		mux.Handle("/api/v1/sites/", dir)
		closeWeb = func(prev func()) func() { return func() { prev(); dir.close() } }(closeWeb)
	}
	var signed http.Handler // event posts signed with the shared secret skip the key check
	if h.events != nil {
		signed = h.events.mount(mux)
	}
	h.patterns = mux.patterns
	var tlsCfg *tls.Config
	if cfg.HTTP.TLS == "auto" || cfg.HTTP.TLSCert != "" {
		host, _, _ := net.SplitHostPort(cfg.HTTP.Listen)
		tlsCfg, err = api.TLSConfig(api.TLSOptions{
			CertFile: cfg.HTTP.TLSCert, KeyFile: cfg.HTTP.TLSKey, Auto: cfg.HTTP.TLS == "auto",
			Dir: filepath.Join(cfg.Store.Dir, "tls"), Hosts: append([]string{host}, cfg.HTTP.TLSHosts...),
		}, log)
		if err != nil {
			closeWeb()
			return err
		}
	}
	limiter := api.NewRateLimiter(api.RateOptions{Rate: cfg.HTTP.RateLimit, Burst: cfg.HTTP.RateBurst})
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		closeWeb()
		return fmt.Errorf("listen on %s: %w", cfg.HTTP.Listen, err)
	}
	h.addr = ln.Addr().String()
	lim := api.ServerLimits{
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout.Std(), ReadTimeout: cfg.HTTP.ReadTimeout.Std(),
		WriteTimeout: cfg.HTTP.WriteTimeout.Std(), IdleTimeout: cfg.HTTP.IdleTimeout.Std(), MaxHeaderBytes: cfg.HTTP.MaxHeaderBytes,
	}
	auth, col := h.keys.auth, h.diag.col
	// The budget sits behind the key check, so that a request without
	// a valid key never holds any of it.
	guard := bodyGuard(h.budget, lim.ReadTimeout)
	if signed != nil {
		signed = guard(signed)
	}
	// chain puts the request counting, key checks and rate limits in
	// front of a handler.
	chain := func(inner http.Handler) http.Handler {
		h := publicOr(auth.Wrap(limitRemote(limiter, inner)), limitRemote(limiter, inner), cfg.Display.Public)
		if signed != nil {
			h = signedOr(limitRemote(limiter, signed), h)
		}
		return col.CountRequests(h)
	}
	if ev := h.events; ev != nil {
		// Event posts come by the tens of thousands a second: the light
		// server takes them, through the same chain but straight to the
		// collector's handlers.
		lim.LightPOST = map[string]http.Handler{"/api/v1/events": chain(guard(ev.col.PostHandler())), "/api/v1/track": chain(guard(ev.col.TrackHandler()))}
	}
	h.closeWeb = closeWeb
	sctx, cancel := context.WithCancel(ctx)
	h.cancel, h.failed = cancel, make(chan struct{})
	go func() {
		defer close(h.failed)
		// The standby of a pair refuses pushed writes before it reads them.
		h.err = api.ServeWith(sctx, ln, chain(h.agent.red.refusePushes(guard(h.users.auditRequests(mux)))), lim, tlsCfg, log)
	}()
	h.users.announceSetup(h.addr, tlsCfg != nil)
	return nil
}

// Stop shuts the server down gracefully (in-flight requests finish), then
// ends the live streams.
func (h *httpPart) Stop() {
	h.cancel()
	<-h.failed
	h.closeWeb()
}

// readyHandler answers GET /-/ready with 503 and the reasons while a part
// that runs on after starting has failed (an alarm engine that stopped),
// and with next otherwise.
func readyHandler(h *health, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h.err(); err != nil {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "Pith is not ready: "+strings.ReplaceAll(err.Error(), "\n", "; ")+"\n")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// publicOr sends requests for the dashboard's static files, the health
// probes and (when configured public) the display's data to open, and
// everything else to keyed. A browser cannot send a key when it loads a
// page; the pages hold no data and fetch it from /api with the key.
func publicOr(keyed, open http.Handler, displayPublic bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isPublic(r.URL.Path, displayPublic) {
			open.ServeHTTP(w, r)
			return
		}
		keyed.ServeHTTP(w, r)
	})
}

func isPublic(path string, displayPublic bool) bool {
	switch {
	case path == "/-/healthy", path == "/-/ready":
		return true
	case path == "/display/data", path == "/display/config.json":
		return displayPublic
	case strings.HasPrefix(path, "/d/"):
		return true // public dashboards: the token is the key, reads are limited to the board's tags
	case path == "/metrics", path == "/write", path == "/query", path == "/ping":
		return false
	}
	for _, p := range []string{"/api/", "/input/"} {
		if strings.HasPrefix(path, p) {
			return false
		}
	}
	return true
}

// limitRemote rate-limits requests that carry an API key or come from
// another machine; local tools without a key (a bench, a backfill script)
// are not throttled.
func limitRemote(l *api.RateLimiter, h http.Handler) http.Handler {
	limited := l.Wrap(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		if api.KeyName(r.Context()) == "" && netaddr.IsLoopback(host) {
			h.ServeHTTP(w, r)
			return
		}
		limited.ServeHTTP(w, r)
	})
}

// routeMux is the agent's ServeMux, remembering its patterns so that a
// test can walk every route and check who reaches it.
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func newRouteMux() *routeMux { return &routeMux{ServeMux: http.NewServeMux()} }

// Handle registers h for pattern, as http.ServeMux.Handle does.
func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

// HandleFunc registers f for pattern, as http.ServeMux.HandleFunc does.
func (m *routeMux) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(f))
}

// routes mounts every HTTP part. The returned func ends live streams, which
// would otherwise hold up the graceful stop.
func routes(cfg *config.Config, db *store.DB, wr writer, p *plant.Plant, col *diag.Collector, gate *ingest.TagGate, h *health, budget *api.Budget, log *slog.Logger) (*routeMux, func(), error) {
	opts := api.DefaultOptions()
	opts.Controller = p.Controller()
	opts.Meta = p.Meta()
	opts.Deleter = db        // DELETE /api/v1/data goes to the store itself, past the write wrappers
	opts.Current = p.Table() // latest values from the tag table, not behind the archive queue
	mux := newRouteMux()
	mux.Handle("/api/", api.NewServer(wr, opts, log).Handler())
	// A FREEZE streams for up to an hour, a backup answers when done:
	// neither fits the write timeout.
	mux.Handle("/api/v1/admin/freeze", api.NoWriteDeadline(diag.NewFreezeHandler(p.Archive(), log)))
	mux.Handle(backupPath, api.NoWriteDeadline(newBackupHandler(db, log)))
	mux.Handle("/metrics", col.Handler())
	mux.Handle("/-/", col.Handler())
	mux.Handle("/-/ready", readyHandler(h, col.Handler()))
	if err := mountEnergy(mux, cfg, db, opts.Meta, log); err != nil {
		return nil, nil, err
	}

	// Compatibility endpoints (see README.md).
	lpo := ingest.DefaultLineProtocolOptions()
	lpo.Gate, lpo.Logger = gate, log
	lp := ingest.NewLineProtocol(wr, lpo)
	mux.Handle("/write", lp)
	mux.Handle("/api/v2/write", lp)
	io := influxql.DefaultOptions()
	io.Budget = budget
	mux.Handle("/query", influxql.NewHandler(influxql.NewEngine(db, influxql.NewStoreCatalog(db), io), nil, log))
	mux.HandleFunc("/ping", lp.Ping)
	eo := ingest.DefaultEmoncmsOptions()
	eo.Gate, eo.Logger = gate, log
	mux.Handle("/input/", ingest.NewEmoncms(wr, eo))
	rwo := ingest.DefaultRemoteWriteOptions()
	rwo.Gate, rwo.Logger = gate, log
	mux.Handle("/api/v1/write", ingest.NewRemoteWrite(wr, rwo))
	po := promapi.DefaultOptions()
	po.MaxConcurrent, po.MaxQueued = cfg.PromQL.MaxConcurrentQueries, cfg.PromQL.MaxQueuedQueries
	po.MaxSamples, po.Budget = cfg.PromQL.MaxSamples, budget
	prom := promapi.New(db, po, log)
	for _, path := range promPaths {
		mux.Handle(path, prom)
	}

	wo := web.DefaultOptions()
	wo.Source, wo.History = db, db
	wo.Table = p.Table() // the live stream pushes changes (at most two messages a second) instead of polling the store each second
	if d := cfg.Display; d.Enabled {
		dc := &web.DisplayConfig{Title: d.Title, Refresh: d.Refresh.Std()}
		for _, t := range d.Tiles {
			dc.Tiles = append(dc.Tiles, web.DisplayTile{Tag: t.Tag, Label: t.Label, Unit: t.Unit, Decimals: t.Decimals, Spark: t.Spark.Std()})
		}
		wo.Display = dc
	}
	ws, err := web.New(wo, log)
	if err != nil {
		return nil, nil, err
	}
	mux.Handle("/api/v1/live", api.NoWriteDeadline(ws.LiveHandler())) // streams for as long as the page is open
	mux.Handle("/", ws.Handler())
	pics, err := mountPictures(mux, cfg.Store.Dir, ws, log)
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	stopDocs, err := mountDashboards(mux, cfg, ws, pics, log)
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	return mux, func() { ws.Close(); stopDocs() }, nil
}
