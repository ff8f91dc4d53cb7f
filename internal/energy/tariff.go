package energy

import (
	"fmt"
	"time"
)

// Tariff prices energy: a flat price per kWh imported, time-of-use bands
// that replace it in their hours, a standing charge per local day and a
// price paid per kWh exported. Prices are in Currency per kWh.
type Tariff struct {
	Name           string
	Currency       string  // shown beside costs, e.g. "EUR"
	Price          float64 // per kWh imported outside every band
	StandingCharge float64 // per local day, shared over a day's hours by time
	ExportPrice    float64 // per kWh exported (a negative bucket energy); earns, so lowers the cost
	Bands          []Band  // the first band holding an instant sets its price
}

// Band is a time-of-use price: from From to To (minutes after local
// midnight, To may be 1440; a band with To <= From wraps past midnight) on
// the weekdays in Days (all days when empty).
type Band struct {
	Days     []time.Weekday
	From, To int // minutes after local midnight
	Price    float64
}

// Check reports the first thing wrong with t.
func (t *Tariff) Check() error {
	for i, b := range t.Bands {
		if b.From < 0 || b.From >= 1440 || b.To < 0 || b.To > 1440 {
			return fmt.Errorf("band %d: from and to must be times of day from 00:00 to 24:00", i)
		}
		if b.From == b.To {
			return fmt.Errorf("band %d: from and to are equal", i)
		}
	}
	return nil
}

// holds reports whether band b prices the local minute m of weekday wd.
func (b *Band) holds(wd time.Weekday, m int) bool {
	if len(b.Days) > 0 {
		day := wd
		if b.To <= b.From && m < b.To {
			day = (wd + 6) % 7 // the early part of a wrapping band belongs to the evening before
		}
		found := false
		for _, d := range b.Days {
			if d == day {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if b.From < b.To {
		return m >= b.From && m < b.To
	}
	return m >= b.From || m < b.To
}

// priceAt returns the import price at local minute m of weekday wd.
func (t *Tariff) priceAt(wd time.Weekday, m int) float64 {
	for i := range t.Bands {
		if t.Bands[i].holds(wd, m) {
			return t.Bands[i].Price
		}
	}
	return t.Price
}

// meanPrice returns the time-weighted import price over [a, b): energy in
// a piece is taken as spread evenly over it.
func (t *Tariff) meanPrice(a, b int64, loc *time.Location) float64 {
	if len(t.Bands) == 0 || b <= a {
		return t.Price
	}
	var sum float64
	for s := a; s < b; {
		lt := time.UnixMilli(s).In(loc)
		m := lt.Hour()*60 + lt.Minute()
		// The price holds to the next band edge; steps also stop at each
		// whole local hour, so a DST change (which falls on one) never
		// lies inside a step and minutes count as wall-clock minutes.
		next := (m/60 + 1) * 60
		for _, bd := range t.Bands {
			for _, e := range [2]int{bd.From, bd.To} {
				if e > m && e < next {
					next = e
				}
			}
		}
		into := int64(lt.Second())*1000 + int64(lt.Nanosecond()/1e6)
		e := min(s+int64(next-m)*60_000-into, b)
		sum += t.priceAt(lt.Weekday(), m) * float64(e-s)
		s = e
	}
	return sum / float64(b-a)
}

// standing returns the share of the standing charge falling in [a, b): the
// charge of each local day touched times the part of that day covered.
func (t *Tariff) standing(a, b int64, loc *time.Location) float64 {
	if t.StandingCharge == 0 || b <= a {
		return 0
	}
	var sum float64
	for s := a; s < b; {
		ds := floorLocal(time.UnixMilli(s), Day, loc)
		de := nextLocal(ds, Day, loc).UnixMilli()
		e := min(de, b)
		sum += t.StandingCharge * float64(e-s) / float64(de-ds.UnixMilli())
		s = e
	}
	return sum
}
