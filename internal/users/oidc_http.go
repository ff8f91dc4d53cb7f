package users

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/audit"
)

func (m *Manager) oidc() *OIDC {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.options().OIDC
}

// redirectURL is the callback the provider sends the browser back to.
func (o *OIDC) redirectURL(r *http.Request) string {
	if o.RedirectURL != "" {
		return o.RedirectURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + OIDCCallback
}

// oidcGet returns the OpenID Connect client for a GET of one of its
// routes; otherwise it answers 404 (not configured) or 405 and returns nil.
func (m *Manager) oidcGet(w http.ResponseWriter, r *http.Request) *OIDC {
	o := m.oidc()
	if o == nil {
		api.WriteError(w, http.StatusNotFound, errNoOIDC.Error())
		return nil
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
		return nil
	}
	return o
}

// handleOIDCStart serves GET /api/v1/session/oidc: it sends the browser to
// the provider, with state, nonce and the PKCE verifier kept in a
// short-lived HttpOnly cookie that only the callback receives.
func (m *Manager) handleOIDCStart(w http.ResponseWriter, r *http.Request) {
	o := m.oidcGet(w, r)
	if o == nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), o.Timeout)
	defer cancel()
	u, f, err := o.authURL(ctx, o.redirectURL(r))
	if err != nil {
		m.log.Warn("openid connect sign-in", "err", err)
		api.WriteError(w, http.StatusBadGateway, err.Error())
		return
	}
	// SameSite=Lax: the provider's redirect back is a cross-site
	// top-level navigation, which Strict would strip the cookie from.
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: f.cookie(), Path: OIDCCallback, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode, MaxAge: int(oidcFlowAge.Seconds())})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u, http.StatusFound)
}

// handleOIDCCallback serves GET /api/v1/session/oidc/callback: it checks
// state against the cookie, trades the code for the ID token, verifies it,
// starts a session and sends the browser to the start page.
func (m *Manager) handleOIDCCallback(w http.ResponseWriter, r *http.Request) {
	o := m.oidcGet(w, r)
	if o == nil {
		return
	}
	// The flow cookie is spent, whatever happens.
	http.SetCookie(w, &http.Cookie{Name: oidcCookie, Value: "", Path: OIDCCallback, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteLaxMode, MaxAge: -1})
	w.Header().Set("Cache-Control", "no-store")
	name, role, err := m.oidcSignIn(r, o)
	if err != nil {
		rec := audit.For(r, audit.ActionSignInFailed, name)
		rec.Who, rec.Kind, rec.Role = "", "", ""
		rec.Detail = "openid connect"
		rec.Result = err.Error()
		m.record(rec)
		m.log.Warn("openid connect sign-in refused", "account", name, "err", err)
		status := http.StatusUnauthorized
		if !errors.As(err, new(errOIDC)) && !errors.Is(err, errSignIn) {
			status = http.StatusBadGateway
		}
		api.WriteError(w, status, err.Error())
		return
	}
	var old string
	if c, err := r.Cookie(CookieName); err == nil {
		old = c.Value
	}
	cookie, _ := m.newSession(Account{Name: name, Role: role}, clientAddr(r), old, m.options().Now())
	m.setCookie(w, r, cookie)
	rec := audit.For(r, audit.ActionSignIn, name)
	rec.Who, rec.Kind, rec.Role = name, "user", string(role)
	rec.Detail = "openid connect"
	m.record(rec)
	http.Redirect(w, r, "/", http.StatusFound)
}

// oidcSignIn checks the callback and returns who signed in, with what
// role. The name is returned with an error when known.
func (m *Manager) oidcSignIn(r *http.Request, o *OIDC) (string, Role, error) {
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		return "", "", oidcErr("the provider refused: %s %s", e, q.Get("error_description"))
	}
	c, err := r.Cookie(oidcCookie)
	if err != nil {
		return "", "", oidcErr("no sign-in under way in this browser (or it took longer than %s)", oidcFlowAge)
	}
	f, ok := parseFlow(c.Value)
	if !ok || !constEq(q.Get("state"), f.state) {
		return "", "", oidcErr("state does not match this browser's sign-in")
	}
	if iss := q.Get("iss"); iss != "" && iss != o.Issuer {
		return "", "", oidcErr("answer from issuer %q, want %q", iss, o.Issuer)
	}
	code := q.Get("code")
	if code == "" {
		return "", "", oidcErr("no code in the provider's answer")
	}
	ctx, cancel := context.WithTimeout(r.Context(), o.Timeout)
	defer cancel()
	claims, err := o.exchange(ctx, code, o.redirectURL(r), f)
	if err != nil {
		return "", "", err
	}
	name, role, err := o.person(claims)
	if err != nil {
		return "", "", err
	}
	// A local account of the same name keeps its password: the provider
	// does not take it over, and a disabled one stays out.
	if err := m.reload(true); err != nil {
		return name, "", err
	}
	m.mu.Lock()
	a, local := m.accounts[name]
	m.mu.Unlock()
	if local {
		if a.Disabled {
			return name, "", oidcErr("account %q is disabled here", name)
		}
		return name, "", oidcErr("%q is a local account here: sign in with its password", name)
	}
	return name, role, nil
}

func constEq(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
