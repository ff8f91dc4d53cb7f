package config

import (
	"strings"
	"testing"
)

// TestOIDCValidate: [users.oidc] is checked at load, each error naming its
// key; an empty issuer leaves the rest unchecked (off).
func TestOIDCValidate(t *testing.T) {
	const ok = "issuer = \"https://login.example.org/realms/plant\"\nclient_id = \"pith\"\n"
	for _, tt := range []struct{ body, want string }{
		{ok, ""},
		{ok + "client_secret = \"s\"\nredirect_url = \"https://pith.example.org/api/v1/session/oidc/callback\"\ngroups = { \"ops\" = \"operator\" }", ""},
		{"client_id = \"\"\nrole = \"boss\"", ""}, // off
		{"issuer = \"login.example.org\"\nclient_id = \"pith\"", "users.oidc.issuer"},
		{"issuer = \"https://idp.example/?x=1\"\nclient_id = \"pith\"", "users.oidc.issuer"},
		{"issuer = \"https://idp.example\"", "users.oidc.client_id"},
		{ok + "client_secret = \"s\"\nclient_secret_file = \"/etc/pith/oidc\"", "users.oidc.client_secret_file"},
		{ok + "redirect_url = \"https://pith.example.org/callback\"", "users.oidc.redirect_url"},
		{ok + "name_claim = \"\"", "users.oidc.name_claim"},
		{ok + "groups_claim = \"\"\ngroups = { \"ops\" = \"operator\" }", "users.oidc.groups_claim"},
		{ok + "groups = { \"ops\" = \"boss\" }", "users.oidc.groups.ops"},
		{ok + "role = \"root\"", "users.oidc.role"},
		{ok + "timeout = \"0s\"", "users.oidc.timeout"},
	} {
		cfg, err := Parse([]byte("[users.oidc]\n" + tt.body + "\n"))
		if err == nil {
			err = cfg.Validate()
		}
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.body, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want an error naming %s", tt.body, err, tt.want)
		}
	}
}
