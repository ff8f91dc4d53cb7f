package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/diag"
	"github.com/pith-historian/pith/internal/events"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/process"
	"github.com/pith-historian/pith/internal/promapi"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/store/wal"
	"github.com/pith-historian/pith/internal/web"
)

func runServe(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (TOML); built-in defaults when empty")
	data := fs.String("data", "", "data directory (overrides store.dir)")
	listen := fs.String("listen", "", "HTTP listen address (overrides http.listen)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith serve [--config FILE] [--data DIR] [--listen ADDR]\n\nRuns the historian. SIGTERM or SIGINT stops accepting, flushes and exits 0.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	cfg, err := loadConfig(*cfgPath, *data, *listen)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log.Level)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if *cfgPath != "" {
		ctx = withConfigLoader(ctx, func() (*config.Config, error) { return loadConfig(*cfgPath, *data, *listen) })
	}
	return serve(ctx, cfg, log, nil)
}

// flagErr turns -h into a clean exit.
func flagErr(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	return err
}

// loadConfig reads the file (or the defaults) and applies flag overrides.
func loadConfig(path, data, listen string) (*config.Config, error) {
	cfg := config.Default()
	if path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return nil, err
		}
	}
	if data != "" {
		cfg.Store.Dir = data
	}
	if listen != "" {
		cfg.HTTP.Listen = listen
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

// storeOptions maps the [store] section onto the engine's options.
func storeOptions(c config.Store, log *slog.Logger) store.Options {
	o := store.DefaultOptions()
	o.Logger = log
	if c.Durability == "relaxed" {
		o.Durability = store.DurabilityRelaxed
	}
	if c.CommitInterval > 0 {
		o.CommitInterval = c.CommitInterval.Std()
	}
	if c.HeadMaxSamples > 0 {
		o.HeadMaxSamples = c.HeadMaxSamples
	}
	if c.HeadMaxAge > 0 {
		o.HeadMaxAge = c.HeadMaxAge.Std()
	}
	o.RetentionRaw = c.RetentionRaw.Std()
	o.RetentionRollups = c.RetentionRollups.Std()
	return o
}

// serve runs the historian until ctx is cancelled: parts start in
// dependency order (store, plant, inputs, diagnostics, HTTP) and stop in
// reverse, so the archive queue drains into an open store. ready, when
// set, is told the HTTP address once requests are served.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, ready func(addr string, p *plant.Plant)) error {
	auth, err := newAuth(cfg.HTTP, log)
	if err != nil {
		return err
	}
	if err := api.CheckExposure(cfg.HTTP.Listen, auth.Enabled(), cfg.HTTP.Auth == "none"); err != nil {
		return err
	}
	t := time.Now()
	db, err := store.Open(cfg.Store.Dir, storeOptions(cfg.Store, log))
	if err != nil {
		return err
	}
	log.Info("store open", "dir", cfg.Store.Dir, "took", time.Since(t).Round(time.Millisecond))
	defer func() {
		t := time.Now()
		if err := db.Close(); err != nil {
			log.Error("close store", "err", err)
			return
		}
		log.Info("store closed", "took", time.Since(t).Round(time.Millisecond))
	}()

	p, err := plant.Start(ctx, cfg, db, log)
	if err != nil {
		return err
	}
	defer p.Stop()

	ctl, err := startControl(ctx, cfg, p, log) // alarms, schedules, rules
	if err != nil {
		return err
	}
	defer ctl.stop()

	fw, err := startForwarders(ctx, cfg, p.Table(), log)
	if err != nil {
		return err
	}
	defer fw.stop()
	// Imports and push inputs write through wr, which forwards what it
	// stored.
	wr := newWriter(db, fw, filepath.Join(cfg.Store.Dir, "forward", ".spool"))
	if wr, err = withInputChains(wr, cfg, db, p.Process(), log); err != nil {
		return err
	}
	wr = ctl.wrapWriter(wr) // alarms see what the push inputs write
	if cfg.Central.NATS != "" {
		defer startCentral(ctx, cfg.Central, db, log)()
	}

	gate := ingest.NewTagGate(db, cfg.Ingest.NewTagsPerMinute, nil)
	if cfg.MQTT.Enabled {
		stopMQTT, err := startMQTT(ctx, cfg.MQTT, wr, gate, log)
		if err != nil {
			return err
		}
		defer stopMQTT()
	}

	col := diag.New(diag.Sources{Store: db, Archive: p.Archive(), Tags: p.Table(), Sink: p.Table()}, log, diag.DefaultOptions())
	if err := col.Start(ctx); err != nil {
		return err
	}
	defer col.Stop() // before the plant stops: /-/ready turns 503 first

	mux, closeWeb, err := routes(cfg, db, wr, p, col, gate, log)
	if err != nil {
		return err
	}
	ctl.mount(mux, db, p, log)
	rl := &reloader{cur: cfg, p: p, auth: auth, control: ctl, log: log,
		forward: func(_, cfg *config.Config) error { return fw.reload(cfg) }}
	rl.load, _ = ctx.Value(configLoaderKey{}).(func() (*config.Config, error))
	defer rl.watchSIGHUP(ctx)()
	mux.Handle("/api/v1/admin/reload", rl)
	defer closeWeb()
	var ev *events.Collector // when on
	var signed http.Handler  // event posts signed with the shared secret skip the key check
	if cfg.Events.Enabled {
		ev, err = startEvents(cfg, p, log)
		if err != nil {
			return err
		}
		ctl.events.col.Store(ev) // alarm transitions become events too
		defer func() {
			ctl.events.col.Store(nil)
			ev.Close()
		}()
		evh := ev.Handler()
		mux.Handle("/api/v1/events", evh)
		mux.Handle("/api/v1/track", evh) // Hamustro's clients
		if cfg.Events.Secret != "" {
			signed = evh
		}
	}
	var tlsCfg *tls.Config
	if cfg.HTTP.TLS == "auto" || cfg.HTTP.TLSCert != "" {
		host, _, _ := net.SplitHostPort(cfg.HTTP.Listen)
		tlsCfg, err = api.TLSConfig(api.TLSOptions{
			CertFile: cfg.HTTP.TLSCert, KeyFile: cfg.HTTP.TLSKey, Auto: cfg.HTTP.TLS == "auto",
			Dir: filepath.Join(cfg.Store.Dir, "tls"), Hosts: append([]string{host}, cfg.HTTP.TLSHosts...),
		}, log)
		if err != nil {
			return err
		}
	}
	limiter := api.NewRateLimiter(api.RateOptions{Rate: cfg.HTTP.RateLimit, Burst: cfg.HTTP.RateBurst})
	ln, err := net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTP.Listen, err)
	}
	if ready != nil {
		ready(ln.Addr().String(), p)
	}
	defer notifyReady(ctx, ln.Addr().String(), p, log)() // systemd: READY=1, watchdog, STOPPING=1
	lim := api.ServerLimits{
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout.Std(), ReadTimeout: cfg.HTTP.ReadTimeout.Std(),
		IdleTimeout: cfg.HTTP.IdleTimeout.Std(), MaxHeaderBytes: cfg.HTTP.MaxHeaderBytes,
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
	if ev != nil {
		// Event posts come by the tens of thousands a second: the light
		// server takes them, through the same chain but straight to the
		// collector's handlers.
		lim.LightPOST = map[string]http.Handler{"/api/v1/events": chain(ev.PostHandler()), "/api/v1/track": chain(ev.TrackHandler())}
	}
	return api.ServeWith(ctx, ln, chain(mux), lim, tlsCfg, log)
}

// signedOr sends event posts that carry a signature to signed, whose
// handler checks it (401 when bad), and everything else to h.
func signedOr(signed, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/events" && r.Header.Get(events.SignatureHeader) != "" ||
			r.URL.Path == "/api/v1/track" && (r.Header.Get(events.HamustroSignatureHeader) != "" || r.Header.Get(events.HamustroTimeHeader) != "") {
			signed.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// startEvents opens the event collector in its own directory; its counts
// per name and minute become tags pith.events.<name>.per_min.
func startEvents(cfg *config.Config, p *plant.Plant, log *slog.Logger) (*events.Collector, error) {
	o := events.DefaultOptions()
	if cfg.Store.Durability == "relaxed" {
		o.Durability = wal.DurabilityRelaxed
	}
	if cfg.Events.Secret != "" {
		o.Secret = []byte(cfg.Events.Secret)
	}
	tab := p.Table()
	o.OnCounts = func(minute time.Time, counts map[string]uint64) {
		pts := make([]model.Point, 0, len(counts))
		for name, n := range counts {
			tag, err := ingest.CleanName("pith.events." + name + ".per_min")
			if err != nil {
				continue
			}
			pts = append(pts, model.Point{Tag: tag, T: minute.UnixMilli(), V: float64(n)})
		}
		if _, err := tab.UpdatePoints(pts, true, "events"); err != nil {
			log.Warn("event counts", "err", err)
		}
	}
	o.Format, o.Compression = cfg.Events.Format, cfg.Events.Compression
	if s3 := cfg.Events.S3; s3.Endpoint != "" {
		up, err := events.NewS3(events.S3Options{Endpoint: s3.Endpoint, Secure: s3.Secure, Region: s3.Region,
			Bucket: s3.Bucket, Prefix: s3.Prefix, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
		if err != nil {
			return nil, err
		}
		o.Upload = up
	}
	if n := cfg.Events.NATS; n.URL != "" {
		up, err := events.NewNATSObjects(n.URL, n.Bucket)
		if err != nil {
			return nil, err
		}
		o.Upload = up
	}
	// What is acknowledged but not in its final place yet (a complete
	// file, or the object store).
	o.OnBacklog = func(now time.Time, b events.Backlog) {
		t := now.UnixMilli()
		pts := []model.Point{{Tag: "pith.events.backlog", T: t, V: float64(b.Events)}}
		if o.Upload != nil {
			pts = append(pts, model.Point{Tag: "pith.events.files_pending", T: t, V: float64(b.Files)},
				model.Point{Tag: "pith.events.bytes_pending", T: t, V: float64(b.Bytes)})
		}
		if _, err := tab.UpdatePoints(pts, true, "events"); err != nil {
			log.Warn("event backlog", "err", err)
		}
	}
	ev, err := events.New(filepath.Join(cfg.Store.Dir, "events-collector"), o, log)
	if err != nil {
		return nil, fmt.Errorf("open event collector: %w", err)
	}
	return ev, nil
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
		if api.KeyName(r.Context()) == "" && api.IsLoopback(host) {
			h.ServeHTTP(w, r)
			return
		}
		limited.ServeHTTP(w, r)
	})
}

// newAuth builds the API-key check from [http] keys.
func newAuth(c config.HTTP, log *slog.Logger) (*api.Auth, error) {
	keys, err := apiKeys(c)
	if err != nil {
		return nil, err
	}
	return api.NewAuth(keys, log)
}

// apiKeys turns the [http] keys into the API's.
func apiKeys(c config.HTTP) ([]api.Key, error) {
	keys := make([]api.Key, 0, len(c.Keys))
	for _, k := range c.Keys {
		sc, err := api.ParseScope(k.Scope)
		if err != nil {
			return nil, err
		}
		keys = append(keys, api.Key{Name: k.Name, Hash: k.Hash, Scope: sc})
	}
	return keys, nil
}

// routes mounts every HTTP part. The returned func ends live streams, which
// would otherwise hold up the graceful stop.
func routes(cfg *config.Config, db *store.DB, wr writer, p *plant.Plant, col *diag.Collector, gate *ingest.TagGate, log *slog.Logger) (*http.ServeMux, func(), error) {
	opts := api.DefaultOptions()
	opts.Controller = p.Controller()
	opts.Meta = p.Meta()
	opts.Deleter = db // DELETE /api/v1/data goes to the store itself, past the write wrappers
	mux := http.NewServeMux()
	mux.Handle("/api/", api.NewServer(wr, opts, log).Handler())
	mux.Handle("/api/v1/admin/freeze", diag.NewFreezeHandler(p.Archive(), log))
	mux.Handle(backupPath, newBackupHandler(db, log))
	mux.Handle("/metrics", col.Handler())
	mux.Handle("/-/", col.Handler())

	// Compatibility endpoints (DESIGN.md reserves these paths).
	lpo := ingest.DefaultLineProtocolOptions()
	lpo.Gate, lpo.Logger = gate, log
	lp := ingest.NewLineProtocol(wr, lpo)
	mux.Handle("/write", lp)
	mux.Handle("/api/v2/write", lp)
	mux.HandleFunc("/query", lp.Query)
	mux.HandleFunc("/ping", lp.Ping)
	eo := ingest.DefaultEmoncmsOptions()
	eo.Gate, eo.Logger = gate, log
	mux.Handle("/input/", ingest.NewEmoncms(wr, eo))
	rwo := ingest.DefaultRemoteWriteOptions()
	rwo.Gate, rwo.Logger = gate, log
	mux.Handle("/api/v1/write", ingest.NewRemoteWrite(wr, rwo))
	prom := promapi.New(db, promapi.DefaultOptions(), log)
	for _, path := range []string{"/api/v1/query", "/api/v1/query_range", "/api/v1/labels", "/api/v1/label/",
		"/api/v1/series", "/api/v1/status/buildinfo", "/api/v1/metadata", "/api/v1/query_exemplars"} {
		mux.Handle(path, prom)
	}

	wo := web.DefaultOptions()
	wo.Source, wo.History = db, db
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
	mux.Handle("/api/v1/live", ws.LiveHandler())
	mux.Handle("/", ws.Handler())
	return mux, ws.Close, nil
}

// startMQTT runs the MQTT subscriber until ctx ends or the returned stop.
func startMQTT(ctx context.Context, c config.MQTT, db ingest.Sink, gate *ingest.TagGate, log *slog.Logger) (func(), error) {
	o := ingest.DefaultMQTTOptions()
	o.Broker, o.Topics, o.Prefix = c.Broker, c.Topics, c.Prefix
	if c.ClientID != "" {
		o.ClientID = c.ClientID
	}
	o.Username, o.Password = c.Username, c.Password
	o.Gate, o.Logger = gate, log
	m, err := ingest.NewMQTT(db, o)
	if err != nil {
		return nil, fmt.Errorf("mqtt: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("mqtt input stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}

func runCheckConfig(args []string) error {
	fs := flag.NewFlagSet("check-config", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith check-config FILE\n\nValidates a config file and exits 0 when it is good.\n")
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want one config file")
	}
	cfg, err := config.Load(fs.Arg(0))
	if err != nil {
		return err
	}
	if err := process.Check(cfg.Calc); err != nil { // expressions and cycles
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	fmt.Printf("%s: ok\n", fs.Arg(0))
	return nil
}
