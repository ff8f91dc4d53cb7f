package web

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// fakeHistory answers every Aggregate with n buckets of value 1, the
// first one empty.
type fakeHistory struct{ calls int }

func (f *fakeHistory) Aggregate(tag string, from, to int64, n int, agg model.Agg) ([]store.Bucket, error) {
	f.calls++
	if tag == "none" {
		return nil, store.ErrUnknownTag
	}
	out := make([]store.Bucket, n)
	for i := range out {
		out[i] = store.Bucket{T: from + int64(i)*(to-from)/int64(n), V: 1, OK: i > 0}
	}
	return out, nil
}

func TestDisplayCheck(t *testing.T) {
	for _, tc := range []struct {
		cfg  DisplayConfig
		want string
	}{
		{DisplayConfig{}, "no tile"},
		{DisplayConfig{Tiles: []DisplayTile{{}}}, "tile[0].tag is empty"},
		{DisplayConfig{Tiles: []DisplayTile{{Tag: "a"}, {Tag: "b", Decimals: 11}}}, "tile[1].decimals"},
		{DisplayConfig{Tiles: []DisplayTile{{Tag: "a", Spark: -time.Second}}}, "tile[0].spark"},
		{DisplayConfig{Refresh: time.Millisecond, Tiles: []DisplayTile{{Tag: "a"}}}, "refresh"},
		{DisplayConfig{Tiles: make([]DisplayTile, 65)}, "at most 64"},
		{DisplayConfig{Title: "ok", Tiles: []DisplayTile{{Tag: "a"}}}, ""},
	} {
		err := tc.cfg.Check()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%+v) = %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := New(Options{Display: &DisplayConfig{Tiles: []DisplayTile{{Tag: "a"}}}}, nil); err == nil {
		t.Errorf("New accepted a display without Source and History")
	}
}

func TestDisplayData(t *testing.T) {
	src := &fakeSource{vals: []store.Latest{{Tag: "site.power", Sample: model.Sample{T: 5000, V: 12.5}}}}
	hist := &fakeHistory{}
	opts := DefaultOptions()
	opts.Source, opts.History = src, hist
	opts.Display = &DisplayConfig{Title: "Visitor <centre>", Tiles: []DisplayTile{
		{Tag: "site.power", Label: "Power", Unit: "kW", Decimals: 1, Spark: time.Hour},
		{Tag: "none"},
	}}
	s := newTestServer(t, opts)
	h := s.Handler()

	w := get(t, h, "/display/config.json", nil)
	var cfg displayJSON
	if err := json.Unmarshal(w.Body.Bytes(), &cfg); err != nil || w.Code != 200 {
		t.Fatalf("config: %d %q %v", w.Code, w.Body.String(), err)
	}
	if cfg.Title != "Visitor <centre>" || cfg.RefreshMS != 5000 || len(cfg.Tiles) != 2 || cfg.Tiles[1].Label != "none" || cfg.Tiles[0].SparkMS != 3600_000 {
		t.Errorf("config %+v", cfg)
	}
	if w := get(t, h, "/display", nil); w.Code != 200 || !strings.Contains(w.Body.String(), "display.js") {
		t.Errorf("/display: %d", w.Code)
	}

	w = get(t, h, "/display/data", nil)
	var d struct {
		Now   int64 `json:"now"`
		Tiles []struct {
			Tag     string   `json:"tag"`
			TS      *int64   `json:"ts"`
			Value   *float64 `json:"value"`
			Quality *string  `json:"quality"`
			Spark   [][2]any `json:"spark"`
		} `json:"tiles"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
		t.Fatalf("data %q: %v", w.Body.String(), err)
	}
	if len(d.Tiles) != 2 || *d.Tiles[0].Value != 12.5 || *d.Tiles[0].Quality != "good" || len(d.Tiles[0].Spark) != sparkPoints ||
		d.Tiles[0].Spark[0][1] != nil || d.Tiles[1].Value != nil || len(d.Tiles[1].Spark) != 0 {
		t.Errorf("data %s", w.Body.String())
	}
	// A second request within the cache's second reads nothing again.
	calls := hist.calls
	get(t, h, "/display/data", nil)
	if hist.calls != calls {
		t.Errorf("display data read again within %v", displayDataCacheTTL)
	}
}
