package promapi

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// endpointPoints is a small plant: two tags whose metric names collide.
func endpointPoints() []model.Point {
	return []model.Point{
		{Tag: "boiler.temp", T: 1_000_000, V: 60}, {Tag: "boiler.temp", T: 1_060_000, V: 62},
		{Tag: "boiler.temp", T: 1_120_000, V: 64},
		{Tag: "boiler_temp", T: 1_000_000, V: 1},
		{Tag: "pump.flow", T: 5_000_000, V: 3.5},
	}
}

// TestEndpoints checks each endpoint in its GET and POST forms against
// the exact answer Prometheus gives.
func TestEndpoints(t *testing.T) {
	h := New(openStore(t, endpointPoints()), DefaultOptions(), nil)
	tests := []struct {
		name, path string
		form       url.Values
		code       int
		want       string // the data field, or a substring of the error
	}{
		{"instant vector", "/api/v1/query", url.Values{"query": {"boiler_temp"}, "time": {"1120"}}, 200,
			`{"resultType":"vector","result":[{"metric":{"__name__":"boiler_temp","tag":"boiler.temp"},"value":[1120,"64"]},` +
				`{"metric":{"__name__":"boiler_temp","tag":"boiler_temp"},"value":[1120,"1"]}]}`}, // within the 5 min lookback
		{"instant by tag label", "/api/v1/query", url.Values{"query": {`{tag="boiler_temp"}`}, "time": {"1000.5"}}, 200,
			`{"resultType":"vector","result":[{"metric":{"__name__":"boiler_temp","tag":"boiler_temp"},"value":[1000.5,"1"]}]}`},
		{"scalar", "/api/v1/query", url.Values{"query": {"1+1"}, "time": {"1970-01-01T00:16:40Z"}}, 200,
			`{"resultType":"scalar","result":[1000,"2"]}`},
		{"range selector", "/api/v1/query", url.Values{"query": {`boiler_temp{tag="boiler.temp"}[2m]`}, "time": {"1120"}}, 200,
			`{"resultType":"matrix","result":[{"metric":{"__name__":"boiler_temp","tag":"boiler.temp"},"values":[[1060,"62"],[1120,"64"]]}]}`},
		{"range query", "/api/v1/query_range", url.Values{"query": {`avg_over_time(boiler_temp{tag="boiler.temp"}[1m])`},
			"start": {"1000"}, "end": {"1120"}, "step": {"1m"}}, 200,
			`{"resultType":"matrix","result":[{"metric":{"tag":"boiler.temp"},"values":[[1000,"60"],[1060,"62"],[1120,"64"]]}]}`},
		{"count range query", "/api/v1/query_range", url.Values{"query": {`count_over_time(boiler_temp[2m])`},
			"start": {"1120"}, "end": {"1120"}, "step": {"120"}}, 200,
			`{"resultType":"matrix","result":[{"metric":{"tag":"boiler.temp"},"values":[[1120,"2"]]}]}`},
		{"labels", "/api/v1/labels", nil, 200, `["__name__","tag"]`},
		{"labels none in range", "/api/v1/labels", url.Values{"start": {"9000"}}, 200, `[]`},
		{"metric names", "/api/v1/label/__name__/values", nil, 200, `["boiler_temp","pump_flow"]`},
		{"tag values matched", "/api/v1/label/tag/values", url.Values{"match[]": {"boiler_temp"}}, 200, `["boiler.temp","boiler_temp"]`},
		{"unknown label", "/api/v1/label/job/values", nil, 200, `[]`},
		{"series", "/api/v1/series", url.Values{"match[]": {"pump_flow", `{tag="boiler_temp"}`}}, 200,
			`[{"__name__":"boiler_temp","tag":"boiler_temp"},{"__name__":"pump_flow","tag":"pump.flow"}]`},
		{"series time filter", "/api/v1/series", url.Values{"match[]": {`{__name__=~".+"}`}, "start": {"4000"}, "end": {"6000"}}, 200,
			`[{"__name__":"pump_flow","tag":"pump.flow"}]`},
		{"metadata", "/api/v1/metadata", nil, 200, `{}`},
		{"bad query", "/api/v1/query", url.Values{"query": {"sum("}}, 400, `invalid parameter "query"`},
		{"bad time", "/api/v1/query", url.Values{"query": {"1"}, "time": {"yesterday"}}, 400, `invalid parameter "time"`},
		{"missing start", "/api/v1/query_range", url.Values{"query": {"1"}, "end": {"1"}, "step": {"1"}}, 400, `invalid parameter "start": missing`},
		{"end before start", "/api/v1/query_range", url.Values{"query": {"1"}, "start": {"2"}, "end": {"1"}, "step": {"1"}}, 400, "before start"},
		{"zero step", "/api/v1/query_range", url.Values{"query": {"1"}, "start": {"1"}, "end": {"2"}, "step": {"0"}}, 400, "zero or negative"},
		{"too many points", "/api/v1/query_range", url.Values{"query": {"1"}, "start": {"0"}, "end": {"100000"}, "step": {"1"}}, 400, "maximum resolution"},
		{"series without match", "/api/v1/series", nil, 400, "no match[]"},
		{"bad match", "/api/v1/series", url.Values{"match[]": {"{"}}, 400, `invalid parameter "match[]"`},
		{"bad label name", "/api/v1/label/a-b/values", nil, 400, "invalid label name"},
		{"not ours", "/api/v1/targets", nil, 404, "no such endpoint"},
	}
	for _, tt := range tests {
		for _, post := range []bool{false, true} {
			a := get(t, h, tt.path, tt.form, post)
			if a.code != tt.code {
				t.Errorf("%s (post %v): status %d, want %d: %s", tt.name, post, a.code, tt.code, a.body)
				continue
			}
			if tt.code == 200 {
				if a.Status != "success" || string(a.Data) != tt.want {
					t.Errorf("%s (post %v):\n got %s\nwant %s", tt.name, post, a.Data, tt.want)
				}
			} else if a.Status != "error" || a.ErrorType == "" || !strings.Contains(a.Error, tt.want) {
				t.Errorf("%s (post %v): error %q (%s), want it to contain %q", tt.name, post, a.Error, a.ErrorType, tt.want)
			}
		}
	}
}

func TestBuildinfo(t *testing.T) {
	h := New(openStore(t, nil), Options{Version: "pith 1.2.3"}, nil)
	a := get(t, h, "/api/v1/status/buildinfo", nil, false)
	var bi map[string]string
	if err := json.Unmarshal(a.Data, &bi); err != nil {
		t.Fatal(err)
	}
	// Grafana reads version to decide which features the server has.
	if bi["version"] != promVersion || bi["revision"] != "pith 1.2.3" {
		t.Errorf("buildinfo %v", bi)
	}
}

func TestRawLimit(t *testing.T) {
	opts := DefaultOptions()
	opts.MaxRawSamples = 2
	h := New(openStore(t, endpointPoints()), opts, nil)
	a := get(t, h, "/api/v1/query", url.Values{"query": {`rate(boiler_temp{tag="boiler.temp"}[10m])`}, "time": {"1200"}}, false)
	if a.code != 422 || !strings.Contains(a.Error, `"boiler.temp": too many samples`) {
		t.Errorf("status %d %s", a.code, a.body)
	}
}

func TestMethod(t *testing.T) {
	h := New(openStore(t, nil), DefaultOptions(), nil)
	req, _ := http.NewRequest(http.MethodDelete, "/api/v1/query", nil)
	rec := &recorder{h: http.Header{}}
	h.ServeHTTP(rec, req)
	if rec.code != 405 || rec.h.Get("Allow") == "" {
		t.Errorf("DELETE: %d, Allow %q", rec.code, rec.h.Get("Allow"))
	}
}

type recorder struct {
	h    http.Header
	code int
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(c int)           { r.code = c }
