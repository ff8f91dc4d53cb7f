package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
)

// TestPushedValuesTakeTheRoad runs a Pith and pushes a value by line
// protocol: the live stream, an alarm and a calculated tag see it through
// the tag table, exactly as they see acquired values, and the current
// value answers at once.
func TestPushedValuesTakeTheRoad(t *testing.T) {
	cfg, err := config.Parse([]byte(`
[http]
listen = "127.0.0.1:0"
[log]
level = "warn"
[alarms]
enabled = true
[[alarms.alarm]]
name = "tank.high"
type = "hi"
tag = "tank.level"
limit = 90.0
[[calc]]
tag = "tank.double"
expr = "tank.level * 2"
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	base := startServe(t, context.Background(), cfg).URL

	// The live stream, opened before the push.
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
			if strings.Contains(sc.Text(), `"tank.level"`) && strings.Contains(sc.Text(), "95") {
				close(seen)
				return
			}
		}
	}()
	time.Sleep(100 * time.Millisecond) // the stream subscribes before its first answer

	now := time.Now().UnixMilli()
	resp, err := http.Post(base+"/write?precision=ms", "text/plain", strings.NewReader("tank level=95 "+itoa(now)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("line protocol: %d %s", resp.StatusCode, b)
	}

	select {
	case <-seen:
	case <-ctx.Done():
		t.Fatal("the live stream never showed the pushed value")
	}
	get := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the alarm on the pushed tag", func() bool {
		var got struct {
			Alarms []struct{ Name, State string }
		}
		get("/api/v1/alarms", &got)
		return len(got.Alarms) == 1 && got.Alarms[0].State == "active"
	})
	eventually(t, 10*time.Second, "the calculated tag over the pushed tag", func() bool {
		var got struct {
			Values []struct {
				Tag   string
				TS    int64
				Value float64
			}
		}
		get("/api/v1/latest?tag=tank.double&tag=tank.level", &got)
		return len(got.Values) == 2 && got.Values[0].Value == 190 && got.Values[1].Value == 95 && got.Values[1].TS == now
	})
}
