package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/testpeer"
)

// opcuaServerDir is the node-opcua test server of the OPC UA acquisition.
const opcuaServerDir = "../../internal/acq/opcua/testdata/server"

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
	if os.Getenv("PITH_TEST_OPCUA") == "" {
		testpeer.Missing(t, "PITH_TEST_OPCUA not set (set it to 1 and run `npm ci` in internal/acq/opcua/testdata/server): test skipped")
	}
	if _, err := os.Stat(opcuaServerDir + "/node_modules/node-opcua"); err != nil {
		testpeer.Missing(t, "node-opcua not installed (run `npm ci` in internal/acq/opcua/testdata/server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("node", "server.js", strconv.Itoa(port), t.TempDir(), "3", "10")
	cmd.Dir = opcuaServerDir
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		testpeer.Missing(t, "node cannot start: %v", err)
	}
	defer func() { in.Close(); cmd.Wait() }()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "READY") {
				ready <- true
			}
		}
	}()
	select {
	case <-ready:
	case <-time.After(90 * time.Second):
		t.Fatal("node-opcua server did not start")
	}
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
	for _, want := range []string{`name = "plc.Plant.Values.v0002", node = "ns=1;s=v0002", type = "Double"`, `count = 4`, `# Variables left out:`} {
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
