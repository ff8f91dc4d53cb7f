package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"syscall"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/jsonenc"
	"github.com/pith-historian/pith/internal/plant"
)

// configLoaderKey carries, in serve's context, how to read the config
// again: pith serve --config FILE sets it; the demo and tests run from a
// Config alone and cannot reload.
type configLoaderKey struct{}

func withConfigLoader(ctx context.Context, load func() (*config.Config, error)) context.Context {
	return context.WithValue(ctx, configLoaderKey{}, load)
}

// reloader applies a changed config file to a running Pith: stations,
// tags and Modbus servers (plant.Reload), API keys and forwarders. The
// config is read and checked whole first; a bad one is refused and the
// running one kept.
type reloader struct {
	mu   sync.Mutex
	load func() (*config.Config, error) // nil: no config file
	cur  *config.Config
	p    *plant.Plant
	auth *api.Auth
	// forward restarts the forwarders whose settings changed; nil when
	// forwarding is not reloadable.
	forward func(old, cfg *config.Config) error
	control *controlParts // alarms, schedules, rules; nil when none runs
	log     *slog.Logger
}

// ReloadResult is the answer of POST /api/v1/admin/reload.
type ReloadResult struct {
	Acquisition   bool     // stations or Modbus servers were restarted
	Keys          int      // API keys in force
	RestartNeeded []string // changed sections that only a restart applies
}

func (r *reloader) reload() (ReloadResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.load == nil {
		return ReloadResult{}, errors.New("reload: this Pith runs without a config file (--config), there is nothing to re-read")
	}
	cfg, err := r.load()
	if err != nil {
		return ReloadResult{}, fmt.Errorf("reload refused, running config kept: %w", err)
	}
	// The listener and the store stay as they are; changes to them wait
	// for a restart.
	restart := restartSections(r.cur, cfg)
	cfg.Store.Dir, cfg.HTTP.Listen = r.cur.Store.Dir, r.cur.HTTP.Listen
	keys, err := apiKeys(cfg.HTTP)
	if err == nil {
		err = api.CheckExposure(r.cur.HTTP.Listen, len(keys) > 0, cfg.HTTP.Auth == "none")
	}
	if err == nil && r.control != nil {
		err = r.control.check(cfg)
	}
	if err != nil {
		return ReloadResult{}, fmt.Errorf("reload refused, running config kept: %w", err)
	}
	changed, err := r.p.Reload(cfg)
	if err != nil {
		return ReloadResult{Acquisition: changed}, fmt.Errorf("reload refused: %w", err)
	}
	if err := r.auth.SetKeys(keys); err != nil { // checked above; cannot fail
		return ReloadResult{Acquisition: changed}, err
	}
	if r.control != nil {
		if err := r.control.apply(cfg); err != nil {
			r.cur = cfg
			return ReloadResult{Acquisition: changed, Keys: len(keys)}, err
		}
	}
	if r.forward != nil {
		if err := r.forward(r.cur, cfg); err != nil {
			r.cur = cfg
			return ReloadResult{Acquisition: changed, Keys: len(keys)}, fmt.Errorf("reload forwarders: %w", err)
		}
	}
	r.cur = cfg
	res := ReloadResult{Acquisition: changed, Keys: len(keys), RestartNeeded: restart}
	r.log.Info("config reloaded", "acquisition_restarted", changed, "keys", len(keys), "restart_needed", restart)
	return res, nil
}

// restartSections names the sections of cfg that differ from old and
// that a reload does not apply.
func restartSections(old, cfg *config.Config) []string {
	var out []string
	diff := func(name string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			out = append(out, name)
		}
	}
	oh, nh := old.HTTP, cfg.HTTP
	oh.Keys, nh.Keys, oh.Auth, nh.Auth = nil, nil, "", ""
	diff("http", oh, nh)
	diff("store", old.Store, cfg.Store)
	diff("site", old.Site, cfg.Site)
	diff("log", old.Log, cfg.Log)
	diff("ingest", old.Ingest, cfg.Ingest)
	diff("mqtt", old.MQTT, cfg.MQTT)
	diff("display", old.Display, cfg.Display)
	diff("events", old.Events, cfg.Events)
	diff("central", old.Central, cfg.Central)
	diff("input", old.Input, cfg.Input)
	diff("calc", old.Calc, cfg.Calc)
	// Alarm definitions, schedules, rules and limits reload; whether
	// each part runs, and how often, does not.
	oa, na := old.Alarms, cfg.Alarms
	oa.Alarm, na.Alarm = nil, nil
	diff("alarms", oa, na)
	diff("schedules.enabled", old.Schedules.Enabled, cfg.Schedules.Enabled)
	diff("schedules.scan", old.Schedules.Scan, cfg.Schedules.Scan)
	diff("rules.enabled", old.Rules.Enabled, cfg.Rules.Enabled)
	diff("rules.scan", old.Rules.Scan, cfg.Rules.Scan)
	diff("rules.dry_run", old.Rules.DryRun, cfg.Rules.DryRun)
	return out
}

// watchSIGHUP reloads on every SIGHUP until ctx ends.
func (r *reloader) watchSIGHUP(ctx context.Context) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if _, err := r.reload(); err != nil {
					r.log.Error("SIGHUP", "err", err)
				}
			}
		}
	}()
	return func() { signal.Stop(hup); <-done }
}

// ServeHTTP answers POST /api/v1/admin/reload: 200 with what changed, or
// 400 with the reason the config was refused.
func (r *reloader) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		api.WriteError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	res, err := r.reload()
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	b := []byte(`{"reloaded":true,"acquisition_restarted":`)
	b = fmt.Appendf(b, "%t,\"keys\":%d,\"restart_needed\":[", res.Acquisition, res.Keys)
	for i, s := range res.RestartNeeded {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonenc.AppendString(b, s)
	}
	b = append(b, "]}\n"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
