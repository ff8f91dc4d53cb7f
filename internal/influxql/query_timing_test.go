package influxql

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/api"
)

// BenchmarkGroupByDay measures the chart query Grafana sends for one day
// of 1 s data (86,400 samples of one tag, flushed to runs and rollups):
// SELECT mean() ... GROUP BY time(1m), 1,440 buckets, through /query, and
// the same buckets through /api/v1/data, both in-process handlers over
// the same store. Compare the medians of:
//
//	go test -run '^$' -bench GroupByDay -count 7 ./internal/influxql/
func BenchmarkGroupByDay(b *testing.B) {
	const t0, day = int64(1700006400000), int64(86400000) // t0 is midnight UTC
	db := openStore(b)
	lines := make([]string, 0, 86400)
	for i := int64(0); i < 86400; i++ {
		lines = append(lines, fmt.Sprintf("boiler,site=plant1 temp=%g %d", 20+float64(i%600)/4, t0+i*1000))
	}
	loadLP(b, db, lines)
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	influx := NewHandler(NewEngine(db, NewStoreCatalog(db), DefaultOptions()), nil, slog.New(slog.DiscardHandler))
	q := fmt.Sprintf(`SELECT mean("temp") FROM "boiler" WHERE time >= %dms and time < %dms GROUP BY time(1m) fill(null)`, t0, t0+day)
	influxURL := "/query?" + url.Values{"db": {"pith"}, "epoch": {"ms"}, "q": {q}}.Encode()
	native := api.NewServer(api.WrapDB(db), api.DefaultOptions(), slog.New(slog.DiscardHandler)).Handler()
	tag := "boiler.plant1.temp"
	nativeURL := "/api/v1/data?tag=" + tag + "&from=" + strconv.FormatInt(t0, 10) + "&to=" + strconv.FormatInt(t0+day, 10) + "&points=1440&agg=mean"
	for _, c := range []struct {
		name, target string
		h            http.Handler
	}{{"influxql", influxURL, influx}, {"api_v1_data", nativeURL, native}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				rec := httptest.NewRecorder()
				c.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, c.target, nil))
				if rec.Code != http.StatusOK || rec.Body.Len() < 1440*10 {
					b.Fatalf("%s: %d %.200s", c.name, rec.Code, rec.Body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/query")
		})
	}
}

// BenchmarkGroupByDayHTTP runs the query of BenchmarkGroupByDay over
// loopback HTTP (one keep-alive connection) against Pith and against a
// real InfluxDB 1.x holding the same day of points:
//
//	go test -run '^$' -bench GroupByDayHTTP -count 7 ./internal/influxql/
func BenchmarkGroupByDayHTTP(b *testing.B) {
	const t0, day = int64(1700006400000), int64(86400000)
	lines := make([]string, 0, 86400)
	for i := int64(0); i < 86400; i++ {
		lines = append(lines, fmt.Sprintf("boiler,site=plant1 temp=%g %d", 20+float64(i%600)/4, t0+i*1000))
	}
	db := openStore(b)
	loadLP(b, db, lines)
	if err := db.Flush(); err != nil {
		b.Fatal(err)
	}
	pith := httptest.NewServer(NewHandler(NewEngine(db, NewStoreCatalog(db), DefaultOptions()), nil, slog.New(slog.DiscardHandler)))
	defer pith.Close()
	influx := startInfluxd(b)
	for i := 0; i < len(lines); i += 10000 {
		loadInflux(b, influx, "bench", lines[i:min(i+10000, len(lines))])
	}
	q := fmt.Sprintf(`SELECT mean("temp") FROM "boiler" WHERE time >= %dms and time < %dms GROUP BY time(1m) fill(null)`, t0, t0+day)
	target := "/query?" + url.Values{"db": {"bench"}, "epoch": {"ms"}, "q": {q}}.Encode()
	answers := map[string]string{}
	for _, c := range []struct{ name, base string }{{"pith", pith.URL}, {"influxdb", influx}} {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{}
			var body []byte
			for i := 0; i < b.N; i++ {
				resp, err := client.Get(c.base + target)
				if err != nil {
					b.Fatal(err)
				}
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("%s: %d %.200s", c.name, resp.StatusCode, body)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/query")
			answers[c.name] = string(body)
		})
	}
	if len(answers) == 2 && !sameAnswer(false, answers["pith"], answers["influxdb"]) {
		b.Errorf("Pith and InfluxDB answer differently:\n%.300s\n%.300s", answers["pith"], answers["influxdb"])
	}
}

// BenchmarkCatalog10k measures what the catalog adds to a request when
// the store holds 10,000 tags from line protocol (1,000 measurements of
// 10 hosts): a stat panel's query of one series, and Grafana's variable
// query listing a tag's values.
//
//	go test -run '^$' -bench Catalog10k -count 7 ./internal/influxql/
func BenchmarkCatalog10k(b *testing.B) {
	db := openStore(b)
	lines := make([]string, 0, 10000)
	for m := 0; m < 1000; m++ {
		for h := 0; h < 10; h++ {
			lines = append(lines, fmt.Sprintf("m%d,host=h%d value=%d 1700000000000", m, h, m+h))
		}
	}
	loadLP(b, db, lines)
	h := NewHandler(NewEngine(db, NewStoreCatalog(db), DefaultOptions()), nil, slog.New(slog.DiscardHandler))
	for _, c := range []struct{ name, q, want string }{
		{"one_series", `SELECT last("value") FROM "m500" WHERE "host" = 'h3'`, "503"},
		{"tag_values", `SHOW TAG VALUES FROM "m500" WITH KEY = "host"`, "h9"},
	} {
		target := "/query?" + url.Values{"q": {c.q}, "epoch": {"ms"}}.Encode()
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
				if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), c.want) {
					b.Fatalf("%d %.200s", rec.Code, rec.Body)
				}
			}
		})
	}
}
