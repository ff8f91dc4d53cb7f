// Package opcuatest starts the node-opcua test server
// (internal/acq/opcua/testdata/server/server.js) for tests of other
// packages: a real OPC UA peer that nobody here wrote.
package opcuatest

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/testpeer"
)

// ServerDir is the directory of the server script and its node_modules.
func ServerDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "server")
}

// Start runs the server with count variables changing at rate per second
// on a free loopback port and returns the port; the server stops with the
// test. It skips (fails under PITH_REQUIRE_PEERS=1) unless PITH_TEST_OPCUA
// is set and node-opcua is installed.
func Start(t testing.TB, count, rate int) int {
	t.Helper()
	dir := ServerDir()
	if os.Getenv("PITH_TEST_OPCUA") == "" {
		testpeer.Missing(t, "PITH_TEST_OPCUA not set (set it to 1 and run `npm ci` in internal/acq/opcua/testdata/server): test skipped")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "node-opcua")); err != nil {
		testpeer.Missing(t, "node-opcua not installed (run `npm ci` in internal/acq/opcua/testdata/server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("node", "server.js", strconv.Itoa(port), t.TempDir(), strconv.Itoa(count), strconv.Itoa(rate))
	cmd.Dir = dir
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		testpeer.Missing(t, "node cannot start: %v", err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
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
	return port
}
