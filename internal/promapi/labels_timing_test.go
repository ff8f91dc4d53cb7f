package promapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// BenchmarkLabelMatch measures instant queries over a store of 10,000
// series (100 targets of 100 series, one sample each): selecting one
// series by its labels and all 10,000 by one label, against the same
// selections by tag name on the same tags without labels. Run it with
//
//	go test -run '^$' -bench LabelMatch -count 5 ./internal/promapi/
func BenchmarkLabelMatch(b *testing.B) {
	const n = 10_000
	for _, labelled := range []bool{true, false} {
		st := labelMatchStore(b, n, labelled)
		h := New(st, DefaultOptions(), nil)
		queries := map[string]string{ // name -> query
			"one/by-name":   `{tag="node_metric_3_total.1.10.0.0.42:9100.node.irq"}`,
			"all/by-name":   `count({tag=~"node_metric_.*"})`,
			"one/by-labels": `node_metric_3_total{instance="10.0.0.42:9100", cpu="1", mode="irq"}`,
			"all/by-labels": `count({job="node"})`,
		}
		for _, name := range []string{"one", "all"} {
			kind := "by-name"
			if labelled {
				kind = "by-labels"
			}
			q := queries[name+"/"+kind]
			b.Run(fmt.Sprintf("%s/%s", name, kind), func(b *testing.B) {
				target := "/api/v1/query?" + url.Values{"query": {q}, "time": {"1700000000"}}.Encode()
				b.ReportAllocs()
				for b.Loop() {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
					if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"result":[{`) {
						b.Fatalf("%s: %d %s", q, rec.Code, rec.Body.String())
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/query")
			})
		}
	}
}

// labelMatchStore holds n remote_write-like series, with their labels or
// without.
func labelMatchStore(b *testing.B, n int, labelled bool) Store {
	db := openStore(b, nil)
	var series []model.Series
	var pts []model.Point
	for i := 0; i < n; i++ {
		inst := fmt.Sprintf("10.0.%d.%d:9100", i/100/250, i/100%250)
		metric := fmt.Sprintf("node_metric_%d_total", i%10)
		cpu, mode := fmt.Sprint(i/10%2), [...]string{"idle", "user", "system", "iowait", "irq"}[i/20%5]
		name := fmt.Sprintf("%s.%s.%s.node.%s", metric, cpu, inst, mode)
		pts = append(pts, model.Point{Tag: name, T: 1_700_000_000_000, V: float64(i)})
		if labelled {
			series = append(series, model.Series{Tag: name, Labels: model.LabelsFrom(
				"__name__", metric, "cpu", cpu, "instance", inst, "job", "node", "mode", mode)})
		}
	}
	ctx := context.Background()
	if labelled {
		if err := db.SetLabels(ctx, series); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Write(ctx, pts); err != nil {
		b.Fatal(err)
	}
	return db
}
