package agent

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
)

// TestServeProcessing runs `pith serve` with an [[input]] chain and a
// [[calc]]: emoncms posts run through the chain (scale, power to kWh), and
// an import of late data recomputes the calculated tag over its range.
func TestServeProcessing(t *testing.T) {
	cfg, err := config.Parse([]byte(`
[http]
listen = "127.0.0.1:0"
[log]
level = "warn"
[[input]]
tag = "node1.power"
process = [ { scale = 0.001 }, { log = "node1.kw" }, { power_to_kwh = "node1.kwh" }, { kwh_per_day = "node1.kwh_day" } ]
[[calc]]
tag = "site.sum"
expr = "site.a + site.b"
[[calc]]
tag = "node1.w_check"
expr = "node1.kw * 1000"
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	base := startServe(t, context.Background(), cfg).URL
	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post(base+path, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	raw := func(tag string) [][2]float64 {
		t.Helper()
		resp, err := http.Get(base + "/api/v1/data?tag=" + tag + "&from=0&to=4000000000000&points=1000&agg=raw")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct{ Points [][2]float64 }
		json.NewDecoder(resp.Body).Decode(&got)
		return got.Points
	}

	// Two emoncms posts an hour apart at 2 kW: 2 kWh.
	t0 := time.Date(2024, 1, 1, 10, 0, 0, 0, time.UTC).Unix()
	day := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	post("/input/post?node=node1&time="+itoa(t0)+"&json={power:2000}", "")
	post("/input/post?node=node1&time="+itoa(t0+3600)+"&json={power:2000}", "")
	if kwh := raw("node1.kwh"); len(kwh) != 2 || kwh[1][1] != 2 {
		t.Errorf("node1.kwh = %v, want 0 then 2", kwh)
	}
	if kw := raw("node1.kw"); len(kw) != 2 || kw[0][1] != 2 {
		t.Errorf("node1.kw = %v, want 2 kW twice", kw)
	}
	if d := raw("node1.kwh_day"); len(d) != 1 || d[0][1] != 2 || int64(d[0][0]) != day {
		t.Errorf("node1.kwh_day = %v, want 2 at %d", d, day)
	}
	// A calc over a push chain's output is fed by the push path; its
	// result reaches the store through the tag table and the archive.
	deadline := time.Now().Add(20 * time.Second)
	for {
		w := raw("node1.w_check")
		if len(w) >= 1 && w[len(w)-1][1] == 2000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node1.w_check = %v, want 2000", w)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A late post (emonhub's buffer) between the two: the day is
	// recomputed with it, 0.5 h at (2+4)/2 kW twice = 3 kWh.
	post("/input/post?node=node1&time="+itoa(t0+1800)+"&json={power:4000}", "")
	if d := raw("node1.kwh_day"); len(d) != 1 || d[0][1] != 3 {
		t.Errorf("node1.kwh_day after a late post = %v, want 3", d)
	}

	// Import site.a and site.b: site.sum is computed for the range.
	ms := (t0 - 600) * 1000
	post("/api/v1/import", "site.a,"+itoa(ms)+",1\nsite.b,"+itoa(ms+1000)+",10\nsite.a,"+itoa(ms+2000)+",2\n")
	sum := raw("site.sum")
	if len(sum) != 2 || sum[0][1] != 11 || sum[1][1] != 12 || int64(sum[0][0]) != ms+1000 {
		t.Errorf("site.sum = %v, want 11 at %d and 12 at %d", sum, ms+1000, ms+2000)
	}
}
