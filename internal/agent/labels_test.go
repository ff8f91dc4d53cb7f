package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"

	"github.com/pith-historian/pith/internal/config"
)

// TestLabelsKeptAcrossRestart pushes a remote_write series and a
// line-protocol point, then checks that /api/v1/tags shows their labels,
// before and after a restart.
func TestLabelsKeptAcrossRestart(t *testing.T) {
	cfg, err := config.Parse([]byte("[http]\nlisten = \"127.0.0.1:0\"\n[log]\nlevel = \"warn\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	srv := startServe(t, context.Background(), cfg)
	now := time.Now().UnixMilli()

	wr := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:  []prompb.Label{{Name: "__name__", Value: "up"}, {Name: "instance", Value: "127.0.0.1:18997"}, {Name: "job", Value: "pith"}},
		Samples: []prompb.Sample{{Value: 1, Timestamp: now}},
	}}}
	raw, err := wr.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	post := func(path, ctype string, body []byte, hdr map[string]string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ctype)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
		}
	}
	post("/api/v1/write", "application/x-protobuf", snappy.Encode(nil, raw), map[string]string{"Content-Encoding": "snappy"})
	post("/write?precision=ms", "text/plain", []byte("boiler,site=hall\\ A temp=61.5 "+itoa(now)+"\n"), nil)

	want := map[string]map[string]string{
		"up.127_0_0_1:18997.pith": {"__name__": "up", "instance": "127.0.0.1:18997", "job": "pith"},
		"boiler.hall_A.temp":      {"_measurement": "boiler", "_field": "temp", "site": "hall A"},
	}
	check := func(base, when string) {
		t.Helper()
		resp, err := http.Get(base + "/api/v1/tags")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got struct {
			Tags []struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"tags"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
			t.Fatal(err)
		}
		found := 0
		for _, tg := range got.Tags {
			w, ok := want[tg.Name]
			if !ok {
				continue
			}
			found++
			if len(tg.Labels) != len(w) {
				t.Errorf("%s: labels of %s = %v, want %v", when, tg.Name, tg.Labels, w)
			}
			for k, v := range w {
				if tg.Labels[k] != v {
					t.Errorf("%s: label %s of %s = %q, want %q", when, k, tg.Name, tg.Labels[k], v)
				}
			}
		}
		if found != len(want) {
			t.Errorf("%s: found %d of the pushed tags in %+v", when, found, got.Tags)
		}
	}
	check(srv.URL, "running")
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	srv2 := startServe(t, context.Background(), cfg)
	check(srv2.URL, "after a restart")
}

// TestLabelsForwardedToCentral pushes a labelled line-protocol point into
// an edge Pith forwarding to NATS JetStream; the central Pith consuming
// the stream keeps the labels for "<site>.<tag>", with _site added.
func TestLabelsForwardedToCentral(t *testing.T) {
	nurl := testNATS(t)
	site := testSiteName("lbl")
	durable := "c-" + site
	t.Cleanup(func() { deleteConsumer(t, nurl, durable) })
	ccfg := fwdConfig(t, "central", t.TempDir())
	ccfg.Central = config.Central{NATS: nurl, Subjects: []string{"pith." + site + ".samples"}, Durable: durable, Workers: 1}
	ecfg := fwdConfig(t, site, t.TempDir())
	ecfg.Forward.NATS = []config.ForwardNATS{{Name: "fleet", URL: nurl}}
	edge := startInstance(t, ecfg)
	central := startInstance(t, ccfg)

	now := time.Now().UnixMilli()
	resp, err := httpc.Post(edge.base+"/write?precision=ms", "text/plain", strings.NewReader("boiler,room=hall temp=61.5 "+itoa(now)+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("line protocol: %d", resp.StatusCode)
	}
	tag := site + ".boiler.hall.temp"
	eventually(t, 20*time.Second, "the edge's labels at the central Pith", func() bool {
		r, err := httpc.Get(central.base + "/api/v1/tags")
		if err != nil {
			return false
		}
		defer r.Body.Close()
		var got struct {
			Tags []struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"tags"`
		}
		if json.NewDecoder(r.Body).Decode(&got) != nil {
			return false
		}
		for _, tg := range got.Tags {
			if tg.Name == tag {
				return tg.Labels["_measurement"] == "boiler" && tg.Labels["room"] == "hall" && tg.Labels["_field"] == "temp" &&
					tg.Labels["_site"] == site
			}
		}
		return false
	})
}
