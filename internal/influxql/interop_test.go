package influxql

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/testpeer"
)

// The interop tests run the real peers: Debian's influxdb package
// (InfluxDB 1.x, /usr/bin/influxd, or the binary PITH_TEST_INFLUXD names),
// started on private ports with its own data directory, and the influx npm
// client (testdata/influx-client, installed by `npm ci` there).

// freePort returns a loopback port nobody listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startInfluxd starts InfluxDB 1.x and returns its base URL.
func startInfluxd(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("PITH_TEST_INFLUXD")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("influxd"); err != nil {
			testpeer.Missing(t, "influxd not found (apt-get install influxdb, or set PITH_TEST_INFLUXD): InfluxDB interop test skipped")
		}
	}
	dir := t.TempDir()
	httpAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	conf := fmt.Sprintf(`reporting-enabled = false
bind-address = "127.0.0.1:%d"
[meta]
  dir = %q
[data]
  dir = %q
  wal-dir = %q
  query-log-enabled = false
[monitor]
  store-enabled = false
[subscriber]
  enabled = false
[http]
  bind-address = %q
  log-enabled = false
[logging]
  level = "warn"
`, freePort(t), filepath.Join(dir, "meta"), filepath.Join(dir, "data"), filepath.Join(dir, "wal"), httpAddr)
	cfg := filepath.Join(dir, "influxdb.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "influxd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start influxd: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	base := "http://" + httpAddr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/ping")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent {
				return base
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "influxd.log"))
			t.Fatalf("influxd did not answer /ping in 30 s: %v\n%s", err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// influxPost sends a POST to InfluxDB and fails the test unless it answers want.
func influxPost(t testing.TB, u string, body []byte, want int) {
	t.Helper()
	resp, err := http.Post(u, "text/plain", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %s", u, resp.StatusCode, b)
	}
}

// loadInflux creates database db in InfluxDB and writes the lines (ms).
func loadInflux(t testing.TB, base, db string, lines []string) {
	t.Helper()
	influxPost(t, base+"/query?"+url.Values{"q": {"CREATE DATABASE " + strconv.Quote(db)}}.Encode(), nil, 200)
	influxPost(t, base+"/write?precision=ms&db="+url.QueryEscape(db), []byte(strings.Join(lines, "\n")+"\n"), 204)
}

// TestInteropScripts checks that the expected answers of the query
// scripts are InfluxDB's: the same data is written to a real influxd and
// every script query (but those marked nopeer) must get the same answer.
func TestInteropScripts(t *testing.T) {
	base := startInfluxd(t)
	for i, s := range readScripts(t) {
		db := fmt.Sprintf("script%d", i)
		loadInflux(t, base, db, s.load)
		for _, e := range s.evals {
			if e.nopeer {
				continue
			}
			v := url.Values{"q": {e.query}, "db": {db}}
			if e.epoch != "" {
				v.Set("epoch", e.epoch)
			}
			req, _ := http.NewRequest(http.MethodGet, base+"/query?"+v.Encode(), nil)
			if e.csv {
				req.Header.Set("Accept", "application/csv")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != e.status || !sameAnswer(e.csv, string(body), e.want) {
				t.Errorf("%s:%d: InfluxDB answers %s\nwith %d %s\nthe script expects %d %s", s.name, e.line, e.query, resp.StatusCode, body, e.status, e.want)
			}
		}
	}
}

// nodeAnswer is what the influx npm client returned for one statement.
type nodeAnswer struct {
	Raw       any    `json:"raw"`
	RawError  string `json:"rawError"`
	Rows      any    `json:"rows"`
	RowsError string `json:"rowsError"`
}

// TestInteropNodeClient writes the points of the select script through
// the influx npm client to InfluxDB and to Pith (line protocol, /write),
// then runs the script queries through the client's query API against
// both: both must give the client the same answers.
func TestInteropNodeClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testpeer.Missing(t, "node not found (apt-get install nodejs npm): influx npm client test skipped")
	}
	dir, _ := filepath.Abs(filepath.Join("testdata", "influx-client"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "influx", "package.json")); err != nil {
		testpeer.Missing(t, "the influx npm client is not installed: run `npm ci` in %s", dir)
	}
	base := startInfluxd(t)
	scripts := readScripts(t)
	var load []string
	var queries []map[string]string
	for _, s := range scripts {
		if s.name == "select.txt" {
			load = s.load
		}
		for _, e := range s.evals {
			if e.nopeer || e.csv {
				continue
			}
			queries = append(queries, map[string]string{"q": e.query, "precision": e.epoch})
		}
	}
	if len(load) == 0 || len(queries) < 40 {
		t.Fatalf("scripts give %d data lines and %d queries", len(load), len(queries))
	}
	// Pith as a running Pith serves them: line protocol in (the points
	// keep their measurement, tags and field as labels), InfluxQL out.
	db := openStore(t)
	mux := http.NewServeMux()
	lp := ingest.NewLineProtocol(db, ingest.DefaultLineProtocolOptions())
	mux.Handle("/write", lp)
	mux.HandleFunc("/ping", lp.Ping)
	mux.Handle("/query", NewHandler(NewEngine(db, NewStoreCatalog(db), DefaultOptions()), nil, slog.New(slog.DiscardHandler)))
	pith := httptest.NewServer(mux)
	defer pith.Close()

	server := func(name, base string) map[string]any {
		u, _ := url.Parse(base)
		port, _ := strconv.Atoi(u.Port())
		return map[string]any{"name": name, "host": u.Hostname(), "port": port, "database": "interop"}
	}
	plan, _ := json.Marshal(map[string]any{"servers": []any{server("influxdb", base), server("pith", pith.URL)}, "write": load, "queries": queries})
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, plan, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join(dir, "query.js"), planFile)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node query.js: %v\n%s", err, stderr.String())
	}
	var res struct {
		Results []struct {
			Q         string                `json:"q"`
			Precision string                `json:"precision"`
			Answers   map[string]nodeAnswer `json:"answers"`
		} `json:"results"`
		Measurements map[string][]string `json:"measurements"`
		Series       map[string][]string `json:"series"`
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("decode node output: %v\n%s", err, out)
	}
	if len(res.Results) != len(queries) {
		t.Fatalf("node answered %d of %d queries", len(res.Results), len(queries))
	}
	for _, r := range res.Results {
		a, b := r.Answers["influxdb"], r.Answers["pith"]
		if a.RawError != "" {
			// A statement InfluxDB refuses must be refused by Pith too.
			if b.RawError == "" {
				t.Errorf("%s: InfluxDB refused (%s), Pith answered %v", r.Q, a.RawError, b.Raw)
			}
			continue
		}
		if !reflect.DeepEqual(normNumbers(a.Raw), normNumbers(b.Raw)) || a.RawError != b.RawError {
			ja, _ := json.Marshal(a.Raw)
			jb, _ := json.Marshal(b.Raw)
			t.Errorf("%s (epoch %q): queryRaw\nInfluxDB %s %s\n    Pith %s %s", r.Q, r.Precision, ja, a.RawError, jb, b.RawError)
		}
		if !reflect.DeepEqual(normNumbers(a.Rows), normNumbers(b.Rows)) || a.RowsError != b.RowsError {
			ja, _ := json.Marshal(a.Rows)
			jb, _ := json.Marshal(b.Rows)
			t.Errorf("%s (epoch %q): query\nInfluxDB %s %s\n    Pith %s %s", r.Q, r.Precision, ja, a.RowsError, jb, b.RowsError)
		}
	}
	if !reflect.DeepEqual(res.Measurements["influxdb"], res.Measurements["pith"]) {
		t.Errorf("getMeasurements: InfluxDB %v, Pith %v", res.Measurements["influxdb"], res.Measurements["pith"])
	}
	if len(res.Series["pith"]) == 0 || !reflect.DeepEqual(res.Series["influxdb"], res.Series["pith"]) {
		t.Errorf("getSeries: InfluxDB %v, Pith %v", res.Series["influxdb"], res.Series["pith"])
	}
	t.Logf("%d statements through the influx npm client: InfluxDB and Pith agree", len(res.Results))
}

// TestInteropGrafanaCaptures replays the Grafana captures (but the nopeer
// ones) against a real InfluxDB holding grafanaData in the database the
// captures name: its answers must be the expected ones that
// TestGrafanaCaptures checks Pith against. With -update-captures it
// writes them instead.
func TestInteropGrafanaCaptures(t *testing.T) {
	base := startInfluxd(t)
	loadInflux(t, base, "telegraf", grafanaData())
	n := 0
	for _, c := range readCaptures(t) {
		if c.nopeer {
			continue
		}
		n++
		resp, err := http.DefaultClient.Do(c.request(t, base))
		if err != nil {
			t.Fatal(err)
		}
		body := decoded(t, resp.Header, resp.Body)
		resp.Body.Close()
		if *updateCaptures {
			if err := os.WriteFile(c.file(), body, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK || !sameAnswer(false, string(body), c.want) {
			t.Errorf("%s (%s): InfluxDB answers\n%d %s\nthe capture expects %s", c.name, c.desc, resp.StatusCode, body, c.want)
		}
	}
	t.Logf("%d Grafana captures: InfluxDB gives the expected answers", n)
}
