package api

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"strings"
)

// The permission model (docs/security.md, "Who may do what"). Every
// request needs one permission, which Need gives from its method and path;
// whoever sent it (a person signed in with a session, or a machine with an
// API key) holds a set of permissions, which Principal carries. One check,
// Auth.wrap, compares the two for every request.

// Perm is one permission. A principal holds a set of them (Perms).
type Perm uint16

// The permissions. PermNone marks the routes anyone reaches (sign-in,
// first set-up).
const (
	PermNone    Perm = 0
	PermRead    Perm = 1 << iota // read data, tags, alarms, live values
	PermIngest                   // push values: imports, line protocol, emoncms, remote_write, events
	PermAck                      // acknowledge alarms
	PermControl                  // write tags to devices (within the tag patterns of the role)
	PermEdit                     // edit schedules, rule overrides, dashboards and pictures
	PermAdmin                    // users, keys, reload, backup, FREEZE, deletes, the audit journal
)

// Perms is a set of permissions.
type Perms uint16

// Has reports whether s holds p. Every set holds PermNone.
func (s Perms) Has(p Perm) bool { return Perm(s)&p == p }

// PermAll is every permission.
const PermAll = Perms(PermRead | PermIngest | PermAck | PermControl | PermEdit | PermAdmin)

var permNames = []struct {
	p    Perm
	name string
}{{PermRead, "read"}, {PermIngest, "ingest"}, {PermAck, "acknowledge"}, {PermControl, "control"}, {PermEdit, "edit"}, {PermAdmin, "admin"}}

// String names the permission.
func (p Perm) String() string {
	if p == PermNone {
		return "none"
	}
	for _, n := range permNames {
		if n.p == p {
			return n.name
		}
	}
	return fmt.Sprintf("perm(%d)", uint16(p))
}

// Names lists the permissions of s, for the session answer and the users
// page.
func (s Perms) Names() []string {
	out := []string{}
	for _, n := range permNames {
		if s.Has(n.p) {
			out = append(out, n.name)
		}
	}
	return out
}

// ScopePerms maps an API key's scope onto the permission model: a read key
// reads, a write key also pushes values, an admin key may do anything and
// write any tag. Keys keep the meaning they had before people had accounts.
func ScopePerms(s Scope) Perms {
	switch s {
	case ScopeRead:
		return Perms(PermRead)
	case ScopeWrite:
		return Perms(PermRead | PermIngest)
	case ScopeAdmin:
		return PermAll
	}
	return 0
}

// Principal is who sent a request: a person's session or an API key.
type Principal struct {
	Name  string // user or key name
	Kind  string // "user" or "key"
	Role  string // the user's role; the key's scope
	Perms Perms
	// Tags are the glob patterns (path.Match, '*' crosses dots) of the tags
	// this principal may write with PermControl; a pattern starting with
	// '!' excludes. Nil with PermAdmin means every tag.
	Tags []string
	// Session is the session's ID hash for a person, "" for a key.
	Session string
	// CSRF is the session's anti-forgery token, "" for a key.
	CSRF string
	// From is the client's address (the request's RemoteAddr).
	From string
}

// MayWrite reports whether p may write tag: it holds PermControl and tag
// matches one of its patterns and none of its exclusions. An admin with
// no patterns may write every tag.
func (p *Principal) MayWrite(tag string) bool {
	if !p.Perms.Has(PermControl) {
		return false
	}
	if p.Tags == nil && p.Perms.Has(PermAdmin) {
		return true
	}
	return MatchTags(p.Tags, tag)
}

// MatchTags reports whether tag matches one of patterns and none of the
// exclusions (patterns starting with '!'). A pattern is a path.Match glob
// where '*' also crosses dots ("boiler.*" matches "boiler.a.b").
func MatchTags(patterns []string, tag string) bool {
	ok := false
	for _, pat := range patterns {
		if ex, found := strings.CutPrefix(pat, "!"); found {
			if m, _ := path.Match(ex, tag); m {
				return false
			}
			continue
		}
		if m, _ := path.Match(pat, tag); m {
			ok = true
		}
	}
	return ok
}

// principalKey is the context key of the request's Principal.
type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalOf returns the principal of a request, or nil when the server
// requires no credentials (loopback without keys or users).
func PrincipalOf(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Need returns the permission a request needs. It refines ScopeFor, which
// keeps deciding for API keys what it always did: control writes, alarm
// acknowledgements and edits get their own permissions so that a person's
// role can hold them without holding admin.
func Need(method, p string) Perm {
	safe := method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
	switch {
	case p == "/api/v1/session", p == "/api/v1/setup", p == "/api/v1/session/oidc", p == "/api/v1/session/oidc/callback":
		return PermNone // sign-in and first set-up; the handlers check the rest
	case p == "/api/v1/control":
		return PermControl
	case p == "/api/v1/alarms/ack":
		if safe {
			return PermRead
		}
		return PermAck
	case p == "/api/v1/users", strings.HasPrefix(p, "/api/v1/users/"), p == "/api/v1/audit":
		return PermAdmin
	case strings.HasPrefix(p, "/api/v1/schedules/"), p == "/api/v1/schedules",
		strings.HasPrefix(p, "/api/v1/rules/override"),
		p == "/api/v1/dashboards", strings.HasPrefix(p, "/api/v1/dashboards/"),
		p == "/api/v1/pictures", strings.HasPrefix(p, "/api/v1/pictures/"):
		if safe {
			return PermRead
		}
		return PermEdit
	}
	switch ScopeFor(method, p) {
	case ScopeRead:
		return PermRead
	case ScopeWrite:
		return PermIngest
	}
	return PermAdmin
}
