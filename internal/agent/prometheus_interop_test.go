package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/testpeer"
)

// promExpressions are the PromQL expressions TestPrometheusAnswersMatch
// asks both Prometheus and Pith, each as an instant query and as a range
// query. Ranges are whole seconds, and the evaluation times are chosen
// half-way between scrapes, so no sample falls on a window's edge (where
// Prometheus 2.x, closed on the left, and the 3.x engine Pith embeds,
// open on the left, differ by design).
var promExpressions = []string{
	`up`,
	`up{job="pith"}`,
	`up{job="exporter"}`,
	`up{instance=~"127.0.0.1:.*", job!="pith"}`,
	`node_cpu_seconds_total`,
	`node_cpu_seconds_total{mode="idle"}`,
	`node_cpu_seconds_total{mode!="idle"}`,
	`node_cpu_seconds_total{mode=~"us.*|sys.*"}`,
	`node_cpu_seconds_total{mode!~"idle|user"}`,
	`rate(node_cpu_seconds_total{mode="idle"}[10s])`,
	`rate(node_cpu_seconds_total[15s])`,
	`irate(node_cpu_seconds_total[5s])`,
	`increase(http_requests_total[10s])`,
	`sum by (instance) (rate(node_cpu_seconds_total[10s]))`,
	`sum by (mode) (rate(node_cpu_seconds_total[10s]))`,
	`sum without (cpu) (node_cpu_seconds_total)`,
	`avg by (instance) (temperature_celsius)`,
	`max by (room) (temperature_celsius)`,
	`min(temperature_celsius)`,
	`count by (job) (up)`,
	`topk(3, node_cpu_seconds_total)`,
	`bottomk(2, rate(http_requests_total[10s]))`,
	`histogram_quantile(0.9, rate(request_duration_seconds_bucket[10s]))`,
	`histogram_quantile(0.5, sum by (le) (rate(request_duration_seconds_bucket[10s])))`,
	`histogram_quantile(0.99, sum by (le, instance) (increase(request_duration_seconds_bucket[15s])))`,
	`rate(request_duration_seconds_sum[10s]) / rate(request_duration_seconds_count[10s])`,
	`absent(up{job="nonexistent"})`,
	`absent(up{job="pith"})`,
	`absent(nonexistent_metric{a="b"})`,
	`avg_over_time(temperature_celsius[10s])`,
	`max_over_time(temperature_celsius[15s])`,
	`min_over_time(temperature_celsius[15s])`,
	`count_over_time(up[10s])`,
	`sum_over_time(temperature_celsius[5s])`,
	`delta(temperature_celsius[10s])`,
	`deriv(temperature_celsius[10s])`,
	`http_requests_total > 20`,
	`sum by (code) (http_requests_total)`,
	`count(count by (cpu) (node_cpu_seconds_total))`,
	`quantile(0.5, temperature_celsius)`,
	`stddev by (instance) (temperature_celsius)`,
	`label_replace(up, "host", "$1", "instance", "(.*):.*")`,
	`sum by (job) (scrape_samples_scraped)`,
	`rate(http_requests_total{code=~"5.."}[10s])`,
	`node_cpu_seconds_total offset 5s`,
	`changes(temperature_celsius[15s])`,
	`resets(jobs_total[15s])`,
	`rate(jobs_total[15s])`,
	`up{job="exporter"} * on (instance) group_left () sum by (instance) (temperature_celsius)`,
	`sort_desc(sum by (instance, mode) (rate(node_cpu_seconds_total[10s])))`,
}

// exposition serves a small node_exporter-like target: counters, a
// counter that resets, gauges with labels (one value holding dots) and a
// classic histogram, changing at every scrape. factor tells two targets
// apart.
func exposition(factor float64) http.Handler {
	var scrapes atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := float64(scrapes.Add(1))
		var b strings.Builder
		b.WriteString("# TYPE node_cpu_seconds_total counter\n")
		for cpu := 0; cpu < 2; cpu++ {
			for i, mode := range []string{"idle", "user", "system"} {
				fmt.Fprintf(&b, "node_cpu_seconds_total{cpu=\"%d\",mode=\"%s\"} %g\n", cpu, mode, 1000*factor+n*factor*float64(3-i)*0.25+float64(cpu))
			}
		}
		b.WriteString("# TYPE http_requests_total counter\n")
		fmt.Fprintf(&b, "http_requests_total{code=\"200\",method=\"get\"} %g\n", n*5*factor)
		fmt.Fprintf(&b, "http_requests_total{code=\"200\",method=\"post\"} %g\n", n*2*factor)
		fmt.Fprintf(&b, "http_requests_total{code=\"500\",method=\"get\"} %g\n", math.Floor(n/3)*factor)
		b.WriteString("# TYPE jobs_total counter\n")
		fmt.Fprintf(&b, "jobs_total %g\n", float64(int(n)%7)*3*factor)
		b.WriteString("# TYPE temperature_celsius gauge\n")
		fmt.Fprintf(&b, "temperature_celsius{room=\"hall\",sensor=\"boiler.in\"} %g\n", 20+float64(int(n)%5)*0.5*factor)
		fmt.Fprintf(&b, "temperature_celsius{room=\"hall\",sensor=\"boiler.out\"} %g\n", 60-float64(int(n)%3)*1.25)
		fmt.Fprintf(&b, "temperature_celsius{room=\"office\",sensor=\"wall\"} %g\n", 21.5+factor*0.1)
		b.WriteString("# TYPE request_duration_seconds histogram\n")
		cum := 0.0
		for i, le := range []string{"0.05", "0.1", "0.25", "0.5", "1", "+Inf"} {
			cum += float64([]int{1, 2, 1, 2, 1, 1}[i])
			fmt.Fprintf(&b, "request_duration_seconds_bucket{le=\"%s\"} %g\n", le, n*cum*factor)
		}
		fmt.Fprintf(&b, "request_duration_seconds_sum %g\n", n*3.25*factor)
		fmt.Fprintf(&b, "request_duration_seconds_count %g\n", n*8*factor)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, b.String())
	})
}

// TestPrometheusAnswersMatch runs the real Prometheus (Debian's prometheus
// package): it scrapes two exporter targets and Pith's own /metrics, keeps
// the samples in its TSDB and remote-writes them to Pith. Then every
// expression of promExpressions, as an instant and as a range query, must
// give the same answer from both, within floating-point tolerance.
func TestPrometheusAnswersMatch(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testpeer.Missing(t, "prometheus not found (apt-get install prometheus): skipping the comparison with Prometheus")
	}
	if testing.Short() {
		t.Skip("scrapes for 25 s")
	}
	cfg, err := config.Parse([]byte("[http]\nlisten = \"127.0.0.1:0\"\n[log]\nlevel = \"warn\"\n[ingest]\nnew_tags_per_minute = 100000\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	pith := startServe(t, context.Background(), cfg).URL
	exp1, exp2 := httptest.NewServer(exposition(1)), httptest.NewServer(exposition(2))
	defer exp1.Close()
	defer exp2.Close()

	promAddr := freeAddr(t)
	dir := t.TempDir()
	host := func(u string) string { return strings.TrimPrefix(u, "http://") }
	yml := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: exporter
    static_configs:
      - targets: [%q, %q]
  - job_name: pith
    static_configs:
      - targets: [%q]
remote_write:
  - url: %q
    queue_config:
      min_shards: 1
      max_shards: 1
      batch_send_deadline: 200ms
      min_backoff: 50ms
      max_backoff: 500ms
    metadata_config:
      send: false
`, host(exp1.URL), host(exp2.URL), host(pith), pith+"/api/v1/write")
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr, "--log.level=warn")
	var logBuf strings.Builder
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", logBuf.String())
		}
	}()
	prom := "http://" + promAddr

	// Scrape for a while, then pick an evaluation time half-way between
	// scrapes, in the past, and wait until Pith has every sample up to it.
	// Prometheus remote-writes only samples scraped after its queue
	// started, so the windows must begin after Pith's first sample.
	time.Sleep(20 * time.Second)
	const span, maxRange = 12, 15 // seconds: range query length, longest [range] above
	var end float64
	for deadline := time.Now().Add(time.Minute); ; {
		if time.Now().After(deadline) {
			t.Fatalf("no window where Pith and Prometheus hold the same samples")
		}
		end = evalTime(t, prom)
		first, ok := pithFirstUp(pith, end)
		if ok && end-span-maxRange-2 > first && pithHasUpTo(pith, end+2) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	start := end - span
	checked := 0
	for _, expr := range promExpressions {
		instant := url.Values{"query": {expr}, "time": {fmtSec(end)}}
		ranged := url.Values{"query": {expr}, "start": {fmtSec(start)}, "end": {fmtSec(end)}, "step": {"2"}}
		for _, q := range []struct {
			path string
			form url.Values
		}{{"/api/v1/query", instant}, {"/api/v1/query_range", ranged}} {
			want, err := promQuery(prom+q.path, q.form)
			if err != nil {
				t.Errorf("%s from Prometheus: %v", expr, err)
				continue
			}
			got, err := promQuery(pith+q.path, q.form)
			if err != nil {
				t.Errorf("%s from Pith: %v", expr, err)
				continue
			}
			if diff := compareAnswers(want, got); diff != "" {
				t.Errorf("%s %s: %s\nPrometheus: %s\nPith:       %s", q.path, expr, diff, want.raw, got.raw)
				continue
			}
			if len(want.series) == 0 && !strings.HasPrefix(expr, "absent") {
				t.Errorf("%s %s: no series from Prometheus; the test data does not exercise it", q.path, expr)
			}
			checked++
		}
	}
	t.Logf("%d expressions, %d answers equal to Prometheus's", len(promExpressions), checked)
}

// freeAddr returns a loopback address nobody listens on (for a moment).
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// evalTime returns a time (Unix seconds) a few scrapes in the past whose
// distance to every target's scrape phase is largest.
func evalTime(t *testing.T, prom string) float64 {
	now := float64(time.Now().UnixMilli()) / 1000
	a, err := promQuery(prom+"/api/v1/query", url.Values{"query": {"up[3s]"}, "time": {fmtSec(now)}})
	if err != nil || len(a.series) == 0 {
		t.Fatalf("raw up samples from Prometheus: %v %s", err, a.raw)
	}
	var phases []float64 // ms within the second of each target's scrapes
	for _, s := range a.series {
		for _, p := range s.points {
			phases = append(phases, math.Mod(p[0]*1000, 1000))
		}
	}
	slices.Sort(phases)
	best, gap := 0.0, -1.0
	for i, p := range phases {
		next := 1000.0
		if i+1 < len(phases) {
			next = phases[i+1]
		} else {
			next = phases[0] + 1000
		}
		if next-p > gap {
			best, gap = math.Mod(p+(next-p)/2, 1000), next-p
		}
	}
	if gap < 100 {
		t.Fatalf("scrape phases %v leave no time half-way between scrapes", phases)
	}
	sec := math.Floor(now) - 4
	return sec + math.Round(best)/1000
}

// pithHasUpTo reports whether Pith holds an up sample after t for every
// target (remote_write sends in order with one shard, so every other
// sample before t is there too).
func pithHasUpTo(pith string, t float64) bool {
	a, err := promQuery(pith+"/api/v1/query", url.Values{"query": {"timestamp(up)"}, "time": {fmtSec(t + 5)}})
	if err != nil || len(a.series) < 3 {
		return false
	}
	for _, s := range a.series {
		if len(s.points) == 0 || s.points[0][1] < t {
			return false
		}
	}
	return true
}

// pithFirstUp returns the time of the oldest up sample Pith holds of
// every target, as of t.
func pithFirstUp(pith string, t float64) (float64, bool) {
	a, err := promQuery(pith+"/api/v1/query", url.Values{"query": {"up[2m]"}, "time": {fmtSec(t)}})
	if err != nil || len(a.series) < 3 {
		return 0, false
	}
	first := 0.0
	for _, s := range a.series {
		if len(s.points) == 0 {
			return 0, false
		}
		first = max(first, s.points[0][0])
	}
	return first, true
}

func fmtSec(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }

// promAnswer is a decoded query answer: its series sorted by labels.
type promAnswer struct {
	kind   string
	series []promSeries
	raw    string
}

type promSeries struct {
	metric string       // labels, canonical
	points [][2]float64 // time (s), value
}

func promQuery(u string, form url.Values) (promAnswer, error) {
	resp, err := http.PostForm(u, form)
	if err != nil {
		return promAnswer{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return promAnswer{}, fmt.Errorf("decode %s: %w", body, err)
	}
	if r.Status != "success" {
		return promAnswer{}, fmt.Errorf("%d %s", resp.StatusCode, r.Error)
	}
	a := promAnswer{kind: r.Data.ResultType, raw: string(r.Data.Result)}
	parsePoint := func(p []any) [2]float64 {
		v, _ := strconv.ParseFloat(p[1].(string), 64)
		return [2]float64{p[0].(float64), v}
	}
	switch a.kind {
	case "scalar":
		var p []any
		if err := json.Unmarshal(r.Data.Result, &p); err != nil {
			return a, err
		}
		a.series = []promSeries{{points: [][2]float64{parsePoint(p)}}}
	default:
		var rs []struct {
			Metric map[string]string `json:"metric"`
			Value  []any             `json:"value"`
			Values [][]any           `json:"values"`
		}
		if err := json.Unmarshal(r.Data.Result, &rs); err != nil {
			return a, err
		}
		for _, x := range rs {
			keys := make([]string, 0, len(x.Metric))
			for k := range x.Metric {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			var m strings.Builder
			for _, k := range keys {
				fmt.Fprintf(&m, "%s=%q,", k, x.Metric[k])
			}
			s := promSeries{metric: m.String()}
			if x.Value != nil {
				s.points = append(s.points, parsePoint(x.Value))
			}
			for _, p := range x.Values {
				s.points = append(s.points, parsePoint(p))
			}
			a.series = append(a.series, s)
		}
		slices.SortFunc(a.series, func(x, y promSeries) int { return strings.Compare(x.metric, y.metric) })
	}
	return a, nil
}

// compareAnswers returns "" when the answers hold the same series, times
// and values (to 1e-9 relative), else what differs.
func compareAnswers(want, got promAnswer) string {
	if want.kind != got.kind {
		return fmt.Sprintf("result type %s, want %s", got.kind, want.kind)
	}
	if len(want.series) != len(got.series) {
		return fmt.Sprintf("%d series, want %d", len(got.series), len(want.series))
	}
	for i := range want.series {
		w, g := want.series[i], got.series[i]
		if w.metric != g.metric {
			return fmt.Sprintf("series %s, want %s", g.metric, w.metric)
		}
		if len(w.points) != len(g.points) {
			return fmt.Sprintf("series %s: %d points, want %d", w.metric, len(g.points), len(w.points))
		}
		for j := range w.points {
			wp, gp := w.points[j], g.points[j]
			if wp[0] != gp[0] {
				return fmt.Sprintf("series %s point %d: time %v, want %v", w.metric, j, gp[0], wp[0])
			}
			if math.IsNaN(wp[1]) && math.IsNaN(gp[1]) {
				continue
			}
			if math.Abs(wp[1]-gp[1]) > 1e-9*math.Max(1, math.Abs(wp[1])) {
				return fmt.Sprintf("series %s at %v: %v, want %v", w.metric, wp[0], gp[1], wp[1])
			}
		}
	}
	return ""
}
