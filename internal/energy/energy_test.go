package energy

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// series makes samples every step from a to b with a few hours missing,
// the value from f.
func series(tag string, a, b, step int64, rng *rand.Rand, f func(i int, t int64) float64) []model.Point {
	var pts []model.Point
	for i, t := 0, a; t < b; i, t = i+1, t+step {
		if (t/hourMs)%37 == 5 { // a gap of an hour now and then
			continue
		}
		tt := t + rng.Int64N(step/2)
		pts = append(pts, model.Point{Tag: tag, T: tt, V: f(i, tt)})
	}
	return pts
}

// naivePower is the model: each local hour's mean power times its length,
// summed per bucket, straight from the samples.
func naivePower(pts []model.Point, edges []int64, scale float64, loc *time.Location, tr *Tariff) (kwh, cost []float64) {
	kwh, cost = make([]float64, len(edges)-1), make([]float64, len(edges)-1)
	hours, _ := Edges(edges[0], edges[len(edges)-1], Hour, loc)
	for h := 0; h+1 < len(hours); h++ {
		a, b := hours[h], hours[h+1]
		var sum float64
		n := 0
		for _, p := range pts {
			if p.T >= a && p.T < b {
				sum += p.V
				n++
			}
		}
		if n == 0 {
			continue
		}
		e := sum / float64(n) * scale * float64(b-a) / hourMs
		bi := 0
		for a >= edges[bi+1] {
			bi++
		}
		kwh[bi] += e
		if tr != nil {
			if e >= 0 {
				cost[bi] += e * naiveMeanPrice(tr, a, b, loc)
			} else {
				cost[bi] += e * tr.ExportPrice
			}
		}
	}
	if tr != nil {
		for i := range cost {
			cost[i] += naiveStanding(tr, edges[i], edges[i+1], loc)
		}
	}
	return kwh, cost
}

// naiveMeanPrice averages the price minute by minute.
func naiveMeanPrice(tr *Tariff, a, b int64, loc *time.Location) float64 {
	var sum float64
	n := 0
	for t := a; t < b; t += 60_000 {
		lt := time.UnixMilli(t).In(loc)
		m := lt.Hour()*60 + lt.Minute()
		p := tr.Price
		for _, bd := range tr.Bands {
			in := false
			day := lt.Weekday()
			if bd.From < bd.To {
				in = m >= bd.From && m < bd.To
			} else {
				in = m >= bd.From || m < bd.To
				if m < bd.To {
					day = (day + 6) % 7
				}
			}
			if in && len(bd.Days) > 0 && !slices.Contains(bd.Days, day) {
				in = false
			}
			if in {
				p = bd.Price
				break
			}
		}
		sum += p
		n++
	}
	return sum / float64(n)
}

// naiveStanding charges each local day whole and a part day by its share.
func naiveStanding(tr *Tariff, a, b int64, loc *time.Location) float64 {
	days, _ := Edges(a, b, Day, loc)
	var s float64
	for i := 0; i+1 < len(days); i++ {
		lo, hi := max(days[i], a), min(days[i+1], b)
		if hi > lo {
			s += tr.StandingCharge * float64(hi-lo) / float64(days[i+1]-days[i])
		}
	}
	return s
}

// naiveCounter credits each increase between consecutive readings to the
// bucket of the earlier reading; a drop is a reset from zero.
func naiveCounter(pts []model.Point, edges []int64, scale float64) []float64 {
	out := make([]float64, len(edges)-1)
	for i := 0; i+1 < len(pts); i++ {
		t := pts[i].T
		if t < edges[0] || t >= edges[len(edges)-1] {
			continue
		}
		bi := 0
		for t >= edges[bi+1] {
			bi++
		}
		out[bi] += step(pts[i].V, pts[i+1].V) * scale
	}
	return out
}

func testTariff() *Tariff {
	return &Tariff{Name: "home", Currency: "EUR", Price: 0.30, StandingCharge: 0.5, ExportPrice: 0.08,
		Bands: []Band{
			{From: 23 * 60, To: 7 * 60, Price: 0.12},                                                  // night, wraps midnight
			{Days: []time.Weekday{time.Saturday, time.Sunday}, From: 7 * 60, To: 23 * 60, Price: 0.2}, // weekend days
			{From: 17*60 + 30, To: 19*60 + 30, Price: 0.45},                                           // evening peak on weekdays
		}}
}

// TestPowerAgainstModel compares kWh and cost per local hour, day and week
// from the rollups with the naive model over ten days holding the autumn
// DST change, with export (negative power) and gaps.
func TestPowerAgainstModel(t *testing.T) {
	loc := mustLoc(t, "Europe/London")
	rng := rand.New(rand.NewPCG(1, 2))
	a, b := ms(t, loc, "2026-10-20 00:00"), ms(t, loc, "2026-10-30 00:00")
	pts := series("house.power", a-hourMs, b+hourMs, 20_000, rng, func(i int, t int64) float64 {
		return float64(rng.IntN(6000) - 1500) // W, sometimes exporting
	})
	db := openStore(t, pts)
	tr := testTariff()
	for _, u := range []Unit{Hour, Day, Week} {
		edges, err := Edges(a, b, u, loc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Compute(db, Source{Tag: "house.power", Kind: Power, Scale: 0.001}, edges, loc, tr)
		if err != nil {
			t.Fatal(err)
		}
		wantKWh, wantCost := naivePower(pts, edges, 0.001, loc, tr)
		for i := range got {
			if !near(got[i].KWh, wantKWh[i]) || !near(got[i].Cost, wantCost[i]) {
				t.Errorf("%s %d (%s): got %v kWh %v, want %v kWh %v", u, i, timeIn(edges[i], loc), got[i].KWh, got[i].Cost, wantKWh[i], wantCost[i])
			}
			if !near(got[i].Import-got[i].Export, got[i].KWh) {
				t.Errorf("%s %d: import %v - export %v != net %v", u, i, got[i].Import, got[i].Export, got[i].KWh)
			}
		}
		if u == Day {
			for i := range got {
				if h := float64(got[i].End-got[i].Start) / hourMs; got[i].Pieces != int(h) {
					t.Errorf("day %d: %d pieces for %v hours", i, got[i].Pieces, h)
				}
			}
		}
	}
}

// TestCounterAgainstModel compares a cumulative Wh register with resets
// (at most one an hour) against the reading-by-reading model.
func TestCounterAgainstModel(t *testing.T) {
	loc := mustLoc(t, "America/New_York")
	rng := rand.New(rand.NewPCG(3, 4))
	a, b := ms(t, loc, "2026-03-05 00:00"), ms(t, loc, "2026-03-12 00:00") // spring change on 8 March
	reg := 5_000_000.0
	pts := series("meter.wh", a-2*hourMs, b+2*hourMs, 15_000, rng, func(i int, t int64) float64 {
		if i%700 == 350 {
			reg = float64(rng.IntN(20)) // a reset (meter replaced, overflow)
		}
		reg += float64(rng.IntN(40))
		return reg
	})
	db := openStore(t, pts)
	for _, u := range []Unit{Hour, Day, Week, Month} {
		edges, err := Edges(a, b, u, loc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Compute(db, Source{Tag: "meter.wh", Kind: Counter, Scale: 0.001}, edges, loc, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := naiveCounter(pts, edges, 0.001)
		for i := range got {
			if !near(got[i].KWh, want[i]) {
				t.Errorf("%s %d (%s): got %v kWh, want %v", u, i, timeIn(edges[i], loc), got[i].KWh, want[i])
			}
		}
	}
}

// TestDayIsSumOfHours checks the zoomer's promise: a day's bar is the sum
// of its hour bars, on the 23- and 25-hour days too.
func TestDayIsSumOfHours(t *testing.T) {
	loc := mustLoc(t, "Europe/Berlin")
	rng := rand.New(rand.NewPCG(5, 6))
	a, b := ms(t, loc, "2026-03-28 00:00"), ms(t, loc, "2026-03-30 00:00")
	pts := series("pv.kw", a, b, 10_000, rng, func(int, int64) float64 { return rng.Float64() * 5 })
	db := openStore(t, pts)
	days, _ := Edges(a, b, Day, loc)
	d, err := Compute(db, Source{Tag: "pv.kw", Kind: Power, Scale: 1}, days, loc, testTariff())
	if err != nil {
		t.Fatal(err)
	}
	for i := range d {
		hours, _ := Edges(days[i], days[i+1], Hour, loc)
		h, err := Compute(db, Source{Tag: "pv.kw", Kind: Power, Scale: 1}, hours, loc, testTariff())
		if err != nil {
			t.Fatal(err)
		}
		var kwh, cost float64
		for _, x := range h {
			kwh += x.KWh
			cost += x.Cost
		}
		if !near(kwh, d[i].KWh) || !near(cost, d[i].Cost) {
			t.Errorf("day %d: hours sum to %v kWh %v, day says %v kWh %v", i, kwh, cost, d[i].KWh, d[i].Cost)
		}
	}
}

// TestTariffPrices pins the price of a few instants and the standing
// charge of the short and long DST days.
func TestTariffPrices(t *testing.T) {
	loc := mustLoc(t, "Europe/London")
	tr := testTariff()
	for _, tc := range []struct {
		at   string
		want float64
	}{
		{"2026-10-21 03:00", 0.12}, // Wednesday night
		{"2026-10-21 12:00", 0.30}, // Wednesday day
		{"2026-10-21 18:00", 0.45}, // Wednesday peak
		{"2026-10-24 18:00", 0.20}, // Saturday: the weekend band comes first
		{"2026-10-25 01:30", 0.12}, // the repeated hour
	} {
		a := ms(t, loc, tc.at)
		if got := tr.meanPrice(a, a+60_000, loc); !near(got, tc.want) {
			t.Errorf("%s: price %v, want %v", tc.at, got, tc.want)
		}
	}
	// The hour 17:00-18:00 on a weekday is half at 0.30, half at 0.45.
	a := ms(t, loc, "2026-10-21 17:00")
	if got := tr.meanPrice(a, a+hourMs, loc); !near(got, 0.375) {
		t.Errorf("17:00 hour: %v, want 0.375", got)
	}
	for _, d := range []string{"2026-10-25 00:00", "2026-03-29 00:00"} {
		a := ms(t, loc, d)
		e, _ := Edges(a, a+1, Day, loc)
		if got := tr.standing(e[0], e[1], loc); !near(got, 0.5) {
			t.Errorf("standing charge of %s: %v, want 0.5", d, got)
		}
	}
}

// TestHourInProgress: the hour holding Until counts its mean power only up
// to Until.
func TestHourInProgress(t *testing.T) {
	const h0 = 1_780_000_000_000 / hourMs * hourMs
	db := openStore(t, []model.Point{{Tag: "p", T: h0, V: 2}, {Tag: "p", T: h0 + 60_000, V: 2}})
	got, err := Compute(db, Source{Tag: "p", Kind: Power, Scale: 1, Until: h0 + 15*60_000}, []int64{h0, h0 + hourMs}, time.UTC, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !near(got[0].KWh, 0.5) {
		t.Errorf("a quarter hour at 2 kW: %v kWh, want 0.5", got[0].KWh)
	}
}
