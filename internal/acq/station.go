// Package acq is Pith's acquisition core: the driver contract (Station) and
// the scan scheduler that polls stations on wall-clock-aligned ticks and
// writes their values, qualities and statistics into the tag table.
//
// Each station runs in its own goroutine, so a slow or dead station never
// delays another one's ticks. Stations that share one connection (several
// Modbus unit ids behind one TCP gateway or on one serial line) share one
// client, which serializes requests: one outstanding request at a time, in
// the order the stations ask (Go's mutex hands over in FIFO order once a
// waiter has waited 1 ms). A dead unit therefore holds the line for at most
// its per-request timeout per request; after a failed poll its station
// waits StationOptions.RetryPause before polling again, so its timeouts
// take only a bounded share of the line and the live units keep their
// period (minus that share).
package acq

import (
	"context"
	"fmt"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/tag"
)

// Value is one polled value. A station that cannot read one of its tags
// (while the others succeed) sets Q to bad and V to NaN: the table then
// keeps the tag's last value with quality bad, never an invented one.
type Value struct {
	V float64
	Q model.Quality
}

// Station is a driver instance: one device or unit that is polled as a
// whole. The scheduler calls Poll from one goroutine at a time; Name and
// Tags are called once, when the station is added.
type Station interface {
	// Name is the station's name, used in pith.station.<name>.* tags.
	Name() string
	// Tags lists the station's tags; it must not change afterwards.
	Tags() []tag.Def
	// Poll reads every tag and fills vals[i] for Tags()[i]. vals arrive
	// preset to NaN with quality good, so a slot left unfilled becomes a
	// bad-quality hold. An error means the whole poll failed (no
	// communication); the scheduler then marks all the station's tags bad.
	// Poll must return soon after ctx is done.
	Poll(ctx context.Context, vals []Value) error
}

// StationOptions sets how a station is scheduled.
type StationOptions struct {
	// Period is the scan period; ticks fall on multiples of Period since
	// the Unix epoch (a 1 s period polls at whole seconds). 0 polls back
	// to back.
	Period time.Duration
	// Phase moves the ticks to Phase after the multiples of Period.
	Phase time.Duration
	// Pause is the wait after each poll when Period is 0, to leave a
	// shared line to others.
	Pause time.Duration
	// Timeout bounds one whole poll (its context deadline); drivers apply
	// their own, shorter per-request timeouts inside it.
	Timeout time.Duration
	// RetryPause is the least wait after a failed poll before the next,
	// so a dead device does not monopolise a shared connection.
	RetryPause time.Duration
	// Spin is how long before each tick the scheduler stops sleeping and
	// busy-waits for sub-millisecond start accuracy. Negative means auto:
	// DefaultSpin for periods under SpinBelow, otherwise none.
	Spin time.Duration
}

// Scheduling defaults.
const (
	DefaultPeriod     = time.Second
	DefaultTimeout    = time.Second
	DefaultRetryPause = time.Second
	// DefaultSpin covers Go timer wake-up lateness. On Linux the runtime
	// waits for timers in epoll_wait, whose timeout has millisecond
	// resolution, so a timer fires up to 1 ms late (golang/go#53824);
	// BenchmarkScanLateness20ms measured p50 lateness of ~630 us with a
	// 200 us spin and ~2 us with 1 ms. The cost is ~0.5 ms of CPU per tick
	// on average, 2.5% of a core at a 20 ms period.
	DefaultSpin = time.Millisecond
	// SpinBelow is the period under which spinning is on by default: at
	// 1 s periods a millisecond of lateness does not matter and the CPU is
	// better left idle.
	SpinBelow = 100 * time.Millisecond
)

// DefaultStationOptions returns a 1 s period, 1 s timeout, 1 s retry pause
// and automatic spinning.
func DefaultStationOptions() StationOptions {
	return StationOptions{Period: DefaultPeriod, Timeout: DefaultTimeout, RetryPause: DefaultRetryPause, Spin: -1}
}

func (o *StationOptions) fill() error {
	if o.Period < 0 || o.Pause < 0 || o.Timeout < 0 || o.RetryPause < 0 {
		return fmt.Errorf("check station options %+v: negative duration", *o)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.RetryPause == 0 {
		o.RetryPause = DefaultRetryPause
	}
	if o.Spin < 0 {
		o.Spin = 0
		if o.Period > 0 && o.Period < SpinBelow {
			o.Spin = DefaultSpin
		}
	}
	if o.Period > 0 && o.Spin >= o.Period {
		o.Spin = o.Period / 2
	}
	return nil
}

// Clock is the scheduler's time source; tests use a fake one.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// SleepUntil blocks until the clock reads t or later, or ctx is done
	// (then it returns ctx.Err()). spin is how long before t to stop
	// sleeping and busy-wait; fake clocks ignore it.
	SleepUntil(ctx context.Context, t time.Time, spin time.Duration) error
}

// preciseMargin is how long before a fast station's tick its kernel sleep
// ends; the rest is spun. Measured on a 2-core VM with the other core busy
// (BenchmarkAcqLateness20ms): 0 gave a p99 of 0.3-2.1 ms, the runtime
// being slow to hand the woken goroutine a processor.
const preciseMargin = 300 * time.Microsecond

// RealClock is the wall clock.
type RealClock struct{}

var _ Clock = RealClock{}

// Now returns time.Now().
func (RealClock) Now() time.Time { return time.Now() }

// SleepUntil sleeps on a timer until spin before t, then busy-waits on the
// monotonic clock until t. The spin closes the gap between the timer's
// wake-up (scheduler and timer-slack latency) and the deadline.
func (RealClock) SleepUntil(ctx context.Context, t time.Time, spin time.Duration) error {
	if spin > 0 && preciseSleep && time.Until(t) < SpinBelow {
		// A fast station: the kernel's absolute sleep to just before the
		// tick, leaving time to get back onto a Go processor, then a short
		// busy-wait to the tick itself.
		if err := sleepAbs(ctx, t.Add(-preciseMargin)); err != nil {
			return err
		}
	} else if d := time.Until(t) - spin; d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
	}
	for i := 0; time.Now().Before(t); i++ {
		if i&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return ctx.Err()
}

// nextTick returns the first multiple of period (since the Unix epoch)
// strictly after t.
// nextTickPhase returns the first multiple of period plus phase after t.
func nextTickPhase(t time.Time, period, phase time.Duration) time.Time {
	return nextTick(t.Add(-phase), period).Add(phase)
}

func nextTick(t time.Time, period time.Duration) time.Time {
	ns := t.UnixNano()
	p := int64(period)
	next := ns - ns%p + p
	return time.Unix(0, next)
}

// badQuality is the quality of a value a driver could not read.
const badQuality = model.QualityBad
