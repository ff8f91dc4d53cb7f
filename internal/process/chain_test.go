package process

import (
	"math"
	"sort"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/config"
)

func f64(v float64) *float64 { return &v }
func str(s string) *string   { return &s }
func yes() *bool             { b := true; return &b }

func mustChain(t testing.TB, interp Interp, steps ...config.ProcessStep) *Chain {
	t.Helper()
	c, err := NewChain(config.Input{Tag: "in", Process: steps}, interp, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// last returns the value of the last point written to tag.
func last(pts []model.Point, tag string) (model.Point, bool) {
	for i := len(pts) - 1; i >= 0; i-- {
		if pts[i].Tag == tag {
			return pts[i], true
		}
	}
	return model.Point{}, false
}

func TestStatelessSteps(t *testing.T) {
	cases := []struct {
		name string
		step config.ProcessStep
		in   float64
		want float64
	}{
		{"scale", config.ProcessStep{Scale: f64(0.001)}, 2500, 2.5},
		{"offset", config.ProcessStep{Offset: f64(-273.15)}, 300, 300 - 273.15},
		{"allow positive keeps", config.ProcessStep{AllowPositive: yes()}, 5, 5},
		{"allow positive clips", config.ProcessStep{AllowPositive: yes()}, -5, 0},
		{"allow negative keeps", config.ProcessStep{AllowNegative: yes()}, -5, -5},
		{"allow negative clips", config.ProcessStep{AllowNegative: yes()}, 5, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustChain(t, Linear, tc.step, config.ProcessStep{Log: str("out")})
			pts := c.Push(model.Sample{T: 1000, V: tc.in}, nil)
			if len(pts) != 1 || pts[0].Tag != "out" || pts[0].T != 1000 || math.Abs(pts[0].V-tc.want) > 1e-12 {
				t.Fatalf("got %v, want out=%v at 1000", pts, tc.want)
			}
		})
	}
}

func TestLogPassesQuality(t *testing.T) {
	c := mustChain(t, Linear, config.ProcessStep{Log: str("a")}, config.ProcessStep{Scale: f64(2)}, config.ProcessStep{Log: str("b")})
	pts := c.Push(model.Sample{T: 5, V: 3, Q: model.QualityUncertain}, nil)
	want := []model.Point{{Tag: "a", T: 5, V: 3, Q: model.QualityUncertain}, {Tag: "b", T: 5, V: 6, Q: model.QualityUncertain}}
	if len(pts) != 2 || pts[0] != want[0] || pts[1] != want[1] {
		t.Fatalf("got %v, want %v", pts, want)
	}
}

// exactTrapezoid is the naive model: the trapezoid sum over consecutive
// good samples no further apart than maxGap (0: any).
func exactTrapezoid(s []model.Sample, maxGap int64) float64 {
	var sum float64
	for i := 1; i < len(s); i++ {
		a, b := s[i-1], s[i]
		if a.Q == model.QualityBad || b.Q == model.QualityBad || maxGap > 0 && b.T-a.T > maxGap {
			continue
		}
		sum += (a.V + b.V) / 2 * float64(b.T-a.T) / 3.6e6
	}
	return sum
}

func TestPowerToKWh(t *testing.T) {
	bad := model.QualityBad
	cases := []struct {
		name   string
		maxGap time.Duration
		in     []model.Sample
	}{
		{"ramp", 0, []model.Sample{{T: 0, V: 0}, {T: 3_600_000, V: 2}}}, // 1 kWh
		{"irregular", 0, []model.Sample{{T: 0, V: 1}, {T: 1000, V: 3}, {T: 7000, V: 2}, {T: 7001, V: 10}, {T: 90_000, V: 0}}},
		{"gap skipped", 5 * time.Minute, []model.Sample{{T: 0, V: 1}, {T: 60_000, V: 1}, {T: 60_000 + 3_600_000, V: 5}, {T: 60_000 + 3_660_000, V: 5}}},
		{"bad breaks", 0, []model.Sample{{T: 0, V: 1}, {T: 1000, V: 50, Q: bad}, {T: 2000, V: 1}, {T: 3000, V: 3}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustChain(t, Linear, config.ProcessStep{PowerToKWh: str("e"), MaxGap: config.Duration(tc.maxGap)})
			var pts []model.Point
			for _, s := range tc.in {
				pts = c.Push(s, pts)
			}
			got, _ := last(pts, "e")
			want := exactTrapezoid(tc.in, tc.maxGap.Milliseconds())
			if math.Abs(got.V-want) > 1e-12 {
				t.Fatalf("got %v kWh, want %v", got.V, want)
			}
		})
	}
}

func TestPowerToKWhHold(t *testing.T) {
	// The table reports changes only: 0 kW for an hour then 5 kW must not
	// count the ramp a trapezoid would draw.
	c := mustChain(t, Hold, config.ProcessStep{PowerToKWh: str("e")})
	var pts []model.Point
	for _, s := range []model.Sample{{T: 0, V: 0}, {T: 3_600_000, V: 5}, {T: 3_600_000 + 1_800_000, V: 1}} {
		pts = c.Push(s, pts)
	}
	if got, _ := last(pts, "e"); got.V != 2.5 {
		t.Fatalf("got %v kWh, want 2.5", got.V)
	}
}

func TestPowerToKWhSeededAndLate(t *testing.T) {
	seed := func(tag string) (model.Sample, bool) { return model.Sample{T: 1, V: 100}, tag == "e" }
	c, err := NewChain(config.Input{Tag: "p", Process: []config.ProcessStep{{PowerToKWh: str("e")}}}, Linear, seed)
	if err != nil {
		t.Fatal(err)
	}
	pts := c.Push(model.Sample{T: 0, V: 1}, nil)
	pts = c.Push(model.Sample{T: 3_600_000, V: 1}, pts)
	pts = c.Push(model.Sample{T: 1_000, V: 1000}, pts) // late: skipped
	if got, _ := last(pts, "e"); got.V != 101 || c.Late != 1 {
		t.Fatalf("got %v kWh late %d, want 101 and 1", got.V, c.Late)
	}
}

func TestKWhToPower(t *testing.T) {
	c := mustChain(t, Linear, config.ProcessStep{KWhToPower: str("p")})
	pts := c.Push(model.Sample{T: 0, V: 10}, nil)
	pts = c.Push(model.Sample{T: 1_800_000, V: 11}, pts) // 1 kWh in 30 min = 2 kW
	pts = c.Push(model.Sample{T: 3_600_000, V: 0}, pts)  // meter reset: no power
	if len(pts) != 1 || pts[0].V != 2 || pts[0].T != 1_800_000 {
		t.Fatalf("got %v, want one point 2 kW at 1800000", pts)
	}
}

func TestPulseToRate(t *testing.T) {
	cases := []struct {
		name string
		wrap float64
		per  time.Duration
		in   []float64 // counts, one per 10 s
		want []float64
	}{
		{"per second", 0, 0, []float64{0, 10, 30}, []float64{1, 2}},
		{"per hour", 0, time.Hour, []float64{0, 1}, []float64{360}},
		{"wrap 16 bit", 65536, 0, []float64{65530, 4}, []float64{1}},
		{"reset without wrap", 0, 0, []float64{100, 4, 14}, []float64{1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := mustChain(t, Linear, config.ProcessStep{PulseToRate: str("r"), Wrap: tc.wrap, Per: config.Duration(tc.per)})
			var pts []model.Point
			for i, v := range tc.in {
				pts = c.Push(model.Sample{T: int64(i) * 10_000, V: v}, pts)
			}
			if len(pts) != len(tc.want) {
				t.Fatalf("got %v, want values %v", pts, tc.want)
			}
			for i := range pts {
				if math.Abs(pts[i].V-tc.want[i]) > 1e-12 {
					t.Fatalf("got %v, want values %v", pts, tc.want)
				}
			}
		})
	}
}

// dayTotals runs samples through a kwh_per_day chain and returns the
// final total per day start.
func dayTotals(t testing.TB, tz string, interp Interp, in []model.Sample) map[int64]float64 {
	c := mustChain(t, interp, config.ProcessStep{KWhPerDay: str("d"), TZ: tz})
	out := make(map[int64]float64)
	var pts []model.Point
	for _, s := range in {
		pts = c.Push(s, pts[:0])
		for _, p := range pts {
			out[p.T] = p.V // the last write wins, as in the store
		}
	}
	return out
}

func TestKWhPerDayDST(t *testing.T) {
	cases := []struct {
		tz    string
		day   string
		hours float64
	}{
		{"Europe/London", "2024-03-31", 23},
		{"Europe/London", "2024-10-27", 25},
		{"Europe/London", "2024-06-01", 24},
		{"America/New_York", "2024-03-10", 23},
		{"America/New_York", "2024-11-03", 25},
		{"UTC", "2024-03-31", 24},
	}
	for _, tc := range cases {
		t.Run(tc.tz+" "+tc.day, func(t *testing.T) {
			loc, err := time.LoadLocation(tc.tz)
			if err != nil {
				t.Skipf("no time zone data: %v", err)
			}
			d, _ := time.ParseInLocation("2006-01-02", tc.day, loc)
			from, to := d.Add(-6*time.Hour).UnixMilli(), d.Add(30*time.Hour).UnixMilli()
			var in []model.Sample
			for ms := from; ms <= to; ms += 10_000 {
				in = append(in, model.Sample{T: ms, V: 1}) // 1 kW constant
			}
			got := dayTotals(t, tc.tz, Linear, in)[d.UnixMilli()]
			if math.Abs(got-tc.hours) > 1e-9 {
				t.Fatalf("got %v kWh, want %v (a %v-hour day at 1 kW)", got, tc.hours, tc.hours)
			}
		})
	}
}

// TestKWhPerDayYear checks a year of 10 s power data crossing both DST
// changes against the exact integral of the piecewise-linear signal over
// each local day, computed independently by clipping every segment to
// the day.
func TestKWhPerDayYear(t *testing.T) {
	for _, tz := range []string{"Europe/London", "America/New_York"} {
		loc, err := time.LoadLocation(tz)
		if err != nil {
			t.Skipf("no time zone data: %v", err)
		}
		start := time.Date(2024, 1, 1, 0, 0, 0, 0, loc).UnixMilli()
		end := time.Date(2025, 1, 1, 0, 0, 0, 0, loc).UnixMilli()
		in := make([]model.Sample, 0, (end-start)/10_000+1)
		for ms := start; ms <= end; ms += 10_000 {
			x := float64(ms-start) / 3.6e6
			in = append(in, model.Sample{T: ms, V: 2 + math.Sin(x/3) + 0.5*math.Sin(x*7)})
		}
		got := dayTotals(t, tz, Linear, in)
		days := 0
		var n23, n25 int
		for d := time.Date(2024, 1, 1, 0, 0, 0, 0, loc); d.Year() == 2024; d = d.AddDate(0, 0, 1) {
			a, b := d.UnixMilli(), d.AddDate(0, 0, 1).UnixMilli()
			switch (b - a) / 3_600_000 {
			case 23:
				n23++
			case 25:
				n25++
			}
			want := exactDay(in, a, b)
			if math.Abs(got[a]-want) > 1e-9*max(1, want) {
				t.Fatalf("%s %s: got %.12f kWh, want %.12f", tz, d.Format("2006-01-02"), got[a], want)
			}
			days++
		}
		if days != 366 || n23 != 1 || n25 != 1 {
			t.Fatalf("%s: %d days, %d of 23 h, %d of 25 h; want 366, 1, 1", tz, days, n23, n25)
		}
	}
}

// exactDay integrates the piecewise-linear signal through s over [a, b).
func exactDay(s []model.Sample, a, b int64) float64 {
	var sum float64
	first := max(1, sort.Search(len(s), func(i int) bool { return s[i].T > a }))
	for i := first; i < len(s) && s[i-1].T < b; i++ {
		p, q := s[i-1], s[i]
		lo, hi := max(p.T, a), min(q.T, b)
		if hi <= lo {
			continue
		}
		slope := (q.V - p.V) / float64(q.T-p.T)
		vlo := p.V + slope*float64(lo-p.T)
		vhi := p.V + slope*float64(hi-p.T)
		sum += (vlo + vhi) / 2 * float64(hi-lo) / 3.6e6
	}
	return sum
}

// BenchmarkChain runs the example chain (scale, allow positive, power to
// kWh, kWh per day in Europe/London) over 10 s samples.
//
//	go test ./internal/process -run XXX -bench Chain
func BenchmarkChain(b *testing.B) {
	c := mustChain(b, Linear, config.ProcessStep{Scale: f64(0.001)}, config.ProcessStep{AllowPositive: yes()},
		config.ProcessStep{PowerToKWh: str("e"), MaxGap: config.Duration(5 * time.Minute)},
		config.ProcessStep{KWhPerDay: str("d"), TZ: "Europe/London"})
	var pts []model.Point
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		pts = c.Push(model.Sample{T: int64(i) * 10_000, V: float64(i % 3000)}, pts[:0])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "samples/s")
}
