package promapi

import (
	"github.com/pith-historian/pith/internal/testpeer"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
)

// TestPromtool queries Pith with Prometheus's own client, promtool (from
// Debian's prometheus package; CI installs it). It skips when promtool is
// not installed.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		testpeer.Missing(t, "promtool not found (apt-get install prometheus): skipping the real-client test")
	}
	srv := httptest.NewServer(New(openStore(t, endpointPoints()), DefaultOptions(), nil))
	defer srv.Close()
	tests := []struct {
		name string
		args []string
		want []string // lines promtool must print
	}{
		{"instant", []string{"query", "instant", "--time=1120", srv.URL, `boiler_temp{tag="boiler.temp"}`},
			[]string{`boiler_temp{tag="boiler.temp"} => 64 @[1120]`}},
		{"instant rollup", []string{"query", "instant", "--time=1120", srv.URL, `max_over_time(boiler_temp[3m])`},
			[]string{`{tag="boiler.temp"} => 64 @[1120]`, `{tag="boiler_temp"} => 1 @[1120]`}},
		{"range", []string{"query", "range", "--start=1000", "--end=1120", "--step=1m", srv.URL, `avg_over_time(boiler_temp{tag="boiler.temp"}[1m])`},
			[]string{`{tag="boiler.temp"} =>`, `60 @[1000]`, `62 @[1060]`, `64 @[1120]`}},
		{"range json", []string{"query", "range", "-o", "json", "--start=1000", "--end=1120", "--step=1m", srv.URL, `count_over_time(pump_flow[1m]) or vector(0)`},
			[]string{`"values":[[1000,"0"],[1060,"0"],[1120,"0"]]`}},
		{"labels", []string{"query", "labels", "--start=0", "--end=10000", srv.URL, "__name__"}, []string{"boiler_temp", "pump_flow"}},
		{"series", []string{"query", "series", "--start=0", "--end=10000", "--match=pump_flow", srv.URL}, []string{`{__name__="pump_flow", tag="pump.flow"}`}},
	}
	for _, tt := range tests {
		out, err := exec.Command(promtool, tt.args...).CombinedOutput()
		if err != nil {
			t.Errorf("%s: promtool %v: %v\n%s", tt.name, tt.args, err, out)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: output lacks %q:\n%s", tt.name, w, out)
			}
		}
	}
}
