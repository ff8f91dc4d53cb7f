package influxql

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// updateCaptures rewrites the expected answers of testdata/grafana:
// TestInteropGrafanaCaptures from a real InfluxDB, TestGrafanaCaptures
// from Pith for the captures InfluxDB cannot answer alike (nopeer).
var updateCaptures = flag.Bool("update-captures", false, "rewrite testdata/grafana/*.json")

// grafanaData is the data behind the Grafana captures: an hour of
// Telegraf-like cpu series every 10 s and two boilers, one with a gap.
// Values are multiples of 0.25, so sums are exact whatever the order.
func grafanaData() []string {
	const t0 = 1700000000000
	var out []string
	for i := 0; i < 360; i++ {
		t := int64(t0 + i*10000)
		for h, host := range []string{"server01", "server02"} {
			idle := 50 + float64((i*7+h*13)%80)/4
			user := float64((i*11+h*5)%120) / 4
			out = append(out, fmt.Sprintf("cpu,cpu=cpu-total,host=%s usage_idle=%g,usage_user=%g %d", host, idle, user, t))
		}
		if i%3 == 0 {
			out = append(out, fmt.Sprintf("cpu,cpu=cpu0,host=server01 usage_user=%g %d", float64((i*3)%90)/4, t))
		}
		out = append(out, fmt.Sprintf("boiler,site=plant1 temp=%g,press=%g %d", 60+float64((i*5)%40)/4, 1+float64(i%8)/4, t))
		if i%3 == 0 && (i < 120 || i >= 180) {
			out = append(out, fmt.Sprintf("boiler,site=plant2 temp=%g %d", 70-float64((i*9)%60)/4, t))
		}
	}
	return out
}

// capture is one request Grafana's InfluxDB datasource sends.
type capture struct {
	name   string
	desc   string
	nopeer bool   // relative to now() or refused by Pith: checked against Pith's own answer
	raw    []byte // the HTTP request
	want   string // the expected answer
}

// readCaptures reads testdata/grafana: NAME.http holds the request
// (comment lines first, "# nopeer" among them for a capture InfluxDB
// cannot be asked alike), NAME.json the expected answer.
func readCaptures(t testing.TB) []capture {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "grafana", "*.http"))
	if len(files) == 0 {
		t.Fatal("no captures in testdata/grafana")
	}
	var out []capture
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := capture{name: strings.TrimSuffix(filepath.Base(f), ".http")}
		for bytes.HasPrefix(b, []byte("#")) {
			line, rest, _ := bytes.Cut(b, []byte("\n"))
			if s := strings.TrimSpace(string(line[1:])); s == "nopeer" {
				c.nopeer = true
			} else {
				c.desc += s
			}
			b = rest
		}
		c.raw = b
		if w, err := os.ReadFile(strings.TrimSuffix(f, ".http") + ".json"); err == nil {
			c.want = string(w)
		} else if !*updateCaptures {
			t.Fatalf("%s: no expected answer: %v", c.name, err)
		}
		out = append(out, c)
	}
	return out
}

// request parses the capture into a request for base (a server URL, or
// "" for a handler called directly).
func (c capture) request(t testing.TB, base string) *http.Request {
	t.Helper()
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(c.raw)))
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	if base == "" {
		req.RemoteAddr = "127.0.0.1:50000"
		return req
	}
	out, err := http.NewRequest(req.Method, base+req.URL.RequestURI(), req.Body)
	if err != nil {
		t.Fatal(err)
	}
	out.Header = req.Header
	return out
}

// decoded reads an answer body, gunzipping it when it was sent compressed.
func decoded(t testing.TB, h http.Header, r io.Reader) []byte {
	t.Helper()
	if h.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r)
		if err != nil {
			t.Fatalf("gzip answer: %v", err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return b
}

func (c capture) file() string { return filepath.Join("testdata", "grafana", c.name+".json") }

// TestGrafanaCaptures replays the requests Grafana's InfluxDB datasource
// sends (panels, stat and table panels, the query editor, dashboard
// variables, the health check) against Pith holding grafanaData, and
// checks each answer: InfluxDB's own answer (TestInteropGrafanaCaptures
// checks that), or Pith's for the nopeer captures.
func TestGrafanaCaptures(t *testing.T) {
	db := openStore(t)
	loadLP(t, db, grafanaData())
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	h := newTestHandler(db)
	for _, c := range readCaptures(t) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, c.request(t, ""))
		body := decoded(t, rec.Header(), rec.Body)
		if *updateCaptures && c.nopeer {
			if err := os.WriteFile(c.file(), body, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if rec.Code != http.StatusOK || !sameAnswer(false, string(body), c.want) {
			t.Errorf("%s (%s):\n got %d %s\nwant %s", c.name, c.desc, rec.Code, body, c.want)
		}
	}
}
