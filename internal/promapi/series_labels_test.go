package promapi

import (
	"context"
	"net/url"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// labelledStore holds two remote-written series (with __name__), one
// line-protocol tag with labels and one plain tag.
func labelledStore(t testing.TB) Store {
	pts := []model.Point{
		{Tag: "up.127_0_0_1:9100.node", T: 1_000_000, V: 1},
		{Tag: "up.127_0_0_1:18997.pith", T: 1_000_000, V: 0},
		{Tag: "cpu.pi3.usage_idle", T: 1_000_000, V: 97},
		{Tag: "boiler.temp", T: 1_000_000, V: 60},
	}
	db := openStore(t, nil)
	series := []model.Series{
		{Tag: "up.127_0_0_1:9100.node", Labels: model.LabelsFrom("__name__", "up", "instance", "127.0.0.1:9100", "job", "node")},
		{Tag: "up.127_0_0_1:18997.pith", Labels: model.LabelsFrom("__name__", "up", "instance", "127.0.0.1:18997", "job", "pith")},
		{Tag: "cpu.pi3.usage_idle", Labels: model.LabelsFrom("_measurement", "cpu", "_field", "usage_idle", "host", "pi3")},
	}
	if err := db.SetLabels(context.Background(), series); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(context.Background(), pts); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestLabelledSeries checks the series model with labels against the
// answers Prometheus gives on the same data.
func TestLabelledSeries(t *testing.T) {
	h := New(labelledStore(t), DefaultOptions(), nil)
	tests := []struct {
		name, path string
		form       url.Values
		want       string
	}{
		{"by label", "/api/v1/query", url.Values{"query": {`up{job="pith"}`}, "time": {"1000"}},
			`{"resultType":"vector","result":[{"metric":{"__name__":"up","instance":"127.0.0.1:18997","job":"pith"},"value":[1000,"0"]}]}`},
		{"not equal", "/api/v1/query", url.Values{"query": {`up{job!="pith"}`}, "time": {"1000"}},
			`{"resultType":"vector","result":[{"metric":{"__name__":"up","instance":"127.0.0.1:9100","job":"node"},"value":[1000,"1"]}]}`},
		{"regexp", "/api/v1/query", url.Values{"query": {`up{instance=~".*:9100"}`}, "time": {"1000"}},
			`{"resultType":"vector","result":[{"metric":{"__name__":"up","instance":"127.0.0.1:9100","job":"node"},"value":[1000,"1"]}]}`},
		{"not regexp", "/api/v1/query", url.Values{"query": {`up{instance!~".*:9100"}`}, "time": {"1000"}},
			`{"resultType":"vector","result":[{"metric":{"__name__":"up","instance":"127.0.0.1:18997","job":"pith"},"value":[1000,"0"]}]}`},
		{"sum by", "/api/v1/query", url.Values{"query": {`sum by (job) (up)`}, "time": {"1000"}},
			`{"resultType":"vector","result":[{"metric":{"job":"pith"},"value":[1000,"0"]},{"metric":{"job":"node"},"value":[1000,"1"]}]}`},
		{"line protocol labels", "/api/v1/query", url.Values{"query": {`{_measurement="cpu", host="pi3"}`}, "time": {"1000"}},
			`{"resultType":"vector","result":[{"metric":{"__name__":"cpu_pi3_usage_idle","_field":"usage_idle","_measurement":"cpu","host":"pi3","tag":"cpu.pi3.usage_idle"},"value":[1000,"97"]}]}`},
		{"plain tag", "/api/v1/query", url.Values{"query": {`boiler_temp`}, "time": {"1000"}},
			`{"resultType":"vector","result":[{"metric":{"__name__":"boiler_temp","tag":"boiler.temp"},"value":[1000,"60"]}]}`},
		{"labels", "/api/v1/labels", nil, `["__name__","_field","_measurement","host","instance","job","tag"]`},
		{"labels matched", "/api/v1/labels", url.Values{"match[]": {"up"}}, `["__name__","instance","job"]`},
		{"job values", "/api/v1/label/job/values", nil, `["node","pith"]`},
		{"names", "/api/v1/label/__name__/values", nil, `["boiler_temp","cpu_pi3_usage_idle","up"]`},
		{"series", "/api/v1/series", url.Values{"match[]": {`{job=~".+"}`}},
			`[{"__name__":"up","instance":"127.0.0.1:18997","job":"pith"},{"__name__":"up","instance":"127.0.0.1:9100","job":"node"}]`},
	}
	for _, tt := range tests {
		a := get(t, h, tt.path, tt.form, false)
		if a.code != 200 || string(a.Data) != tt.want {
			t.Errorf("%s: %d\n got %s\nwant %s", tt.name, a.code, a.Data, tt.want)
		}
	}
}
