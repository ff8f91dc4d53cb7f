package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/alarm"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/audit"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/events"
	"github.com/pith-historian/pith/internal/rule"
	"github.com/pith-historian/pith/internal/tag"
	"github.com/pith-historian/pith/internal/users"
)

// AuditDir is the audit journal's folder in the data directory.
const AuditDir = "audit"

// usersPart is people's sign-in (the accounts in the data directory and
// their sessions) and the audit journal. It starts first: the key check
// asks it whether accounts exist, and every later part may record.
type usersPart struct {
	cfg *config.Config
	log *slog.Logger

	journal *audit.Journal // once started
	mgr     *users.Manager // once started
	events  auditEvents    // records into the event collector, once it runs
}

var _ Reloadable = (*usersPart)(nil)

func (u *usersPart) Name() string { return "users" }

func (u *usersPart) Start(context.Context) error {
	o := audit.DefaultOptions()
	o.Retention, o.Logger = u.cfg.Audit.Retention.Std(), u.log.With("part", "audit")
	j, err := audit.Open(filepath.Join(u.cfg.Store.Dir, AuditDir), o)
	if err != nil {
		return err
	}
	acc, err := users.OpenAccounts(u.cfg.Store.Dir)
	if err != nil {
		j.Close()
		return err
	}
	uo, err := userOptions(u.cfg.Users)
	if err != nil {
		j.Close()
		return err
	}
	mgr, err := users.NewManager(acc, uo, j, u.log.With("part", "users"))
	if err != nil {
		j.Close()
		return err
	}
	if u.cfg.Audit.Forward && u.cfg.Events.Enabled {
		j.OnAppend(u.events.send)
	}
	u.journal, u.mgr = j, mgr
	return nil
}

func (u *usersPart) Stop() {
	if err := u.journal.Close(); err != nil {
		u.log.Warn("close audit journal", "err", err)
	}
}

// Prepare takes the new session timeouts and tag permissions.
func (u *usersPart) Prepare(cfg *config.Config) (Change, error) {
	o, err := userOptions(cfg.Users)
	if err != nil {
		return nil, err
	}
	return funcChange{commit: func() { u.mgr.SetOptions(o) }}, nil
}

func userOptions(c config.Users) (users.Options, error) {
	o := users.DefaultOptions()
	o.IdleTimeout, o.MaxAge = c.SessionIdle.Std(), c.SessionMax.Std()
	o.Tags = users.TagRules{Operator: c.OperatorTags, Engineer: c.EngineerTags, Admin: c.AdminTags}
	o.AccountAttempts, o.AccountEvery = c.LoginAttempts, c.LoginEvery.Std()
	o.AddressAttempts, o.AddressEvery = c.AddressAttempts, c.AddressEvery.Std()
	if c.LDAP.URL != "" {
		o.LDAP = &users.LDAP{URL: c.LDAP.URL, BindDN: c.LDAP.BindDN, Role: users.Role(c.LDAP.Role), Timeout: c.LDAP.Timeout.Std(),
			GroupBase: c.LDAP.GroupBase}
		if len(c.LDAP.Groups) > 0 {
			o.LDAP.Groups = make(map[string]users.Role, len(c.LDAP.Groups))
			for g, r := range c.LDAP.Groups {
				o.LDAP.Groups[g] = users.Role(r)
			}
		}
	}
	if oc := c.OIDC; oc.Issuer != "" {
		secret := oc.ClientSecret
		if oc.ClientSecretFile != "" {
			b, err := os.ReadFile(oc.ClientSecretFile)
			if err != nil {
				return o, fmt.Errorf("users.oidc.client_secret_file: %w", err)
			}
			secret = strings.TrimSpace(string(b))
		}
		o.OIDC = &users.OIDC{Issuer: oc.Issuer, ClientID: oc.ClientID, ClientSecret: secret, RedirectURL: oc.RedirectURL,
			Scopes: oc.Scopes, NameClaim: oc.NameClaim, GroupsClaim: oc.GroupsClaim, Role: users.Role(oc.Role),
			Label: oc.Label, Timeout: oc.Timeout.Std(), Groups: make(map[string]users.Role, len(oc.Groups))}
		for g, r := range oc.Groups {
			o.OIDC.Groups[g] = users.Role(r)
		}
	}
	return o, nil
}

// record appends r to the journal.
func (u *usersPart) record(r audit.Record) {
	_ = u.journal.Append(r) // a failure is logged by the journal
}

// announceSetup prints the one-time set-up link while no account exists.
func (u *usersPart) announceSetup(addr string, tls bool) {
	tok := u.mgr.SetupToken()
	if tok == "" {
		return
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	u.log.Warn("no accounts yet: open this one-time link to set up the first admin (a new link is made at each start until then)",
		"link", scheme+"://"+addr+"/#/setup?token="+tok)
}

// auditEvents sends audit records to the event collector as events named
// pith.audit.<action>, so that the collector's sinks carry them upstream.
type auditEvents struct {
	col atomic.Pointer[events.Collector]
}

func (a *auditEvents) send(r audit.Record) {
	col := a.col.Load()
	if col == nil {
		return
	}
	e := events.Event{ID: "audit-" + strconv.FormatUint(r.Seq, 10) + "-" + strconv.FormatInt(r.T, 10), Time: r.T,
		Name: "pith.audit." + r.Action, Source: events.Source{Device: "pith"}, Str: map[string]string{"result": r.Result}}
	for k, v := range map[string]string{"who": r.Who, "kind": r.Kind, "role": r.Role, "from": r.From, "target": r.Target, "detail": r.Detail} {
		if v != "" {
			e.Str[k] = v
		}
	}
	if r.Old != nil || r.New != nil {
		e.Num = map[string]float64{}
		if r.Old != nil {
			e.Num["old"] = *r.Old
		}
		if r.New != nil {
			e.Num["new"] = *r.New
		}
	}
	// The journal calls this under its lock: do not wait on the collector.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _, _ = col.Accept(ctx, []events.Event{e}, time.Now().UnixMilli())
	}()
}

// alarmAudit records alarm acknowledgements in the journal.
type alarmAudit struct{ u *usersPart }

var _ alarm.Notifier = alarmAudit{}

func (alarmAudit) Name() string { return "audit" }

// Unmuted: acknowledgements on a pair's standby box are audited there.
func (alarmAudit) Unmuted() {}

// Inline: the journal holds an acknowledgement when its request is
// answered, and a full queue never drops one.
func (alarmAudit) Inline() {}

func (a alarmAudit) Notify(_ context.Context, ev alarm.Event) error {
	if ev.Event != alarm.EventAcknowledged {
		return nil
	}
	a.u.record(audit.Record{T: ev.T, Who: ev.Who, Action: audit.ActionAck, Target: ev.Alarm,
		Detail: fmt.Sprintf("state %s, severity %s", ev.State, ev.Severity)})
	return nil
}

// controlRecorder is the rule.Guard's recorder: every control write (API,
// rule override, rule) goes into the journal with who, from where, the
// value before and after, and the device's answer.
func (u *usersPart) controlRecorder(tab *tag.Table) rule.Recorder {
	return func(ctx context.Context, name string, value float64, who string) func(error) {
		rec := audit.Record{Action: audit.ActionControl, Target: name, Who: who}
		if p := api.PrincipalOf(ctx); p != nil {
			rec.Who, rec.Kind, rec.Role, rec.From = p.Name, p.Kind, p.Role, p.From
		} else if strings.Contains(who, ":") && !strings.HasPrefix(who, "rule:") {
			rec.Who, rec.From = "", who // credentials off: who is the client's address
		}
		if id, ok := tab.Lookup(name); ok {
			if v, ok := tab.Get(id); ok && v.Has {
				old := v.V
				rec.Old = &old
			}
		}
		nv := value
		rec.New = &nv
		return func(err error) {
			if err != nil {
				rec.Result = err.Error()
			}
			u.record(rec)
		}
	}
}

// refused records a state-changing request the permission check refused.
func (u *usersPart) refused(r *http.Request, p *api.Principal, msg string) {
	u.record(audit.Record{Who: p.Name, Kind: p.Kind, Role: p.Role, From: r.RemoteAddr, Action: audit.ActionRefused,
		Target: r.URL.Path, Result: msg, Detail: r.Method + " " + r.URL.RequestURI()})
}

// auditRequests records every state-changing request that no handler
// records itself in more detail: reloads, backups, FREEZE, deletes,
// schedule and booking changes. Pushed values (imports, inputs, events)
// are data, not actions, and are not recorded.
func (u *usersPart) auditRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		action := requestAction(r.Method, r.URL.Path)
		if action == "" {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		rec := audit.For(r, action, r.URL.Path)
		rec.Detail = r.Method + " " + r.URL.RequestURI()
		if sw.status >= 400 {
			rec.Result = strconv.Itoa(sw.status) + " " + http.StatusText(sw.status)
		}
		u.record(rec)
	})
}

// requestAction names what a request does for the journal, "" for one
// not recorded here.
func requestAction(method, path string) string {
	if method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions {
		return ""
	}
	switch {
	case api.Need(method, path) == api.PermIngest,
		path == "/api/v1/control", path == "/api/v1/session", path == "/api/v1/setup",
		path == "/api/v1/users", strings.HasPrefix(path, "/api/v1/users/"), path == "/api/v1/alarms/ack":
		return "" // data, or recorded by their handlers
	case path == "/api/v1/admin/reload":
		return audit.ActionReload
	case path == backupPath:
		return audit.ActionBackup
	case path == "/api/v1/admin/freeze":
		return audit.ActionFreeze
	case method == http.MethodDelete && path == "/api/v1/data":
		return audit.ActionDelete
	case strings.HasPrefix(path, "/api/v1/rules/override"):
		return audit.ActionOverride
	case strings.HasPrefix(path, "/api/v1/schedules"):
		return audit.ActionSchedule
	}
	return audit.ActionRequest
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the writer's Flush and
// deadlines (FREEZE streams, backups set none).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush passes flushes on, for the streaming answers.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// keyChanges describes what a reload changes in the API keys.
func keyChanges(old, cur []config.APIKey) string {
	byName := func(ks []config.APIKey) map[string]config.APIKey {
		m := make(map[string]config.APIKey, len(ks))
		for _, k := range ks {
			m[k.Name] = k
		}
		return m
	}
	o, n := byName(old), byName(cur)
	var parts []string
	for name, k := range n {
		if ok, had := o[name]; !had {
			parts = append(parts, "added "+name+" ("+k.Scope+")")
		} else if ok.Hash != k.Hash || ok.Scope != k.Scope {
			parts = append(parts, "changed "+name+" ("+k.Scope+")")
		}
	}
	for name := range o {
		if _, ok := n[name]; !ok {
			parts = append(parts, "removed "+name)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}
