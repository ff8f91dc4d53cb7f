package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pith-historian/pith/internal/users"
)

func TestUserCommand(t *testing.T) {
	dir := t.TempDir()
	pwf := filepath.Join(dir, "pw")
	os.WriteFile(pwf, []byte("correct horse battery\n"), 0o600)
	data := filepath.Join(dir, "data")
	run := func(args ...string) error {
		return runUser(append([]string{"--data", data, "--password-file", pwf}, args...))
	}
	if err := run("add", "otto", "--role", "operator"); err == nil {
		t.Error("first account an operator: accepted")
	}
	for _, args := range [][]string{
		{"add", "ada", "--role", "admin"},
		{"add", "otto", "--role", "operator"},
		{"role", "otto", "engineer"},
		{"passwd", "otto"},
		{"disable", "otto"},
		{"list"},
	} {
		if err := run(args...); err != nil {
			t.Fatalf("pith user %v: %v", args, err)
		}
	}
	if err := run("disable", "ada"); err == nil {
		t.Error("the last admin disabled")
	}
	if err := run("role", "otto", "king"); err == nil {
		t.Error("unknown role accepted")
	}
	acc, _ := users.OpenAccounts(data)
	a, err := acc.Get("otto")
	if err != nil || a.Role != users.RoleEngineer || !a.Disabled {
		t.Errorf("otto: %+v %v", a, err)
	}
	if ok, _ := users.VerifyPassword(a.Hash, "correct horse battery"); !ok {
		t.Error("password not set")
	}
}
