package clock

import "time"

// Aligned is a ticker whose ticks fall on whole multiples of its period
// on the wall clock (every second at .000 for a 1 s period). The parts of
// a Pith that wake every second (system tags, the store's maintenance,
// the event collector, forwarder and Sparkplug figures) use it, so that
// an idle process wakes once a second for all of them instead of once for
// each. Unlike time.Ticker it must be re-armed: call Next after each
// receive from C.
type Aligned struct {
	C <-chan time.Time
	t *time.Timer
	d time.Duration
}

// NewAligned returns an Aligned ticker of period d (d > 0), first firing
// at the next multiple of d.
func NewAligned(d time.Duration) *Aligned {
	t := time.NewTimer(untilNext(time.Now(), d))
	return &Aligned{C: t.C, t: t, d: d}
}

// Next arms the tick after the one just received: at the next multiple of
// the period after now, so a late tick does not make the next one early
// or drift.
func (a *Aligned) Next() { a.t.Reset(untilNext(time.Now(), a.d)) }

// Stop stops the ticker.
func (a *Aligned) Stop() { a.t.Stop() }

// untilNext is the time from now to the next multiple of d after it.
func untilNext(now time.Time, d time.Duration) time.Duration {
	return d - now.Sub(now.Truncate(d))
}
