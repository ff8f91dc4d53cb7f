package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/acq/opcua/opcuatest"
)

// stdout runs f with os.Stdout captured and returns what it printed.
func stdout(t *testing.T, f func() error) (string, error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() { b, _ := io.ReadAll(r); done <- string(b) }()
	ferr := f()
	os.Stdout = old
	w.Close()
	return <-done, ferr
}

// TestDiscoverOutputChecks runs `pith cert --trust` and `pith discover`
// against a node-opcua server over SignAndEncrypt with a user name, and
// `pith check-config` on what discover printed.
func TestDiscoverOutputChecks(t *testing.T) {
	port := opcuatest.Start(t, 3, 10)
	dir := t.TempDir()
	trust := filepath.Join(dir, "trusted")
	endpoint := fmt.Sprintf("opcua://127.0.0.1:%d/pith", port)
	if _, err := stdout(t, func() error { return runCert([]string{"--dir", dir, "--hosts", "localhost"}) }); err != nil {
		t.Fatal(err)
	}
	if _, err := stdout(t, func() error { return runCert([]string{"--trust", endpoint, "--dir", trust}) }); err != nil {
		t.Fatal(err)
	}
	toml, err := stdout(t, func() error {
		return runDiscover([]string{endpoint, "--name", "plc", "--path", "Plant",
			"--security-policy", "Basic256Sha256", "--security-mode", "SignAndEncrypt",
			"--certificate", filepath.Join(dir, "cert.pem"), "--private-key", filepath.Join(dir, "key.pem"),
			"--trust-dir", trust, "--username", "operator", "--password", "secret"})
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`name = "plc.Plant.Values.v0002", node = "ns=1;s=v0002", type = "Double"`, `count = 4`,
		`name = "plc.Plant.Misc.text", node = "ns=1;s=text", type = "String"`, `# Variables left out:`} {
		if !strings.Contains(toml, want) {
			t.Errorf("discover output lacks %q:\n%s", want, toml)
		}
	}
	file := filepath.Join(dir, "pith.toml")
	if err := os.WriteFile(file, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := stdout(t, func() error { return runCheckConfig([]string{file}) }); err != nil {
		t.Errorf("check-config refused discover's output: %v\n%s", err, toml)
	}
}
