package plant

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/testpeer"
)

// opcuaServerDir is the node-opcua test server of the OPC UA acquisition.
const opcuaServerDir = "../acq/opcua/testdata/server"

// startOPCUAServer starts the node-opcua test server (one counter) and
// returns its endpoint; see internal/acq/opcua/testdata/server/server.js.
func startOPCUAServer(t *testing.T) string {
	t.Helper()
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
	cmd := exec.Command("node", "server.js", strconv.Itoa(port), t.TempDir(), "1", "10")
	cmd.Dir = opcuaServerDir
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
	return fmt.Sprintf("opc.tcp://127.0.0.1:%d/pith", port)
}

// TestPlantOPCUA runs an OPC UA station in a plant: its values reach the
// store through the tag table, and control writes go through the audited
// control path with the server's status answered back.
func TestPlantOPCUA(t *testing.T) {
	endpoint := startOPCUAServer(t)
	cfg := parse(t, fmt.Sprintf(`
[[opcua.client]]
name = "ua"
endpoint = %q
tags = [
  { name = "ua.v0", node = "ns=1;s=v0000", type = "Double", sampling_interval = "0s" },
  { name = "ua.sp", node = "ns=1;s=sp_double", type = "Double", writable = true, scale = 2.0 },
  { name = "ua.wrong", node = "ns=1;s=sp_bool", type = "Double", writable = true },
]
`, endpoint))
	p, _ := startPlant(t, cfg)
	waitFor(t, "ua.v0 counting", func() bool { v, q, ok := latest(t, p, "ua.v0"); return ok && v > 3 && q == model.QualityGood })
	ctx := context.Background()
	if err := p.Controller().Control(ctx, "ua.sp", 25, "test"); err != nil {
		t.Fatalf("control: %v", err)
	}
	waitFor(t, "ua.sp written and read back", func() bool { v, _, _ := latest(t, p, "ua.sp"); return v == 25 })
	err := p.Controller().Control(ctx, "ua.wrong", 3, "test")
	if err == nil || !strings.Contains(err.Error(), "BadTypeMismatch") {
		t.Errorf("write of a Double to a Boolean variable: got %v, want the server's BadTypeMismatch", err)
	}
	if err := p.Controller().Control(ctx, "ua.v0", 1, "test"); err == nil || !strings.Contains(err.Error(), "not mark it writable") {
		t.Errorf("write to a read-only OPC UA tag: got %v", err)
	}
	if v, _, _ := latest(t, p, "pith.station.ua.comm"); v != 1 {
		t.Errorf("comm = %v, want 1", v)
	}
	if m, ok := p.Meta()("ua.v0"); !ok || m.Status != "Good (0x00000000)" || m.Source != "opcua:ua" {
		t.Errorf("meta of ua.v0 = %+v, want the raw status Good", m)
	}
	// A reload that only changes the OPC UA section restarts the
	// acquisition.
	cfg2 := parse(t, strings.Replace(fmt.Sprintf(`
[[opcua.client]]
name = "ua"
endpoint = %q
publish_interval = "500ms"
tags = [ { name = "ua.v0", node = "ns=1;s=v0000", type = "Double" } ]
`, endpoint), "\t", "", -1))
	if changed, err := p.Reload(cfg2); err != nil || !changed {
		t.Fatalf("reload: changed %v, err %v", changed, err)
	}
	waitFor(t, "ua.sp of the removed tag turns bad", func() bool { _, q, _ := latest(t, p, "ua.sp"); return q == model.QualityBad })
}
