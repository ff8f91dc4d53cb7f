package users

import (
	"fmt"

	"github.com/pith-historian/pith/internal/api"
)

// Role is what a person may do (docs/security.md).
type Role string

// The roles, weakest first.
const (
	RoleViewer   Role = "viewer"   // reads
	RoleOperator Role = "operator" // also acknowledges alarms and writes the tags operators may write
	RoleEngineer Role = "engineer" // also writes the tags engineers may write, edits schedules, rules, dashboards and pictures
	RoleAdmin    Role = "admin"    // also users, keys, reloads, backups, deletes and the audit journal
)

// Roles lists the roles, weakest first.
var Roles = []Role{RoleViewer, RoleOperator, RoleEngineer, RoleAdmin}

// ParseRole checks a role name.
func ParseRole(s string) (Role, error) {
	for _, r := range Roles {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("unknown role %q (want viewer, operator, engineer or admin)", s)
}

// Perms returns the permissions of the role.
func (r Role) Perms() api.Perms {
	switch r {
	case RoleViewer:
		return api.Perms(api.PermRead)
	case RoleOperator:
		return api.Perms(api.PermRead | api.PermAck | api.PermControl)
	case RoleEngineer:
		return api.Perms(api.PermRead | api.PermAck | api.PermControl | api.PermEdit)
	case RoleAdmin:
		return api.PermAll
	}
	return 0
}

// TagRules are the tag patterns each role may write (api.MatchTags).
type TagRules struct {
	Operator []string // tags marked operable; none by default
	Engineer []string // "*" by default
	Admin    []string // "*" by default
}

// DefaultTagRules lets engineers and admins write every writable tag and
// operators none until the config names them.
func DefaultTagRules() TagRules {
	return TagRules{Engineer: []string{"*"}, Admin: []string{"*"}}
}

func (t TagRules) of(r Role) []string {
	switch r {
	case RoleOperator:
		return nonNil(t.Operator)
	case RoleEngineer:
		return nonNil(t.Engineer)
	case RoleAdmin:
		return nonNil(t.Admin)
	}
	return []string{}
}

// nonNil keeps an empty list empty: a nil list on an admin means every tag.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
