package api

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
)

// API keys (docs/design/0003-security.md). A key is 32 random bytes shown
// to the user once as "pith_" + base64url; the config keeps only its
// SHA-256 ("sha256:" + hex). A plain hash is enough, without salt or a
// slow KDF: the key has 256 bits of entropy, so no dictionary or brute
// force attack applies, and a fast hash keeps every request cheap.

// Scope is what a key may do. Scopes are ordered: admin implies write,
// write implies read.
type Scope uint8

// The scopes, weakest first.
const (
	ScopeRead  Scope = iota + 1 // GET data, tags, latest, PromQL queries
	ScopeWrite                  // imports and push inputs (line protocol, emoncms, remote_write)
	ScopeAdmin                  // /api/v1/admin/*, /api/v1/control and anything not known to be safer
)

var scopeNames = [...]string{ScopeRead: "read", ScopeWrite: "write", ScopeAdmin: "admin"}

// String returns the config name of the scope.
func (s Scope) String() string {
	if s >= ScopeRead && s <= ScopeAdmin {
		return scopeNames[s]
	}
	return fmt.Sprintf("scope(%d)", uint8(s))
}

// ParseScope is the inverse of Scope.String.
func ParseScope(s string) (Scope, error) {
	for i, n := range scopeNames {
		if n != "" && n == s {
			return Scope(i), nil
		}
	}
	return 0, fmt.Errorf("unknown scope %q (want read, write or admin)", s)
}

const (
	keyPrefix  = "pith_"   // marks a plain key, so leaked keys are easy to grep for
	hashPrefix = "sha256:" // marks the stored form
	keyBytes   = 32        // entropy of a generated key
)

// GenerateKey returns a new random key and its stored form. Show plain to
// the user once; put hash in the config.
func GenerateKey() (plain, hash string) {
	var b [keyBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics on a broken OS source)
	plain = keyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return plain, HashKey(plain)
}

// HashKey returns the stored form of a plain key.
func HashKey(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// Key is one configured API key.
type Key struct {
	Name  string // who holds it, for logs and rate limiting (e.g. "telegraf")
	Hash  string // "sha256:" + 64 hex digits, from GenerateKey or HashKey
	Scope Scope  // the strongest scope it has
}

// key is a Key with its hash decoded.
type key struct {
	name  string
	sum   [sha256.Size]byte
	scope Scope
}

// Auth checks API keys. It is safe for concurrent use; SetKeys swaps the
// keys of a running server (a config reload).
type Auth struct {
	keys     atomic.Pointer[[]key]
	sessions Sessions // nil: no accounts
	refused  func(r *http.Request, p *Principal, msg string)
	log      *slog.Logger
}

// OnRefused makes fn hear of every state-changing request refused because
// the key or role that sent it lacks the permission (the audit journal
// records them). Call it before serving.
func (a *Auth) OnRefused(fn func(r *http.Request, p *Principal, msg string)) { a.refused = fn }

// NewAuth returns an Auth accepting keys. With no keys every request is
// let through: that is for loopback listeners and for auth = "none",
// which CheckExposure guards.
func NewAuth(keys []Key, log *slog.Logger) (*Auth, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Auth{log: log}
	if err := a.SetKeys(keys); err != nil {
		return nil, err
	}
	return a, nil
}

// SetKeys checks keys and, when all are good, makes them the accepted
// ones; on error the keys in use stay.
func (a *Auth) SetKeys(keys []Key) error {
	parsed, err := parseKeys(keys)
	if err != nil {
		return err
	}
	a.keys.Store(&parsed)
	return nil
}

func parseKeys(keys []Key) ([]key, error) {
	var out []key
	seen := make(map[string]bool, len(keys))
	for i, k := range keys {
		if k.Name == "" {
			return nil, fmt.Errorf("check key %d: empty name", i+1)
		}
		if seen[k.Name] {
			return nil, fmt.Errorf("check key %q: name used twice", k.Name)
		}
		seen[k.Name] = true
		if k.Scope < ScopeRead || k.Scope > ScopeAdmin {
			return nil, fmt.Errorf("check key %q: no scope (want read, write or admin)", k.Name)
		}
		hx, ok := strings.CutPrefix(k.Hash, hashPrefix)
		if !ok {
			if strings.HasPrefix(k.Hash, keyPrefix) {
				return nil, fmt.Errorf("check key %q: hash holds a plain key; store %s instead", k.Name, hashPrefix+"...")
			}
			return nil, fmt.Errorf("check key %q: hash must start with %q", k.Name, hashPrefix)
		}
		raw, err := hex.DecodeString(hx)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("check key %q: hash must be %q + 64 hex digits", k.Name, hashPrefix)
		}
		kk := key{name: k.Name, scope: k.Scope}
		copy(kk.sum[:], raw)
		out = append(out, kk)
	}
	return out, nil
}

// Sessions is the sign-in of people (internal/users implements it). The
// methods are safe for concurrent use.
type Sessions interface {
	// Enabled reports whether any account exists: from then on requests
	// need a session or a key.
	Enabled() bool
	// Session returns the principal of the session cookie r carries and
	// refreshes its idle time; ok is false when there is none or it ended.
	Session(r *http.Request) (p *Principal, ok bool)
}

// SetSessions makes s the session check of a; nil turns sessions off.
// Call it before serving.
func (a *Auth) SetSessions(s Sessions) { a.sessions = s }

// Enabled reports whether credentials are required: keys are configured
// or a person has an account.
func (a *Auth) Enabled() bool {
	return len(*a.keys.Load()) > 0 || (a.sessions != nil && a.sessions.Enabled())
}

// KeysEnabled reports whether API keys are configured.
func (a *Auth) KeysEnabled() bool { return len(*a.keys.Load()) > 0 }

// KeyName returns the name of the user or key that authenticated the
// request, or "" when credentials are off.
func KeyName(ctx context.Context) string {
	if p := PrincipalOf(ctx); p != nil {
		return p.Name
	}
	return ""
}

// check returns the key matching plain. Every configured key is compared,
// in constant time, so the answer time does not say which one matched.
func (a *Auth) check(plain string) (key, bool) {
	sum := sha256.Sum256([]byte(plain))
	var found key
	ok := 0
	for _, k := range *a.keys.Load() {
		if subtle.ConstantTimeCompare(sum[:], k.sum[:]) == 1 {
			found, ok = k, 1
		}
	}
	return found, ok == 1
}

// errNoCredentials says a request carried no key at all.
var errNoCredentials = errors.New("no API key")

// credentials returns the key sent with r: "Authorization: Bearer KEY",
// "Token KEY" (InfluxDB 2 clients such as Telegraf's influxdb_v2), Basic
// auth with the key as password (InfluxDB 1 clients, Prometheus
// remote_write basic_auth), or, on the emoncms paths /input/... only, the
// apikey parameter of the query or of a form body.
func credentials(r *http.Request) (string, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(h, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToLower(scheme) {
		case "bearer", "token":
			if rest != "" {
				return rest, nil
			}
		case "basic":
			if _, pw, ok := r.BasicAuth(); ok && pw != "" {
				return pw, nil
			}
		}
		return "", errors.New("unsupported Authorization header (want Bearer KEY)")
	}
	if strings.HasPrefix(r.URL.Path, "/input/") {
		// ParseForm reads a urlencoded body (emonhub posts the key there);
		// the handler then finds the fields in r.Form. It caps the body at
		// 10 MB by itself.
		if err := r.ParseForm(); err == nil {
			if k := r.Form.Get("apikey"); k != "" {
				return k, nil
			}
		} else if k := r.URL.Query().Get("apikey"); k != "" {
			return k, nil
		}
	}
	return "", errNoCredentials
}

// Require returns h guarded by credentials holding at least the
// permissions of scope need.
func (a *Auth) Require(need Scope, h http.Handler) http.Handler {
	return a.wrap(func(*http.Request) Perm {
		switch need {
		case ScopeRead:
			return PermRead
		case ScopeWrite:
			return PermIngest
		}
		return PermAdmin
	}, h)
}

// Wrap returns h guarded by credentials, each request needing the
// permission Need gives it. While no key and no account exist it lets
// every request through.
func (a *Auth) Wrap(h http.Handler) http.Handler {
	return a.wrap(func(r *http.Request) Perm { return Need(r.Method, r.URL.Path) }, h)
}

// CSRFHeader is the request header carrying a session's anti-forgery
// token; every state-changing request made with a session cookie needs it.
const CSRFHeader = "X-CSRF-Token"

// wrap is the one check deciding every request: it finds who sent it (an
// API key in the request, else a session cookie), the permission the
// request needs, and lets it through only when the one holds the other.
// A request made with a session cookie that changes state must also carry
// the session's CSRF token in the X-CSRF-Token header.
func (a *Auth) wrap(need func(*http.Request) Perm, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.Enabled() {
			h.ServeHTTP(w, r)
			return
		}
		p, status, msg := a.identify(r)
		if p != nil {
			p.From = r.RemoteAddr
		}
		n := need(r)
		if n == PermNone {
			// Sign-in and set-up: whoever sent it, the handler decides
			// (and checks CheckCSRF where a session changes state).
			if p != nil {
				r = r.WithContext(WithPrincipal(r.Context(), p))
			}
			h.ServeHTTP(w, r)
			return
		}
		if p == nil {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="pith"`)
			}
			writeError(w, status, msg)
			return
		}
		if !p.Perms.Has(n) {
			var msg string
			if p.Kind == "key" {
				msg = fmt.Sprintf("key %q has scope %s; %s %s needs %s", p.Name, p.Role, r.Method, r.URL.Path, scopeOf(n))
			} else {
				msg = fmt.Sprintf("%s %q has the role %s, which may not %s %s (it needs the %s permission)",
					p.Kind, p.Name, p.Role, r.Method, r.URL.Path, n)
			}
			if a.refused != nil && !safeMethod(r.Method) {
				a.refused(r, p, msg)
			}
			writeError(w, http.StatusForbidden, msg)
			return
		}
		if !CheckCSRF(r, p) {
			writeError(w, http.StatusForbidden, "missing or wrong "+CSRFHeader+" header: reload the page")
			return
		}
		h.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// scopeOf returns the weakest key scope holding n.
func scopeOf(n Perm) Scope {
	for _, s := range []Scope{ScopeRead, ScopeWrite} {
		if ScopePerms(s).Has(n) {
			return s
		}
	}
	return ScopeAdmin
}

// CheckCSRF reports whether r may go on as p: a key, or a safe method, or
// a session's request carrying its CSRF token.
func CheckCSRF(r *http.Request, p *Principal) bool {
	if p == nil || p.Kind != "user" || safeMethod(r.Method) {
		return true
	}
	t := r.Header.Get(CSRFHeader)
	return p.CSRF != "" && subtle.ConstantTimeCompare([]byte(t), []byte(p.CSRF)) == 1
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// identify returns who sent r, or the status and message of the refusal
// when r carries a bad key or no credentials at all (status 401).
func (a *Auth) identify(r *http.Request) (*Principal, int, string) {
	plain, err := credentials(r)
	if err == nil {
		k, ok := a.check(plain)
		if !ok {
			a.log.LogAttrs(r.Context(), slog.LevelWarn, "api key refused",
				slog.String("remote", r.RemoteAddr), slog.String("path", r.URL.Path))
			return nil, http.StatusUnauthorized, "unknown API key"
		}
		return &Principal{Name: k.name, Kind: "key", Role: k.scope.String(), Perms: ScopePerms(k.scope)}, 0, ""
	}
	if !errors.Is(err, errNoCredentials) {
		return nil, http.StatusUnauthorized, err.Error()
	}
	if a.sessions != nil {
		if p, ok := a.sessions.Session(r); ok {
			return p, 0, ""
		}
	}
	if a.sessions != nil && a.sessions.Enabled() {
		return nil, http.StatusUnauthorized, "sign in or send an API key"
	}
	return nil, http.StatusUnauthorized, err.Error()
}

// ScopeFor returns the scope a request needs. Control writes to devices
// need admin, not write: ingest keys sit in plain text in many device and
// Telegraf configs, and a leaked one must not be able to move a valve.
// PromQL endpoints are reads even when POSTed. Any other non-GET request
// needs admin, so an endpoint added later fails closed until it is listed.
func ScopeFor(method, path string) Scope {
	switch {
	case path == "/api/v1/control", strings.HasPrefix(path, "/api/v1/admin/"):
		return ScopeAdmin
	case strings.HasPrefix(path, "/input/"), path == "/write", path == "/api/v2/write":
		return ScopeWrite
	case path == "/query":
		// InfluxQL reads (Grafana's InfluxDB datasource); the CREATE
		// DATABASE Telegraf sends at start changes nothing.
		return ScopeRead
	case path == "/api/v1/import", path == "/api/v1/write", path == "/api/v1/track", path == "/api/v1/events":
		if method == http.MethodGet || method == http.MethodHead {
			return ScopeRead // a 405 answer; do not make readers think they lack a key
		}
		return ScopeWrite
	case path == "/api/v1/query", path == "/api/v1/query_range", path == "/api/v1/series",
		path == "/api/v1/labels", strings.HasPrefix(path, "/api/v1/label/"),
		strings.HasPrefix(path, "/api/v1/status/"), path == "/api/v1/metadata",
		path == "/api/v1/query_exemplars":
		return ScopeRead
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return ScopeRead
	}
	return ScopeAdmin
}
