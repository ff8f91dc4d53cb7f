package e2e

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// The data the browser tests look at. Times are fixed relative to the
// test's start so that presets such as "1d" find data.
const (
	feedTag      = "power"
	feedStep     = 10 * time.Second // the feed dataset's sampling interval
	hourTag      = "test.hour"      // value = whole hours since hourStart; a gap in hours [gapFrom, gapTo)
	hourHours    = 48
	gapFrom      = 20
	gapTo        = 23
	digitalTag   = "test.valve_open"
	stateTag     = "test.state" // text: stateNames[k%4] for hours [2k, 2k+2), a hostile one at k = xssState
	xssState     = 5
	xssText      = "<img src=x onerror=alert(5)>"
	xssTag       = "<img src=x onerror=alert(1)>"
	liveTags     = 1000
	liveXSSTag   = "live.<img/src=x/onerror=alert(2)>" // a valid table name: no spaces allowed there
	liveStaleTag = "live.stale"
	liveBadTag   = "live.bad"
)

// stateNames are the values of the text tag.
var stateNames = []string{"Idle", "Heating", "Holding", "Cooling"}

// feedPoints is the size of the generated feed: the 9,000,000 points
// (2.85 years at 10 s) of the standard feed dataset (README.md,
// "Performance").
const feedPoints = 9_000_000

// writeBatch is the number of points handed to the store per Add.
const writeBatch = 64 << 10

// loadStore writes the test datasets into db and returns the feed's
// first and end (exclusive) times and the hour tag's start.
func loadStore(t *testing.T, db *store.DB, now time.Time, nFeed int) (feedFrom, feedTo, hourStart int64) {
	t.Helper()
	start := time.Now()
	tx := db.Begin()
	defer tx.Rollback()
	buf := make([]model.Point, 0, writeBatch)
	add := func(p model.Point) {
		buf = append(buf, p)
		if len(buf) == cap(buf) {
			if err := tx.Add(buf); err != nil {
				t.Fatalf("add points: %v", err)
			}
			buf = buf[:0]
		}
	}

	// The feed, with the shape of gen_datasets.py (daily cycle, noise,
	// rare spikes), ending now.
	step := feedStep.Milliseconds()
	feedTo = now.Truncate(time.Second).UnixMilli()
	feedFrom = feedTo - int64(nFeed)*step
	rnd := rand.New(rand.NewPCG(2600, 0))
	spike := 0
	for n := range nFeed {
		ts := feedFrom + int64(n)*step
		hour := float64(ts/1000%86400) / 3600
		s := math.Sin(2 * math.Pi * (hour - 7) / 24)
		base := 180 + 120*s*s
		switch {
		case spike > 0:
			spike--
		case rnd.Float64() < 0.004:
			spike = 3 + rnd.IntN(58)
		}
		v := base + rnd.NormFloat64()*15
		if spike > 0 {
			v += 2000
		}
		add(model.Point{Tag: feedTag, T: ts, V: math.Max(math.Trunc(v), 0)})
	}

	// The hour tag: easy to check in the browser, with a 3-hour hole.
	hourStart = now.Add(-hourHours * time.Hour).Truncate(time.Hour).UnixMilli()
	for h := range hourHours {
		if h >= gapFrom && h < gapTo {
			continue
		}
		for s := int64(0); s < 3600; s += 10 {
			add(model.Point{Tag: hourTag, T: hourStart + int64(h)*3600_000 + s*1000, V: float64(h)})
		}
	}
	// A digital tag switching every 7 minutes over the last two days.
	for m := int64(0); m < 2*24*60; m++ {
		add(model.Point{Tag: digitalTag, T: hourStart + m*60_000, V: float64(m / 7 % 2)})
	}
	// The hostile name.
	for m := int64(0); m < 120; m++ {
		add(model.Point{Tag: xssTag, T: feedTo - m*60_000, V: float64(m)})
	}
	// System tags for the System page: the last two hours every 10 s.
	sys := []string{"pith.sys.archive.pending", "pith.sys.archive.performed_per_s", "pith.sys.store.bytes",
		"pith.sys.process.cpu_percent", "pith.station.plc1.polls_per_s", "pith.station.plc1.latency_ms"}
	for i, name := range sys {
		for s := int64(0); s < 7200; s += 10 {
			ts := feedTo - 7200_000 + s*1000
			add(model.Point{Tag: name, T: ts, V: float64(10*(i+1)) + 5*math.Sin(float64(s)/300)})
		}
	}
	if len(buf) > 0 {
		if err := tx.Add(buf); err != nil {
			t.Fatalf("add points: %v", err)
		}
	}
	if err := tx.Commit(context.Background()); err != nil {
		t.Fatalf("commit test data: %v", err)
	}
	// The text tag: a state every two hours.
	var texts []model.TextPoint
	for k := int64(0); k < hourHours/2; k++ {
		text := stateNames[k%int64(len(stateNames))]
		if k == xssState {
			text = xssText
		}
		texts = append(texts, model.TextPoint{Tag: stateTag, T: hourStart + k*2*3600_000, Text: text})
	}
	if err := db.WriteText(context.Background(), texts); err != nil {
		t.Fatalf("write text: %v", err)
	}
	if err := db.Flush(); err != nil {
		t.Fatalf("flush store: %v", err)
	}
	t.Logf("loaded %d feed points and the other tags in %v", nFeed, time.Since(start).Round(time.Millisecond))
	return feedFrom, feedTo, hourStart
}

// liveTable defines the live tags: liveTags changing every second, one
// that never changes (stale), one bad, and one with a hostile name.
func liveTable(t *testing.T) (*tag.Table, []tag.ID) {
	t.Helper()
	tb := tag.New(nil, tag.DefaultOptions(), nil)
	ids := make([]tag.ID, 0, liveTags)
	for i := range liveTags {
		id, err := tb.Define(tag.Def{Name: fmt.Sprintf("live.t%04d", i), Unit: "bar"})
		if err != nil {
			t.Fatalf("define: %v", err)
		}
		ids = append(ids, id)
	}
	old := time.Now().Add(-10 * time.Minute).UnixMilli()
	for _, d := range []struct {
		name string
		q    model.Quality
	}{{liveStaleTag, model.QualityGood}, {liveBadTag, model.QualityBad}, {liveXSSTag, model.QualityGood}} {
		id, err := tb.Define(tag.Def{Name: d.name})
		if err != nil {
			t.Fatalf("define %q: %v", d.name, err)
		}
		ts := old
		if d.name != liveStaleTag {
			ts = time.Now().UnixMilli()
		}
		tb.Update([]tag.Sample{{ID: id, T: ts, V: 42, Q: d.q}})
	}
	return tb, ids
}

// churn updates every live tag once a second with a new value until ctx
// ends, as a 1,000-tag plant polled every second would.
func churn(ctx context.Context, tb *tag.Table, ids []tag.ID) {
	batch := make([]tag.Sample, len(ids))
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := 0; ; n++ {
		now := time.Now().UnixMilli()
		for i, id := range ids {
			batch[i] = tag.Sample{ID: id, T: now, V: float64(i) + float64(n%100)/10}
		}
		tb.Update(batch)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
