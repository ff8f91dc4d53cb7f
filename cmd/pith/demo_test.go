package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the demo plant for a few seconds and checks that the
// archive's latest values hold the 100 + 10 polled demo tags with good
// quality and the stations' statistics.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo for several seconds")
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	var out strings.Builder
	go func() { errc <- demo(ctx, t.TempDir(), "127.0.0.1:0", &out, func(a string) { addrc <- a }) }()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("demo ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("demo never served")
	}
	base := "http://" + addr

	// Station statistics reach the archive at whole seconds and the
	// archive writes every 200 ms, so a few seconds are needed.
	var missing []string
	giveUp := time.Now().Add(30 * time.Second)
	for time.Now().Before(giveUp) {
		if missing = checkDemoLatest(t, base); len(missing) == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(missing) > 0 {
		t.Errorf("latest lacks (or has bad) %d expected tags, e.g. %v", len(missing), missing[:min(5, len(missing))])
	}

	// A control write goes through the valve station to the server.
	resp, err := http.Post(base+"/api/v1/control", "application/json",
		strings.NewReader(`{"tag":"demo.valve.position","value":42.5}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("control write: %d %s", resp.StatusCode, body)
	}
	checkDemoDashboards(t, base)
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("demo stopped with %v", err)
	}
	for _, want := range []string{"/api/v1/latest", "curl", "pith.station.fast.polls_per_s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo banner lacks %q:\n%s", want, out.String())
		}
	}
}

// checkDemoLatest returns the expected tags /api/v1/latest does not show
// with good quality.
func checkDemoLatest(t *testing.T, base string) []string {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/latest")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Values []struct {
			Tag     string  `json:"tag"`
			Value   float64 `json:"value"`
			Quality string  `json:"quality"`
		} `json:"values"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	good := map[string]bool{}
	for _, v := range got.Values {
		good[v.Tag] = v.Quality == "good"
	}
	var want []string
	for i := range 100 {
		want = append(want, "demo.plc.r"+strconv.Itoa(i))
	}
	for i := range 10 {
		want = append(want, "demo.fast.r"+strconv.Itoa(i))
	}
	want = append(want, "demo.calc.second") // a calculated tag
	for _, st := range []string{"plc", "fast", "valve"} {
		for _, s := range []string{"comm", "polls_per_s", "errors", "changes_per_10s", "rtt_ms"} {
			want = append(want, "pith.station."+st+"."+s)
		}
	}
	var missing []string
	for _, w := range want {
		if !good[w] {
			missing = append(missing, w)
		}
	}
	return missing
}

// checkDemoDashboards: the demo lists its dashboards, /display opens the
// public one without a key, and its page reads its own tags.
func checkDemoDashboards(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/dashboards")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Dashboards []struct{ ID string } `json:"dashboards"`
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Dashboards) != 3 {
		t.Errorf("demo dashboards: %+v, want plant, house and display", list.Dashboards)
	}
	resp, err = http.Get(base + "/api/v1/pictures/plant")
	if err != nil {
		t.Fatal(err)
	}
	var pic struct {
		SVG      string `json:"svg"`
		Bindings []struct{ Element, Tag string }
	}
	json.NewDecoder(resp.Body).Decode(&pic)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(pic.Bindings) < 8 {
		t.Errorf("demo picture: %d, %d bindings", resp.StatusCode, len(pic.Bindings))
	}
	for _, b := range pic.Bindings {
		if !strings.Contains(pic.SVG, `id="`+b.Element+`"`) {
			t.Errorf("demo picture binds %s to missing element %q", b.Tag, b.Element)
		}
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err = noRedirect.Get(base + "/display")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, "/d/") {
		t.Fatalf("/display: %d to %q, want a redirect to the public dashboard", resp.StatusCode, loc)
	}
	for _, p := range []string{loc, loc + "/dashboard.json", loc + "/api/v1/latest"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", p, resp.StatusCode, body)
		}
	}
}
