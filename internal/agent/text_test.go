package agent

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
)

// TestTextTakesTheRoad runs a Pith (with a calculated tag, so the push
// road goes through the chains' writer) and pushes a line-protocol string
// field: the live stream shows the text, latest and data answer it, and
// the calculated tag is not disturbed.
func TestTextTakesTheRoad(t *testing.T) {
	cfg, err := config.Parse([]byte(`
[http]
listen = "127.0.0.1:0"
[log]
level = "warn"
[[calc]]
tag = "tank.double"
expr = "tank.level * 2"
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	base := startServe(t, context.Background(), cfg).URL

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/live", nil)
	live, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Body.Close()
	seen := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(live.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"tank.state"`) && strings.Contains(sc.Text(), `"FILLING"`) {
				close(seen)
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)

	now := time.Now().UnixMilli()
	resp, err := http.Post(base+"/write?precision=ms", "text/plain", strings.NewReader("tank level=40,state=\"FILLING\" "+itoa(now)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("X-Pith-Points") != "2" {
		t.Fatalf("line protocol: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	select {
	case <-seen:
	case <-ctx.Done():
		t.Fatal("the live stream never showed the text value")
	}
	body := func(path string) string {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := body("/api/v1/latest?tag=tank.state"); !strings.Contains(got, `"value":"FILLING"`) {
		t.Fatalf("latest: %s", got)
	}
	if got := body("/api/v1/data?agg=raw&tag=tank.state&from=0&to=" + itoa(now+1)); !strings.Contains(got, `[`+itoa(now)+`,"FILLING"]`) {
		t.Fatalf("data: %s", got)
	}
	eventually(t, 10*time.Second, "the calculated tag", func() bool {
		return strings.Contains(body("/api/v1/latest?tag=tank.double"), `"value":80`)
	})
}
