package users

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/atomicfile"
)

// sessionsFile keeps the open sessions in the users folder, so that a
// restart (an upgrade, a power cut) does not sign everybody out. It holds
// each session's ID hash, never the cookie: reading the file does not give
// a session. It is part of backups like the rest of the folder; a restore
// brings back the sessions open at the backup, each still ended by its
// absolute age.
const sessionsFile = "sessions.json"

// usedPersistEvery is how stale a session's last use may be on disk: after
// a restart a session may end up to this much earlier than it would have.
const usedPersistEvery = time.Minute

// storedSession is one session on disk.
type storedSession struct {
	ID      string `json:"id"` // hex SHA-256 of the session cookie
	User    string `json:"user"`
	Role    Role   `json:"role,omitempty"` // a directory user's role
	CSRF    string `json:"csrf"`
	Created int64  `json:"created"` // Unix ms
	Used    int64  `json:"used"`    // Unix ms
	From    string `json:"from,omitempty"`
}

func (m *Manager) sessionsPath() string { return filepath.Join(m.acc.dir, sessionsFile) }

// saveSessionsLocked writes the sessions; the caller holds m.mu. A write
// that fails is logged: sign-in goes on working, and a restart then signs
// people out, as before sessions were kept.
func (m *Manager) saveSessionsLocked() {
	list := make([]storedSession, 0, len(m.sessions))
	for id, s := range m.sessions {
		list = append(list, storedSession{ID: id, User: s.user, Role: s.role, CSRF: s.csrf,
			Created: s.created.UnixMilli(), Used: s.used.UnixMilli(), From: s.from})
		s.saved = s.used
	}
	slices.SortFunc(list, func(a, b storedSession) int { return strings.Compare(a.ID, b.ID) })
	b, err := json.Marshal(list)
	if err == nil {
		err = atomicfile.Write(m.sessionsPath(), append(b, '\n'), 0o600)
	}
	if err != nil {
		m.log.Warn("keep sessions", "file", m.sessionsPath(), "err", err)
	}
}

// loadSessions reads the sessions kept by the last run, dropping those that
// ended meanwhile (idle, too old, account gone or disabled). A file that
// does not decode is logged and set aside: people sign in again.
func (m *Manager) loadSessions() error {
	b, err := os.ReadFile(m.sessionsPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read sessions: %w", err)
	}
	var list []storedSession
	if err := json.Unmarshal(b, &list); err != nil {
		m.log.Warn("sessions file does not decode: everybody signs in again", "file", m.sessionsPath(), "err", err)
		return nil
	}
	now := m.options().Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, st := range list {
		s := &session{user: st.User, role: st.Role, csrf: st.CSRF, created: time.UnixMilli(st.Created),
			used: time.UnixMilli(st.Used), from: st.From}
		s.saved = s.used
		a, ok := m.accounts[s.user]
		switch {
		case len(st.ID) != 64 || st.CSRF == "":
			continue
		case now.Sub(s.used) > m.options().IdleTimeout || now.Sub(s.created) > m.options().MaxAge:
			continue
		case s.role == "" && (!ok || a.Disabled):
			continue // a local account gone or disabled
		case s.role != "" && (m.options().LDAP == nil || ok):
			continue // a directory user, and the directory is off or a local account took the name
		}
		m.sessions[st.ID] = s
	}
	if len(m.sessions) != len(list) {
		m.saveSessionsLocked()
	}
	return nil
}
