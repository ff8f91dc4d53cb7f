package users

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/audit"
)

// maxBody bounds the JSON bodies of these routes.
const maxBody = 8 << 10

// Mount registers the routes of sign-in, first set-up and the users admin
// page on mux (docs/api.md). api.Auth decides who reaches each: the
// session and set-up routes are open and check the rest themselves, the
// users routes need admin.
func (m *Manager) Mount(mux interface {
	Handle(string, http.Handler)
}) {
	mux.Handle("/api/v1/session", http.HandlerFunc(m.handleSession))
	mux.Handle(OIDCStart, http.HandlerFunc(m.handleOIDCStart))
	mux.Handle(OIDCCallback, http.HandlerFunc(m.handleOIDCCallback))
	mux.Handle("/api/v1/setup", http.HandlerFunc(m.handleSetup))
	mux.Handle("/api/v1/users", http.HandlerFunc(m.handleUsers))
	mux.Handle("/api/v1/users/", http.HandlerFunc(m.handleUser))
}

// sessionAnswer is the body of GET and POST /api/v1/session.
type sessionAnswer struct {
	SignedIn    bool     `json:"signed_in"`
	User        string   `json:"user"`
	Role        string   `json:"role"`
	Perms       []string `json:"perms"`
	Tags        []string `json:"tags"` // patterns of the tags this person may write
	CSRF        string   `json:"csrf"` // send as X-CSRF-Token on every state-changing request
	IdleTimeout int64    `json:"idle_timeout_ms"`
}

func (m *Manager) answer(p *api.Principal) sessionAnswer {
	tags := p.Tags
	if tags == nil {
		tags = []string{}
	}
	m.mu.Lock()
	idle := m.options().IdleTimeout
	m.mu.Unlock()
	return sessionAnswer{SignedIn: true, User: p.Name, Role: p.Role, Perms: p.Perms.Names(), Tags: tags, CSRF: p.CSRF, IdleTimeout: idle.Milliseconds()}
}

// handleSession serves GET /api/v1/session (who is signed in), POST
// (sign in with {"name", "password"}) and DELETE (sign out; ?everywhere=1
// ends every session of the account).
func (m *Manager) handleSession(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		p := api.PrincipalOf(r.Context())
		if p == nil || p.Kind != "user" {
			if p != nil {
				api.WriteValue(w, http.StatusOK, map[string]any{"signed_in": false, "user": p.Name, "role": p.Role, "kind": p.Kind, "perms": p.Perms.Names()})
				return
			}
			// Not an error: the page asks this to learn whether to show
			// the sign-in form, and while no account exists, that it
			// need not.
			ans := map[string]any{"signed_in": false, "accounts": m.Enabled()}
			if o := m.oidc(); o != nil {
				ans["oidc"] = o.Label // the page offers "Sign in with <oidc>"
			}
			api.WriteValue(w, http.StatusOK, ans)
			return
		}
		api.WriteValue(w, http.StatusOK, m.answer(p))
	case http.MethodPost:
		m.handleSignIn(w, r)
	case http.MethodDelete:
		p := api.PrincipalOf(r.Context())
		if p == nil || p.Kind != "user" {
			clearCookie(w, r)
			api.WriteError(w, http.StatusUnauthorized, "not signed in")
			return
		}
		if !api.CheckCSRF(r, p) {
			api.WriteError(w, http.StatusForbidden, "missing or wrong "+api.CSRFHeader+" header: reload the page")
			return
		}
		every := r.URL.Query().Get("everywhere")
		everywhere := every == "1" || every == "true"
		n := m.EndSession(p.Session, everywhere)
		clearCookie(w, r)
		rec := audit.For(r, audit.ActionSignOut, p.Name)
		if everywhere {
			rec.Detail = fmt.Sprintf("everywhere: %d sessions ended", n)
		}
		m.record(rec)
		api.WriteValue(w, http.StatusOK, map[string]any{"ended": n})
	default:
		w.Header().Set("Allow", "GET, HEAD, POST, DELETE")
		api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
	}
}

// credentialsBody is the body of a sign-in and of the set-up.
type credentialsBody struct {
	Name     string `json:"name"`
	Password string `json:"password"`
	Token    string `json:"token,omitempty"`
}

// decodeJSON reads a JSON body. It insists on Content-Type
// application/json: a cross-site form cannot send that without the
// browser asking first, which stops login CSRF.
func decodeJSON(r *http.Request, v any) error {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" {
		return errors.New("want Content-Type: application/json")
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode body: %w", err)
	}
	return nil
}

// sameOrigin refuses a request whose Origin header names another site
// (browsers send it with every POST).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return o == ""
	}
	i := strings.Index(o, "://")
	return i >= 0 && o[i+3:] == r.Host
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (m *Manager) handleSignIn(w http.ResponseWriter, r *http.Request) {
	var req credentialsBody
	if err := decodeJSON(r, &req); err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !sameOrigin(r) {
		api.WriteError(w, http.StatusForbidden, "sign-in from another site refused")
		return
	}
	var old string
	if c, err := r.Cookie(CookieName); err == nil {
		old = c.Value
	}
	cookie, csrf, acc, err := m.signIn(req.Name, req.Password, clientAddr(r), old)
	if err != nil {
		rec := audit.For(r, audit.ActionSignInFailed, req.Name)
		rec.Who, rec.Kind, rec.Role = "", "", ""
		rec.Result = err.Error()
		var th errThrottled
		if errors.As(err, &th) {
			w.Header().Set("Retry-After", strconv.Itoa(int(th.wait.Seconds()+1)))
			m.record(rec)
			api.WriteError(w, http.StatusTooManyRequests, err.Error())
			return
		}
		m.record(rec)
		api.WriteError(w, http.StatusUnauthorized, err.Error())
		return
	}
	m.setCookie(w, r, cookie)
	p := &api.Principal{Name: acc.Name, Kind: "user", Role: string(acc.Role), Perms: acc.Role.Perms(), Tags: m.tagsOf(acc.Role), CSRF: csrf}
	rec := audit.For(r, audit.ActionSignIn, acc.Name)
	rec.Who, rec.Kind, rec.Role = acc.Name, "user", string(acc.Role)
	m.record(rec)
	api.WriteValue(w, http.StatusOK, m.answer(p))
}

func (m *Manager) tagsOf(r Role) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.options().Tags.of(r)
}

// setCookie sets the session cookie: HttpOnly (no script reads it),
// SameSite=Strict (no other site's request carries it), Secure when the
// connection is TLS, and no longer-lived than the session may be.
func (m *Manager) setCookie(w http.ResponseWriter, r *http.Request, value string) {
	m.mu.Lock()
	maxAge := m.options().MaxAge
	m.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: cookiePath, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: int((maxAge + clockSkewSlack).Seconds())})
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: cookiePath, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode, MaxAge: -1})
}

// handleSetup serves POST /api/v1/setup {"token", "name", "password"}:
// the first admin, with the one-time token printed at start while no
// account exists. It signs the new admin in.
func (m *Manager) handleSetup(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			api.WriteValue(w, http.StatusOK, map[string]any{"needed": !m.Enabled()})
			return
		}
		w.Header().Set("Allow", "GET, HEAD, POST")
		api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
		return
	}
	var req credentialsBody
	if err := decodeJSON(r, &req); err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if !sameOrigin(r) {
		api.WriteError(w, http.StatusForbidden, "set-up from another site refused")
		return
	}
	if err := CheckName(req.Name); err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := CheckPassword(req.Password); err != nil {
		api.WriteError(w, http.StatusBadRequest, err.Error())
		return
	}
	now := m.options().Now()
	if wt := m.byAddr.wait(clientAddr(r), now); wt > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(wt.Seconds()+1)))
		api.WriteError(w, http.StatusTooManyRequests, errThrottled{wt}.Error())
		return
	}
	if m.Enabled() || !m.checkSetup(req.Token) {
		m.byAddr.fail(clientAddr(r), now)
		rec := audit.For(r, audit.ActionSetup, req.Name)
		rec.Result = "refused: the set-up link is wrong or was used"
		m.record(rec)
		api.WriteError(w, http.StatusForbidden, "this set-up link is wrong or was used already; restart Pith for a new one while no account exists")
		return
	}
	if err := m.acc.Add(req.Name, RoleAdmin, req.Password, true); err != nil {
		api.WriteError(w, http.StatusConflict, err.Error())
		return
	}
	if err := m.reload(true); err != nil {
		api.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	rec := audit.For(r, audit.ActionSetup, req.Name)
	rec.Who, rec.Kind, rec.Role = req.Name, "user", string(RoleAdmin)
	rec.Detail = "first admin created with the one-time set-up link"
	m.record(rec)
	m.handleSignIn(w, reRead(r, req))
}

// reloadNow reads the accounts file after a change made here.
func (m *Manager) reloadNow() {
	if err := m.reload(true); err != nil {
		m.log.Warn("read accounts", "err", err)
	}
}

// reRead returns r with its body replaced by the sign-in of req.
func reRead(r *http.Request, req credentialsBody) *http.Request {
	b, _ := json.Marshal(credentialsBody{Name: req.Name, Password: req.Password})
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(strings.NewReader(string(b)))
	return r2
}

// userAnswer is an account as the users page sees it (never its hash).
type userAnswer struct {
	Name     string `json:"name"`
	Role     Role   `json:"role"`
	Disabled bool   `json:"disabled"`
	Created  int64  `json:"created"`
	Changed  int64  `json:"changed"`
	Sessions int    `json:"sessions"`
}

func (m *Manager) userAnswer(a Account) userAnswer {
	return userAnswer{Name: a.Name, Role: a.Role, Disabled: a.Disabled, Created: a.Created, Changed: a.Changed, Sessions: m.SessionCount(a.Name)}
}

// handleUsers serves GET /api/v1/users (every account) and POST
// {"name", "role", "password"} (a new account). Admin only (api.Need).
func (m *Manager) handleUsers(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		list, err := m.acc.List()
		if err != nil {
			api.WriteError(w, http.StatusInternalServerError, err.Error())
			return
		}
		out := make([]userAnswer, 0, len(list))
		for _, a := range list {
			out = append(out, m.userAnswer(a))
		}
		api.WriteValue(w, http.StatusOK, map[string]any{"users": out, "roles": Roles})
	case http.MethodPost:
		var req struct {
			Name     string `json:"name"`
			Role     Role   `json:"role"`
			Password string `json:"password"`
		}
		if err := decodeJSON(r, &req); err != nil {
			api.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		rec := audit.For(r, audit.ActionUser, req.Name)
		rec.Detail = "add, role " + string(req.Role)
		err := m.acc.Add(req.Name, req.Role, req.Password, false)
		if err != nil {
			rec.Result = err.Error()
			m.record(rec)
			status := http.StatusBadRequest
			if errors.Is(err, ErrExists) {
				status = http.StatusConflict
			}
			api.WriteError(w, status, err.Error())
			return
		}
		m.record(rec)
		m.reloadNow()
		a, _ := m.acc.Get(req.Name)
		api.WriteValue(w, http.StatusCreated, m.userAnswer(a))
	default:
		w.Header().Set("Allow", "GET, HEAD, POST")
		api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
	}
}

// handleUser serves PATCH /api/v1/users/NAME {"role", "password",
// "disabled"} (any of them) and POST /api/v1/users/NAME/signout (end every
// session of the account). A changed role, password or state ends the
// account's sessions.
func (m *Manager) handleUser(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/api/v1/users/")
	name, action, _ := strings.Cut(rest, "/")
	if err := CheckName(name); err != nil {
		api.WriteError(w, http.StatusNotFound, err.Error())
		return
	}
	switch {
	case action == "signout" && r.Method == http.MethodPost:
		n := m.EndUser(name)
		rec := audit.For(r, audit.ActionUser, name)
		rec.Detail = fmt.Sprintf("signed out everywhere: %d sessions ended", n)
		m.record(rec)
		api.WriteValue(w, http.StatusOK, map[string]any{"ended": n})
	case action == "" && r.Method == http.MethodPatch:
		var req struct {
			Role     *Role   `json:"role"`
			Password *string `json:"password"`
			Disabled *bool   `json:"disabled"`
		}
		if err := decodeJSON(r, &req); err != nil {
			api.WriteError(w, http.StatusBadRequest, err.Error())
			return
		}
		rec := audit.For(r, audit.ActionUser, name)
		rec.Detail = describeChange(req.Role, req.Password != nil, req.Disabled)
		a, err := m.acc.Update(name, Change{Role: req.Role, Password: req.Password, Disabled: req.Disabled})
		if err != nil {
			rec.Result = err.Error()
			m.record(rec)
			status := http.StatusBadRequest
			if errors.Is(err, ErrNotFound) {
				status = http.StatusNotFound
			}
			api.WriteError(w, status, err.Error())
			return
		}
		m.EndUser(name) // the new role or password applies from the next sign-in
		m.reloadNow()
		m.record(rec)
		api.WriteValue(w, http.StatusOK, m.userAnswer(a))
	case action == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		a, err := m.acc.Get(name)
		if err != nil {
			api.WriteError(w, http.StatusNotFound, err.Error())
			return
		}
		api.WriteValue(w, http.StatusOK, m.userAnswer(a))
	default:
		api.WriteError(w, http.StatusMethodNotAllowed, "want GET or PATCH /api/v1/users/NAME, or POST /api/v1/users/NAME/signout")
	}
}

func describeChange(role *Role, password bool, disabled *bool) string {
	var parts []string
	if role != nil {
		parts = append(parts, "role "+string(*role))
	}
	if password {
		parts = append(parts, "password changed")
	}
	if disabled != nil {
		if *disabled {
			parts = append(parts, "disabled")
		} else {
			parts = append(parts, "enabled")
		}
	}
	return strings.Join(parts, ", ")
}
