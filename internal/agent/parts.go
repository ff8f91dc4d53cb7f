package agent

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/audit"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/diag"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/sitedocs"
	"github.com/pith-historian/pith/internal/store"
)

// storePart is the embedded time-series store.
type storePart struct {
	cfg config.Store
	log *slog.Logger
	db  *store.DB // once started
}

var _ Part = (*storePart)(nil)

func (s *storePart) Name() string { return "store" }

func (s *storePart) Start(context.Context) error {
	db, err := store.Open(s.cfg.Dir, storeOptions(s.cfg, s.log))
	if err != nil {
		return err
	}
	s.db = db
	s.log.Info("store open", "dir", s.cfg.Dir)
	return nil
}

func (s *storePart) Stop() {
	if err := s.db.Close(); err != nil {
		s.log.Error("close store", "err", err)
	}
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
	if c.ForwardMaxBytes > 0 {
		o.FollowMaxBytes = c.ForwardMaxBytes
	}
	if c.QueryCacheBytes > 0 {
		o.SetQueryCacheBytes(c.QueryCacheBytes)
	}
	return o
}

// plantPart is the acquisition: tag table, archive queue, Modbus
// stations and servers, input chains and calculated tags.
type plantPart struct {
	cfg *config.Config
	db  *store.DB
	log *slog.Logger
	p   *plant.Plant // once started
}

var _ Reloadable = (*plantPart)(nil)

func (p *plantPart) Name() string { return "plant" }

func (p *plantPart) Start(ctx context.Context) error {
	var err error
	p.p, err = plant.Start(ctx, p.cfg, p.db, p.log)
	return err
}

func (p *plantPart) Stop() { p.p.Stop() }

// Prepare builds cfg's stations and Modbus servers next to the running
// ones (see plant.Plant.Prepare).
func (p *plantPart) Prepare(cfg *config.Config) (Change, error) {
	ch, err := p.p.Prepare(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Redundancy.Enabled() {
		// A standby's stations are gone, not broken: their tags keep
		// the values mirrored from the active box.
		ch.KeepValues()
	}
	return ch, nil
}

var _ Change = (*plant.Change)(nil)

// keysPart is the API-key check of the HTTP server. It starts first: a
// listener reachable from other machines without keys is refused before
// anything opens (see docs/design/0003-security.md).
type keysPart struct {
	cfg   *config.Config
	users *usersPart // people's sessions count as credentials too
	log   *slog.Logger
	auth  *api.Auth // once started
}

var _ Reloadable = (*keysPart)(nil)

func (k *keysPart) Name() string { return "keys" }

func (k *keysPart) Start(context.Context) error {
	keys, err := apiKeys(k.cfg.HTTP)
	if err != nil {
		return err
	}
	if k.auth, err = api.NewAuth(keys, k.log); err != nil {
		return err
	}
	k.auth.SetSessions(k.users.mgr)
	k.auth.OnRefused(k.users.refused)
	return api.CheckExposure(k.cfg.HTTP.Listen, k.auth.Enabled(), k.cfg.HTTP.Auth == "none")
}

func (k *keysPart) Stop() {}

// Prepare checks cfg's keys (a throwaway Auth parses them) and that the
// running listener may go without keys when cfg has none.
func (k *keysPart) Prepare(cfg *config.Config) (Change, error) {
	keys, err := apiKeys(cfg.HTTP)
	if err != nil {
		return nil, err
	}
	if _, err := api.NewAuth(keys, nil); err != nil {
		return nil, err
	}
	if err := api.CheckExposure(k.cfg.HTTP.Listen, len(keys) > 0, cfg.HTTP.Auth == "none"); err != nil {
		return nil, err
	}
	old := k.cfg.HTTP.Keys
	return funcChange{commit: func() {
		if err := k.auth.SetKeys(keys); err != nil { // parsed above: cannot fail
			k.log.Error("set API keys", "err", err)
		}
		if d := keyChanges(old, cfg.HTTP.Keys); d != "" {
			k.users.record(audit.Record{Action: audit.ActionKeys, Target: "http.keys", Detail: d})
		}
		k.cfg = cfg
	}}, nil
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

// funcChange is a Change made of two functions; nil ones do nothing.
type funcChange struct {
	commit, abort func()
}

var _ Change = funcChange{}

func (c funcChange) Commit() {
	if c.commit != nil {
		c.commit()
	}
}

func (c funcChange) Abort() {
	if c.abort != nil {
		c.abort()
	}
}

// centralPart is the [central] consumer storing what edge Piths forward.
type centralPart struct {
	cfg  config.Central
	db   centralWriter
	log  *slog.Logger
	stop func()
	name string         // site.name, published with the sites held
	dir  *siteDirectory // nil when [central] directory is ""
	// dataDir is the data directory: the sites' documents go to DATA/sites.
	dataDir string
}

var _ Part = (*centralPart)(nil)

func (c *centralPart) Name() string { return "central" }

func (c *centralPart) Start(ctx context.Context) error {
	if db, ok := c.db.(*store.DB); ok && c.dataDir != "" {
		c.db = centralDB{DB: db, docs: sitedocs.Open(c.dataDir)}
	}
	if c.cfg.Directory != "" {
		c.dir = newSiteDirectory(c.cfg, c.name, c.log)
	}
	c.stop = startCentralWith(ctx, c.cfg, c.db, c.dir, c.log)
	return nil
}

func (c *centralPart) Stop() {
	c.stop()
	if c.dir != nil {
		c.dir.close()
	}
}

// diagPart is the diagnostics collector: system tags, /metrics, /-/healthy
// and /-/ready.
type diagPart struct {
	db     *store.DB
	plant  *plant.Plant
	budget diag.BudgetSource // the HTTP server's memory budget
	log    *slog.Logger
	col    *diag.Collector // once started
}

var _ Part = (*diagPart)(nil)

func (d *diagPart) Name() string { return "diagnostics" }

func (d *diagPart) Start(ctx context.Context) error {
	p := d.plant
	d.col = diag.New(diag.Sources{Store: d.db, Archive: p.Archive(), Tags: p.Table(), Sink: p.Table(), Budget: d.budget}, d.log, diag.DefaultOptions())
	if err := d.col.Start(ctx); err != nil {
		return fmt.Errorf("start diagnostics: %w", err)
	}
	return nil
}

// Stop marks the process not ready; it stops before the plant, so that
// /-/ready turns 503 before the acquisition ends.
func (d *diagPart) Stop() { d.col.Stop() }

// notifyPart speaks to systemd (see notifyReady).
type notifyPart struct {
	addr  string
	plant *plant.Plant
	log   *slog.Logger
	stop  func()
}

var _ Part = (*notifyPart)(nil)

func (n *notifyPart) Name() string { return "systemd notify" }

func (n *notifyPart) Start(ctx context.Context) error {
	n.stop = notifyReady(ctx, n.addr, n.plant, n.log)
	return nil
}

func (n *notifyPart) Stop() { n.stop() }
