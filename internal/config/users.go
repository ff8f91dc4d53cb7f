package config

import (
	"net/url"
	"path"
	"strings"
	"time"
)

// Users is the [users] section: people's sign-in (docs/security.md).
// Accounts themselves live in the data directory (`pith user`), not here.
type Users struct {
	// SessionIdle ends a session unused for this long.
	SessionIdle Duration `toml:"session_idle"`
	// SessionMax ends a session this long after sign-in, used or not.
	SessionMax Duration `toml:"session_max"`
	// OperatorTags, EngineerTags and AdminTags are the tags each role may
	// write: glob patterns ('*' also crosses dots); one starting with '!'
	// excludes ("!turbine.*"). Operators write none until listed here.
	OperatorTags []string `toml:"operator_tags"`
	EngineerTags []string `toml:"engineer_tags"`
	AdminTags    []string `toml:"admin_tags"`
	// LoginAttempts failed sign-ins an account gets at once, then one more
	// every LoginEvery.
	LoginAttempts int      `toml:"login_attempts"`
	LoginEvery    Duration `toml:"login_every"`
	// AddressAttempts failed sign-ins a client address gets at once, then
	// one more every AddressEvery.
	AddressAttempts int      `toml:"address_attempts"`
	AddressEvery    Duration `toml:"address_every"`
	// LDAP signs in people without a local account through the plant's
	// directory (an LDAP simple bind).
	LDAP LDAP `toml:"ldap"`
	// OIDC signs in people through an OpenID Connect provider.
	OIDC OIDC `toml:"oidc"`
}

// OIDC is the [users.oidc] section.
type OIDC struct {
	// Issuer is the provider's issuer URL; "" turns OpenID Connect off.
	Issuer           string `toml:"issuer"`
	ClientID         string `toml:"client_id"`
	ClientSecret     string `toml:"client_secret"`
	ClientSecretFile string `toml:"client_secret_file"`
	// RedirectURL is the callback registered at the provider; "" derives
	// it from the request's host (/api/v1/session/oidc/callback).
	RedirectURL string   `toml:"redirect_url"`
	Scopes      []string `toml:"scopes"`
	NameClaim   string   `toml:"name_claim"`
	GroupsClaim string   `toml:"groups_claim"`
	// Groups maps a group to a role; the strongest wins, Role when in none.
	Groups  map[string]string `toml:"groups"`
	Role    string            `toml:"role"`
	Label   string            `toml:"label"`
	Timeout Duration          `toml:"timeout"`
}

// LDAP is the [users.ldap] section.
type LDAP struct {
	// URL is ldap://host:389 or ldaps://host:636; "" turns LDAP off.
	URL string `toml:"url"`
	// BindDN is the DN bound as, with {name} replaced by the account name.
	BindDN string `toml:"bind_dn"`
	// Role is the role of people signed in through the directory.
	Role string `toml:"role"`
	// Timeout bounds one bind.
	Timeout Duration `toml:"timeout"`
	// GroupBase is where directory groups are searched (groupOfNames
	// member, groupOfUniqueNames uniqueMember), e.g.
	// "ou=groups,dc=example,dc=org". Required with Groups.
	GroupBase string `toml:"group_base"`
	// Groups maps a group's cn to a role; a person gets the strongest
	// role of their groups, Role when in none.
	Groups map[string]string `toml:"groups"`
}

// Audit is the [audit] section: the audit journal.
type Audit struct {
	// Retention is how long records are kept; "0s" keeps them forever.
	Retention Duration `toml:"retention"`
	// Forward also sends every record to the event collector as an event
	// named pith.audit.<action>, so that its sinks carry it upstream.
	Forward bool `toml:"forward"`
}

// DefaultUsers returns the [users] defaults.
func DefaultUsers() Users {
	return Users{SessionIdle: Duration(30 * time.Minute), SessionMax: Duration(12 * time.Hour),
		OperatorTags: []string{}, EngineerTags: []string{"*"}, AdminTags: []string{"*"},
		LoginAttempts: 5, LoginEvery: Duration(time.Minute), AddressAttempts: 20, AddressEvery: Duration(10 * time.Second),
		LDAP: LDAP{Role: "viewer", Timeout: Duration(5 * time.Second)},
		OIDC: OIDC{Scopes: []string{"openid", "profile"}, NameClaim: "preferred_username", GroupsClaim: "groups",
			Role: "viewer", Label: "OpenID Connect", Timeout: Duration(10 * time.Second)}}
}

// DefaultAudit returns the [audit] defaults: a year and a day, forwarded.
func DefaultAudit() Audit {
	return Audit{Retention: Duration(366 * 24 * time.Hour), Forward: true}
}

func (u *Users) validate(add func(key, format string, args ...any)) {
	if u.SessionIdle < Duration(time.Minute) {
		add("users.session_idle", "at least 1m")
	}
	if u.SessionMax < u.SessionIdle {
		add("users.session_max", "at least users.session_idle (%s)", u.SessionIdle)
	}
	for key, pats := range map[string][]string{"users.operator_tags": u.OperatorTags, "users.engineer_tags": u.EngineerTags, "users.admin_tags": u.AdminTags} {
		for _, p := range pats {
			if _, err := path.Match(strings.TrimPrefix(p, "!"), ""); err != nil || strings.TrimPrefix(p, "!") == "" {
				add(key, "bad pattern %q", p)
			}
		}
	}
	if u.LoginAttempts < 1 {
		add("users.login_attempts", "at least 1")
	}
	if u.AddressAttempts < 1 {
		add("users.address_attempts", "at least 1")
	}
	if u.LoginEvery <= 0 {
		add("users.login_every", "must be positive")
	}
	if u.AddressEvery <= 0 {
		add("users.address_every", "must be positive")
	}
	u.OIDC.validate(add)
	if l := u.LDAP; l.URL != "" {
		if !strings.HasPrefix(l.URL, "ldap://") && !strings.HasPrefix(l.URL, "ldaps://") {
			add("users.ldap.url", "want ldap://host:port or ldaps://host:port, got %q", l.URL)
		}
		if !strings.Contains(l.BindDN, "{name}") {
			add("users.ldap.bind_dn", "must contain {name}, e.g. \"uid={name},ou=people,dc=example,dc=org\"")
		}
		switch l.Role {
		case "viewer", "operator", "engineer", "admin":
		default:
			add("users.ldap.role", "unknown role %q (want viewer, operator, engineer or admin)", l.Role)
		}
		if l.Timeout <= 0 {
			add("users.ldap.timeout", "must be positive")
		}
		if len(l.Groups) > 0 && l.GroupBase == "" {
			add("users.ldap.group_base", "required with users.ldap.groups, e.g. \"ou=groups,dc=example,dc=org\"")
		}
		for g, r := range l.Groups {
			switch r {
			case "viewer", "operator", "engineer", "admin":
			default:
				add("users.ldap.groups."+g, "unknown role %q (want viewer, operator, engineer or admin)", r)
			}
		}
	}
}

func (o *OIDC) validate(add func(key, format string, args ...any)) {
	if o.Issuer == "" {
		return
	}
	if u, err := url.Parse(o.Issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		add("users.oidc.issuer", "want an https:// URL with no query, e.g. \"https://login.example.org/realms/plant\", got %q", o.Issuer)
	}
	if o.ClientID == "" {
		add("users.oidc.client_id", "required with users.oidc.issuer")
	}
	if o.ClientSecret != "" && o.ClientSecretFile != "" {
		add("users.oidc.client_secret_file", "set client_secret or client_secret_file, not both")
	}
	if o.RedirectURL != "" {
		if u, err := url.Parse(o.RedirectURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Path != "/api/v1/session/oidc/callback" {
			add("users.oidc.redirect_url", "want http(s)://HOST/api/v1/session/oidc/callback, got %q", o.RedirectURL)
		}
	}
	if o.NameClaim == "" {
		add("users.oidc.name_claim", "must not be empty (default \"preferred_username\")")
	}
	if len(o.Groups) > 0 && o.GroupsClaim == "" {
		add("users.oidc.groups_claim", "required with users.oidc.groups")
	}
	for g, r := range o.Groups {
		if !validRole(r) {
			add("users.oidc.groups."+g, "unknown role %q (want viewer, operator, engineer or admin)", r)
		}
	}
	if !validRole(o.Role) {
		add("users.oidc.role", "unknown role %q (want viewer, operator, engineer or admin)", o.Role)
	}
	if o.Timeout <= 0 {
		add("users.oidc.timeout", "must be positive")
	}
}

func validRole(r string) bool {
	switch r {
	case "viewer", "operator", "engineer", "admin":
		return true
	}
	return false
}

func (a *Audit) validate(add func(key, format string, args ...any)) {
	if a.Retention < 0 {
		add("audit.retention", "must not be negative")
	} else if a.Retention > 0 && a.Retention < Duration(24*time.Hour) {
		add("audit.retention", "at least 24h (the journal keeps whole days), or 0s for ever")
	}
}
