package promapi

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"strconv"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/storage"
)

func TestMetricName(t *testing.T) {
	tests := []struct{ tag, want string }{
		{"power", "power"},
		{"site.boiler.temp", "site_boiler_temp"},
		{"pith.sys.cpu:busy", "pith_sys_cpu:busy"},
		{"1st.floor", "_1st_floor"},
		{"émoji-x", "__moji_x"},
		{"", "_"},
	}
	for _, tt := range tests {
		if got := MetricName(tt.tag); got != tt.want {
			t.Errorf("MetricName(%q) = %q, want %q", tt.tag, got, tt.want)
		}
	}
}

// testPoints is two tags with irregular samples and a gap, so windows
// are full, partial and empty.
func testPoints() []model.Point {
	r := rand.New(rand.NewPCG(1, 2))
	var pts []model.Point
	t := int64(1_700_000_000_000)
	for i := 0; i < 5000; i++ {
		t += 1 + r.Int64N(20_000)
		if i > 2000 && i < 2300 {
			t += 60_000 // a gap of several windows
			continue
		}
		pts = append(pts, model.Point{Tag: "site.power", T: t, V: math.Round(r.Float64()*1000) / 10})
		if i%3 == 0 {
			pts = append(pts, model.Point{Tag: "site.temp", T: t, V: float64(i%50) - 10})
		}
	}
	return pts
}

// TestPushdownEqualsRaw runs each query twice, answered from rollups and
// from raw samples, and wants the same answer: the window plan is an
// optimisation, never a change of meaning.
func TestPushdownEqualsRaw(t *testing.T) {
	db := openStore(t, testPoints())
	fast := NewHandler(db, DefaultOptions(), nil)
	var last *queryStats
	fast.onPrepare = func(s *queryStats) { last = s }
	slow := NewHandler(db, DefaultOptions(), nil)
	slow.noPushdown = true
	start := int64(1_700_000_000)
	tests := []struct {
		query      string
		start, end int64 // seconds after start
		step       string
		pushed     bool // the plan must be used
	}{
		{"avg_over_time(site_power[60s])", 0, 40_000, "60", true},
		{"min_over_time(site_power[60s])", 7, 40_007, "60", true},
		{"max_over_time(site_power[1m])", 0, 40_000, "1m", true},
		{"sum_over_time(site_power[5m])", 0, 50_000, "300", true},
		{"count_over_time(site_power[5m])", 0, 50_000, "300", true},
		{"last_over_time(site_power[90s])", 3, 50_000, "90", true},
		{"present_over_time(site_temp[2m])", 0, 50_000, "120", true},
		{"avg_over_time(site_power[30s])", 0, 40_000, "60", true},  // gaps between windows
		{"avg_over_time(site_power[90s])", 0, 40_000, "60", false}, // overlapping windows: raw
		{"avg_over_time(site_power[60s] offset 10m)", 0, 40_000, "60", true},
		{"max(avg_over_time({__name__=~\"site_.*\"}[10m]))", 0, 90_000, "600", true},
		{"sum(avg_over_time(site_power[60s])) * 2 + sum(count_over_time(site_temp[60s]))", 0, 40_000, "60", true},
		{"max_over_time(avg_over_time(site_power[1m])[10m:1m])", 0, 40_000, "60", false}, // subquery: raw
		{"count_over_time(site_power[1m:10s])", 0, 10_000, "60", false},
		{"rate(site_power[5m])", 0, 40_000, "60", false},
		{"site_power", 0, 40_000, "60", false},
		{"avg_over_time(site_power[1h] @ 1700020000)", 0, 40_000, "3600", true},
	}
	for _, tt := range tests {
		form := url.Values{"query": {tt.query}, "start": {strconv.FormatInt(start+tt.start, 10)},
			"end": {strconv.FormatInt(start+tt.end, 10)}, "step": {tt.step}}
		a := get(t, fast, "/api/v1/query_range", form, false)
		b := get(t, slow, "/api/v1/query_range", form, true)
		if a.code != 200 || b.code != 200 {
			t.Errorf("%s: status %d / %d: %s %s", tt.query, a.code, b.code, a.body, b.body)
			continue
		}
		if !sameAnswer(t, a, b) {
			t.Errorf("%s: rollup and raw answers differ\nrollup %.300s\nraw    %.300s", tt.query, a.body, b.body)
		}
		if len(a.body) < 100 {
			t.Errorf("%s: suspiciously small answer %s", tt.query, a.body)
		}
		if got := last.rollupSelects > 0; got != tt.pushed {
			t.Errorf("%s: rollups used %v, want %v", tt.query, got, tt.pushed)
		}
	}
	// Instant queries too.
	for _, qs := range []string{"avg_over_time(site_power[10m])", "count_over_time(site_power[10m])", "sum_over_time(site_temp[1h])"} {
		form := url.Values{"query": {qs}, "time": {strconv.FormatInt(start+30_000, 10)}}
		a := get(t, fast, "/api/v1/query", form, false)
		b := get(t, slow, "/api/v1/query", form, false)
		if a.code != 200 || !sameAnswer(t, a, b) {
			t.Errorf("%s: instant answers differ\nrollup %s\nraw    %s", qs, a.body, b.body)
		}
	}
}

// TestPlanUse checks which selectors are answered from the rollups.
func TestPlanUse(t *testing.T) {
	q := &queryable{opts: &Options{MaxPushdownBuckets: 1000}, pushdown: true}
	tests := []struct {
		name  string
		h     storage.SelectHints
		count bool
		want  bool
	}{
		{"range=step", storage.SelectHints{Start: 1, End: 60_000 * 10, Range: 60_000, Step: 60_000, Func: "avg_over_time"}, false, true},
		{"instant", storage.SelectHints{Start: 1, End: 60_000, Range: 60_000, Func: "max_over_time"}, false, true},
		{"overlap", storage.SelectHints{Start: 1, End: 60_000 * 10, Range: 120_000, Step: 60_000, Func: "avg_over_time"}, false, false},
		{"rate", storage.SelectHints{Start: 1, End: 60_000 * 10, Range: 60_000, Step: 60_000, Func: "rate"}, false, false},
		{"count marker on other func", storage.SelectHints{Start: 1, End: 60_000 * 10, Range: 60_000, Step: 60_000, Func: "avg_over_time"}, true, false},
		{"too many buckets", storage.SelectHints{Start: 1, End: 60_000 * 10_000, Range: 60_000, Step: 60_000, Func: "avg_over_time"}, false, false},
		{"instant selector", storage.SelectHints{Start: 1, End: 60_000 * 10, Step: 60_000, Func: "avg"}, false, false},
	}
	for _, tt := range tests {
		if got := q.plan(&tt.h, tt.count) != nil; got != tt.want {
			t.Errorf("%s: plan used %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestSelectMatchers(t *testing.T) {
	db := openStore(t, []model.Point{{Tag: "a.x", T: 1000, V: 1}, {Tag: "a_x", T: 2000, V: 2}, {Tag: "b.y", T: 3000, V: 3}})
	tests := []struct {
		ms   []*labels.Matcher
		want []string
	}{
		{[]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "__name__", "a_x")}, []string{"a.x", "a_x"}},
		{[]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "tag", "a.x")}, []string{"a.x"}},
		{[]*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, "__name__", ".+")}, []string{"a.x", "a_x", "b.y"}},
		{[]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "other", "")}, []string{"a.x", "a_x", "b.y"}},
		{[]*labels.Matcher{labels.MustNewMatcher(labels.MatchEqual, "other", "z")}, nil},
	}
	for _, tt := range tests {
		got, _ := matchingTags(db, 0, 10_000, tt.ms)
		if len(got) != len(tt.want) {
			t.Errorf("%v: got %v, want %v", tt.ms, got, tt.want)
			continue
		}
		for i := range got {
			if got[i].tag != tt.want[i] {
				t.Errorf("%v: got %v, want %v", tt.ms, got, tt.want)
			}
		}
	}
	if got, _ := matchingTags(db, 2500, 10_000, nil); len(got) != 1 || got[0].tag != "b.y" {
		t.Errorf("time filter: got %v", got)
	}
}

// sameAnswer compares two matrix or vector answers: same series and
// timestamps, values equal to 1e-9 relative (the engine sums with Kahan
// compensation, the store's rollups plainly, so the last digits differ).
func sameAnswer(t *testing.T, a, b answer) bool {
	t.Helper()
	type series struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
		Value  [2]any            `json:"value"`
	}
	var da, db struct {
		ResultType string   `json:"resultType"`
		Result     []series `json:"result"`
	}
	if err := json.Unmarshal(a.Data, &da); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b.Data, &db); err != nil {
		t.Fatal(err)
	}
	if da.ResultType != db.ResultType || len(da.Result) != len(db.Result) {
		return false
	}
	for i := range da.Result {
		sa, sb := da.Result[i], db.Result[i]
		if fmt.Sprint(sa.Metric) != fmt.Sprint(sb.Metric) {
			return false
		}
		va, vb := append(sa.Values, sa.Value), append(sb.Values, sb.Value)
		if len(va) != len(vb) {
			return false
		}
		for j := range va {
			if va[j][0] != vb[j][0] {
				return false
			}
			if va[j][1] == nil && vb[j][1] == nil {
				continue
			}
			x, _ := strconv.ParseFloat(va[j][1].(string), 64)
			y, _ := strconv.ParseFloat(vb[j][1].(string), 64)
			if math.Abs(x-y) > 1e-9*math.Max(1, math.Abs(y)) {
				return false
			}
		}
	}
	return true
}
