package agent

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
)

// startSmallBudget runs a Pith whose memory budget is 1 MiB.
func startSmallBudget(t *testing.T) string {
	t.Helper()
	cfg, err := config.Parse([]byte("[http]\nlisten = \"127.0.0.1:0\"\nmax_inflight_bytes = 1048576\n[log]\nlevel = \"warn\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	return startServe(t, context.Background(), cfg).URL
}

// TestBudgetGuardsEveryBodyRoute sends each route that buffers a body a
// request its budget share could never hold with a 1 MiB budget: each is
// refused with 413 before its body is read, the light event path
// included, and the refusals are counted in /metrics.
func TestBudgetGuardsEveryBodyRoute(t *testing.T) {
	base := startSmallBudget(t)
	big := strings.Repeat("x", 600<<10) // more than 1 MiB at the memory each body byte costs
	for _, tt := range []struct {
		path, ctype, encoding, body string
	}{
		{"/write", "text/plain", "", big},
		{"/api/v2/write", "text/plain", "", big},
		{"/api/v1/write", "application/x-protobuf", "snappy", big}, // as much as it may decode to is reserved
		{"/input/post", "application/x-www-form-urlencoded", "", big},
		{"/api/v1/events", "application/json", "", big},
		{"/api/v1/track", "application/json", "", big},
		{"/api/v1/import", "text/csv", "", "tag,time,value\n"},                      // its batch buffers are reserved
		{"/api/v1/query_range", "application/x-www-form-urlencoded", "", big + big}, // a form costs its size
	} {
		req, _ := http.NewRequest(http.MethodPost, base+tt.path, strings.NewReader(tt.body))
		req.Header.Set("Content-Type", tt.ctype)
		if tt.encoding != "" {
			req.Header.Set("Content-Encoding", tt.encoding)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "memory budget") {
			t.Errorf("%s: %s %s, want 413 naming the memory budget", tt.path, resp.Status, b)
		}
	}
	resp, err := http.Post(base+"/write", "text/plain", strings.NewReader("m v=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("small write: %s", resp.Status)
	}
	eventually(t, 5*time.Second, "refusals in /metrics", func() bool {
		return metric(t, base, "pith_sys_http_inflight_refused_total") >= 8
	})
}

// TestBudgetRefusesWhenFull holds most of the budget with a request whose
// body never comes: another write is refused at once with 503 and
// Retry-After, and once the first is gone the budget is whole again.
func TestBudgetRefusesWhenFull(t *testing.T) {
	base := startSmallBudget(t)
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	// 70 KiB declared: 840 KiB of the 1 MiB reserved while it waits.
	fmt.Fprintf(c, "POST /write HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\nm v=1\n", 70<<10)
	eventually(t, 5*time.Second, "the held reservation in /metrics", func() bool {
		return metric(t, base, "pith_sys_http_inflight_bytes") >= 840<<10
	})
	start := time.Now()
	resp, err := http.Post(base+"/write", "text/plain", strings.NewReader(strings.Repeat("m v=1\n", 20<<10/6))) // 240 KiB
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("write beyond the budget: %s Retry-After %q %s", resp.Status, resp.Header.Get("Retry-After"), b)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("refusal took %s, want at once", el)
	}
	c.Close()
	eventually(t, 5*time.Second, "the budget whole again", func() bool {
		return metric(t, base, "pith_sys_http_inflight_bytes") == 0
	})
}

// metric reads one series of /metrics; -1 when absent.
func metric(t testing.TB, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			var v float64
			fmt.Sscan(f[1], &v)
			return v
		}
	}
	return -1
}
