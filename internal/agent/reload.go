package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"syscall"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/jsonenc"
)

// ReloadResult is the answer of POST /api/v1/admin/reload.
type ReloadResult struct {
	Acquisition   bool     // stations or Modbus servers were restarted
	Keys          int      // API keys in force
	RestartNeeded []string // changed sections that only a restart applies
}

// errRefused prefixes every refused reload: nothing of the new config is
// in force.
const errRefused = "reload refused, running config kept"

// Reload applies the config file again, to every reloadable part or to
// none: the file is read and validated, every part prepares its change
// (building and checking the new pieces next to the running ones), and
// only when all succeeded do all commit. When any fails, the prepared
// changes are aborted and the running parts keep running as they were.
// The listener and the store stay as they are; changes to them and to
// the other sections RestartNeeded names wait for a restart.
func (a *Agent) Reload() (ReloadResult, error) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.opts.Load == nil {
		return ReloadResult{}, errors.New("reload: this Pith runs without a config file (--config), there is nothing to re-read")
	}
	if a.stopping {
		return ReloadResult{}, errors.New("reload: Pith is stopping")
	}
	cfg, err := a.opts.Load()
	if err != nil {
		return ReloadResult{}, fmt.Errorf("%s: %w", errRefused, err)
	}
	restart := restartSections(a.cur, cfg)
	cfg.Store.Dir, cfg.HTTP.Listen = a.cur.Store.Dir, a.cur.HTTP.Listen
	if err := a.applyLocked(roleConfig(cfg, a.active, a.late)); err != nil {
		return ReloadResult{}, fmt.Errorf("%s: %w", errRefused, err)
	}
	res := ReloadResult{Acquisition: !reflect.DeepEqual(a.cur.Modbus, cfg.Modbus) || !reflect.DeepEqual(a.cur.OPCUA, cfg.OPCUA), Keys: len(cfg.HTTP.Keys), RestartNeeded: restart}
	a.cur = cfg
	a.log.Info("config reloaded", "acquisition_restarted", res.Acquisition, "keys", res.Keys, "restart_needed", restart)
	return res, nil
}

// applyLocked prepares cfg in every reloadable part and commits all, or
// aborts all when one fails. a.reloadMu is held.
func (a *Agent) applyLocked(cfg *config.Config) error {
	changes := make([]Change, 0, len(a.reloadable))
	for _, p := range a.reloadable {
		ch, err := p.Prepare(cfg)
		if err != nil {
			for i := len(changes) - 1; i >= 0; i-- {
				changes[i].Abort()
			}
			a.log.Warn("config reload refused", "part", p.Name(), "err", err)
			return fmt.Errorf("%s: %w", p.Name(), err)
		}
		changes = append(changes, ch)
	}
	for _, ch := range changes {
		ch.Commit()
	}
	return nil
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
	diff("redundancy", old.Redundancy, cfg.Redundancy)
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

// sighupPart reloads the config on every SIGHUP.
type sighupPart struct {
	agent *Agent
	stop  func()
}

var _ Part = (*sighupPart)(nil)

func (s *sighupPart) Name() string { return "sighup" }

func (s *sighupPart) Start(ctx context.Context) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if _, err := s.agent.Reload(); err != nil {
					s.agent.log.Error("SIGHUP", "err", err)
				}
			}
		}
	}()
	s.stop = func() { signal.Stop(hup); cancel(); <-done }
	return nil
}

func (s *sighupPart) Stop() { s.stop() }

// reloadHandler answers POST /api/v1/admin/reload: 200 with what changed,
// or 400 with the reason the config was refused (see README.md, "Use").
type reloadHandler struct{ a *Agent }

func (h reloadHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		api.WriteError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	res, err := h.a.Reload()
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
