package users

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
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/audit"
)

// CookieName is the session cookie.
const CookieName = "pith_session"

// Options of a Manager.
type Options struct {
	// IdleTimeout ends a session unused for this long.
	IdleTimeout time.Duration
	// MaxAge ends a session this long after sign-in, used or not.
	MaxAge time.Duration
	// Tags are the tag patterns each role may write.
	Tags TagRules
	// AccountAttempts failed sign-ins an account gets at once, then one
	// more every AccountEvery.
	AccountAttempts int
	AccountEvery    time.Duration
	// AddressAttempts failed sign-ins a client address gets at once, then
	// one more every AddressEvery.
	AddressAttempts int
	AddressEvery    time.Duration
	// LDAP, when set, signs in people without a local account through
	// the directory.
	LDAP *LDAP
	// OIDC, when set, signs in people through an OpenID Connect provider.
	OIDC *OIDC
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// DefaultOptions: 30 minutes idle, 12 hours at most, 5 failures per
// account then one a minute, 20 per address then one every 10 s.
func DefaultOptions() Options {
	return Options{IdleTimeout: 30 * time.Minute, MaxAge: 12 * time.Hour, Tags: DefaultTagRules(),
		AccountAttempts: 5, AccountEvery: time.Minute, AddressAttempts: 20, AddressEvery: 10 * time.Second}
}

// Limits of the in-memory state.
const (
	maxSessionsPerUser = 32
	maxAddresses       = 10_000
	maxHashing         = 2               // password hashes computed at once (19 MiB each)
	reloadEvery        = time.Second     // how often a request looks for a changed accounts file
	setupTokenBytes    = 24              // entropy of the one-time set-up token
	sessionIDBytes     = 32              // entropy of a session ID
	csrfBytes          = 32              // entropy of a CSRF token
	cookiePath         = "/"             // the API and the pages
	clockSkewSlack     = 5 * time.Second // for the Max-Age of a cookie
)

// Manager is the sign-in of people: it keeps the sessions (in memory, and
// in the users folder so that they survive a restart: persist.go), checks passwords with throttling, and
// implements api.Sessions. It is safe for concurrent use.
type Manager struct {
	acc   *Accounts
	opts  atomic.Pointer[Options] // replaced whole by SetOptions (a reload); read with m.options()
	audit *audit.Journal          // nil: nothing recorded
	log   *slog.Logger

	hashing   chan struct{} // bounds the Argon2id work in flight
	dummyOnce sync.Once
	dummy     string // see dummyHash
	byUser    *throttle
	byAddr    *throttle

	reloading sync.Mutex // one reload at a time: a slow one never installs an older list over a newer

	mu       sync.Mutex
	accounts map[string]Account  // the file's accounts, by name
	fileMod  time.Time           // the file's mod time when read
	checked  time.Time           // when the file was last looked at
	sessions map[string]*session // by the hex SHA-256 of the session ID
	setup    [sha256.Size]byte   // hash of the one-time set-up token; zero when none
}

type session struct {
	user    string
	role    Role // a directory user's role; local accounts' come from the file
	csrf    string
	created time.Time
	used    time.Time
	saved   time.Time // used as last written to the sessions file
	from    string
}

var _ api.Sessions = (*Manager)(nil)

// NewManager returns the sign-in of the accounts in acc. journal may be nil.
func NewManager(acc *Accounts, opts Options, journal *audit.Journal, log *slog.Logger) (*Manager, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{acc: acc, audit: journal, log: log, hashing: make(chan struct{}, maxHashing),
		byUser:   newThrottle(opts.AccountAttempts, opts.AccountEvery, maxAddresses),
		byAddr:   newThrottle(opts.AddressAttempts, opts.AddressEvery, maxAddresses),
		sessions: map[string]*session{}}
	m.opts.Store(&opts)
	if err := m.reload(true); err != nil {
		return nil, err
	}
	if err := m.loadSessions(); err != nil {
		return nil, err
	}
	return m, nil
}

// SetOptions replaces the timeouts and tag rules (a config reload).
func (m *Manager) SetOptions(o Options) {
	o.Now = m.options().Now
	m.opts.Store(&o)
}

// options returns the options in force.
func (m *Manager) options() *Options { return m.opts.Load() }

// Accounts returns the accounts file.
func (m *Manager) Accounts() *Accounts { return m.acc }

// reload reads the accounts file when it changed (or always with force),
// and ends the sessions of accounts gone, disabled, or whose password
// changed.
func (m *Manager) reload(force bool) error {
	now := m.options().Now()
	m.mu.Lock()
	if !force && now.Sub(m.checked) < reloadEvery {
		m.mu.Unlock()
		return nil
	}
	m.checked = now
	m.mu.Unlock()
	m.reloading.Lock()
	defer m.reloading.Unlock()
	st, err := os.Stat(m.acc.Path())
	var mod time.Time
	if err == nil {
		mod = st.ModTime()
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read accounts: %w", err)
	}
	m.mu.Lock()
	same := !force && mod.Equal(m.fileMod)
	m.mu.Unlock()
	if same {
		return nil
	}
	list, err := m.acc.List()
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.accounts
	m.accounts = make(map[string]Account, len(list))
	for _, a := range list {
		m.accounts[a.Name] = a
	}
	m.fileMod = mod
	ended := false
	for id, s := range m.sessions {
		a, ok := m.accounts[s.user]
		if !ok || a.Disabled || (old != nil && old[s.user].Hash != a.Hash) {
			delete(m.sessions, id)
			ended = true
		}
	}
	if ended {
		m.saveSessionsLocked()
	}
	return nil
}

// Enabled reports whether any account exists.
func (m *Manager) Enabled() bool {
	m.reloadQuiet()
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.accounts) > 0
}

func (m *Manager) reloadQuiet() {
	if err := m.reload(false); err != nil {
		m.log.Warn("read accounts", "err", err)
	}
}

// SetupToken makes a new one-time set-up token when no account exists,
// and returns it ("" when accounts exist). The link to print is
// BASE/#/setup?token=TOKEN.
func (m *Manager) SetupToken() string {
	if m.Enabled() {
		return ""
	}
	b := make([]byte, setupTokenBytes)
	_, _ = rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	m.mu.Lock()
	m.setup = sha256.Sum256([]byte(tok))
	m.mu.Unlock()
	return tok
}

// checkSetup reports whether tok is the set-up token, and forgets it when
// it is.
func (m *Manager) checkSetup(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	m.mu.Lock()
	defer m.mu.Unlock()
	var zero [sha256.Size]byte
	if m.setup == zero || subtle.ConstantTimeCompare(sum[:], m.setup[:]) != 1 {
		return false
	}
	m.setup = zero
	return true
}

// Session implements api.Sessions: the principal of r's session cookie.
func (m *Manager) Session(r *http.Request) (*api.Principal, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil, false
	}
	m.reloadQuiet()
	id := sessionKey(c.Value)
	now := m.options().Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[id]
	if s == nil {
		return nil, false
	}
	if now.Sub(s.used) > m.options().IdleTimeout || now.Sub(s.created) > m.options().MaxAge {
		delete(m.sessions, id)
		m.saveSessionsLocked()
		return nil, false
	}
	a, ok := m.accounts[s.user]
	if s.role != "" && !ok {
		a, ok = Account{Name: s.user, Role: s.role}, true // a directory user
	}
	if !ok || a.Disabled || (s.role != "" && a.Hash != "") {
		delete(m.sessions, id)
		m.saveSessionsLocked()
		return nil, false
	}
	s.used = now
	if now.Sub(s.saved) >= usedPersistEvery {
		m.saveSessionsLocked()
	}
	return &api.Principal{Name: a.Name, Kind: "user", Role: string(a.Role), Perms: a.Role.Perms(),
		Tags: m.options().Tags.of(a.Role), Session: id, CSRF: s.csrf}, true
}

func sessionKey(cookie string) string {
	sum := sha256.Sum256([]byte(cookie))
	return hex.EncodeToString(sum[:])
}

// errThrottled carries how long to wait.
type errThrottled struct{ wait time.Duration }

func (e errThrottled) Error() string {
	return fmt.Sprintf("too many failed sign-ins: try again in %d s", int(e.wait.Seconds()+1))
}

// errSignIn is the one answer to a wrong name, a wrong password and a
// disabled account, so that sign-in does not say which accounts exist.
var errSignIn = errors.New("wrong name or password")

// signIn checks name and password, throttled per account and per client
// address, and returns a new session's cookie value and CSRF token. Any
// session the client already had is ended (no session fixation: the ID
// is always new after a sign-in).
func (m *Manager) signIn(name, password, addr, oldCookie string) (cookie, csrf string, acc Account, err error) {
	now := m.options().Now()
	if w := max(m.byUser.wait(name, now), m.byAddr.wait(addr, now)); w > 0 {
		return "", "", acc, errThrottled{w}
	}
	m.reloadQuiet()
	m.mu.Lock()
	acc, ok := m.accounts[name]
	m.mu.Unlock()
	if !ok {
		// Made a moment ago (by `pith user` or the users page)? Read the
		// file now rather than within the next second.
		if err := m.reload(true); err != nil {
			m.log.Warn("read accounts", "err", err)
		}
		m.mu.Lock()
		acc, ok = m.accounts[name]
		m.mu.Unlock()
	}
	hash := acc.Hash
	m.mu.Lock()
	dir := m.options().LDAP
	m.mu.Unlock()
	var good bool
	var verr error
	if !ok && dir != nil {
		m.hashing <- struct{}{}
		var role Role
		role, good, verr = dir.signIn(context.Background(), name, password)
		<-m.hashing
		if verr != nil {
			m.log.Warn("directory sign-in", "account", name, "err", verr)
		}
		if good {
			acc, ok = Account{Name: name, Role: role}, true
		}
	} else {
		if !ok {
			// Spend the same work on an unknown name as on a known one.
			hash = m.dummyHash()
		}
		m.hashing <- struct{}{}
		good, verr = VerifyPassword(hash, password)
		<-m.hashing
	}
	if verr != nil && ok {
		m.log.Error("account has a bad password hash", "account", name, "err", verr)
	}
	if !ok || !good || acc.Disabled {
		m.byAddr.fail(addr, now)
		if ok || dir != nil {
			// Only names that may be real accounts (local, or any with a
			// directory): made-up names cannot evict local ones' buckets.
			m.byUser.fail(name, now)
		}
		return "", "", acc, errSignIn
	}
	m.byUser.reset(name)
	cookie, csrf = m.newSession(acc, addr, oldCookie, now)
	return cookie, csrf, acc, nil
}

// newSession starts a session of acc (one without a hash is a directory
// user, whose role the session keeps) and ends oldCookie's.
func (m *Manager) newSession(acc Account, addr, oldCookie string, now time.Time) (cookie, csrf string) {
	cookie, csrf = randomToken(sessionIDBytes), randomToken(csrfBytes)
	m.mu.Lock()
	defer m.mu.Unlock()
	if oldCookie != "" {
		delete(m.sessions, sessionKey(oldCookie))
	}
	m.trimSessions(acc.Name)
	ns := &session{user: acc.Name, csrf: csrf, created: now, used: now, from: addr}
	if acc.Hash == "" {
		ns.role = acc.Role // signed in through the directory
	}
	m.sessions[sessionKey(cookie)] = ns
	m.saveSessionsLocked()
	return cookie, csrf
}

// trimSessions ends the oldest sessions of user beyond the limit less one
// (one is about to be added).
func (m *Manager) trimSessions(user string) {
	for {
		n, oldest, oldestT := 0, "", time.Time{}
		for id, s := range m.sessions {
			if s.user != user {
				continue
			}
			n++
			if oldest == "" || s.created.Before(oldestT) {
				oldest, oldestT = id, s.created
			}
		}
		if n < maxSessionsPerUser {
			return
		}
		delete(m.sessions, oldest)
	}
}

// EndSession ends one session (its ID hash) or, with everywhere, every
// session of its user. It returns how many ended.
func (m *Manager) EndSession(id string, everywhere bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.sessions[id]
	if s == nil {
		return 0
	}
	if !everywhere {
		delete(m.sessions, id)
		m.saveSessionsLocked()
		return 1
	}
	return m.endUserLocked(s.user)
}

// EndUser ends every session of user and returns how many.
func (m *Manager) EndUser(user string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.endUserLocked(user)
}

func (m *Manager) endUserLocked(user string) int {
	n := 0
	for id, s := range m.sessions {
		if s.user == user {
			delete(m.sessions, id)
			n++
		}
	}
	if n > 0 {
		m.saveSessionsLocked()
	}
	return n
}

// SessionCount returns the sessions open for user.
func (m *Manager) SessionCount(user string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, s := range m.sessions {
		if s.user == user {
			n++
		}
	}
	return n
}

func randomToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// dummyHash is a hash no password matches, made once, to spend the work
// of a check on an unknown account name.
func (m *Manager) dummyHash() string {
	m.dummyOnce.Do(func() { m.dummy = HashPassword(randomToken(32)) })
	return m.dummy
}

// record appends to the audit journal, when there is one.
func (m *Manager) record(r audit.Record) {
	if m.audit != nil {
		_ = m.audit.Append(r) // logged by the journal
	}
}
