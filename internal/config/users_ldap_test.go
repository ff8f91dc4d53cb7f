package config

import (
	"strings"
	"testing"
)

// TestLDAPGroupsValidate: a group map needs a base, and each role must be
// known; the error names the key.
func TestLDAPGroupsValidate(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{`groups = { "ops" = "operator" }`, "users.ldap.group_base"},
		{"group_base = \"ou=g,dc=x\"\ngroups = { \"ops\" = \"boss\" }", "users.ldap.groups.ops"},
		{"group_base = \"ou=g,dc=x\"\ngroups = { \"ops\" = \"operator\", \"eng\" = \"engineer\" }", ""},
	} {
		cfg, err := Parse([]byte("[users.ldap]\nurl = \"ldap://127.0.0.1:389\"\nbind_dn = \"uid={name},dc=x\"\n" + tt.body + "\n"))
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
