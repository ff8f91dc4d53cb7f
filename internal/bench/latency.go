package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// LatencyMode selects how the probe sleeps.
type LatencyMode string

// The probe's sleep modes.
const (
	// ModeNanosleep sleeps with clock_nanosleep(CLOCK_MONOTONIC,
	// TIMER_ABSTIME) on a locked OS thread, as cyclictest does.
	ModeNanosleep LatencyMode = "nanosleep"
	// ModeGoSleep sleeps with time.Sleep, what an ordinary goroutine gets.
	ModeGoSleep LatencyMode = "gosleep"
)

// LatencyOptions configure RunLatency.
type LatencyOptions struct {
	Period   time.Duration // wake-up period
	Duration time.Duration // how long to run
	Mode     LatencyMode   // ModeNanosleep when empty
}

// histMaxUs is the range of the fine histogram: 1 us bins up to 10 ms,
// beyond which wake-ups count in the overflow bin (the exact maximum is
// kept apart).
const histMaxUs = 10_000

// LatencyHist accumulates wake-up latencies with 1 us resolution without
// allocating, so that recording does not disturb what it measures.
type LatencyHist struct {
	bins     [histMaxUs + 1]uint32 // bins[histMaxUs] is the overflow
	n        uint64
	sum      time.Duration
	min, max time.Duration
}

// Add records one latency; a negative one (an early wake-up, which
// clock_nanosleep never gives) counts as 0.
func (h *LatencyHist) Add(d time.Duration) {
	d = max(d, 0)
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += d
	us := int(d / time.Microsecond)
	h.bins[min(us, histMaxUs)]++
}

// LatencyStats summarise a run. Durations are in microseconds in JSON.
type LatencyStats struct {
	Mode    LatencyMode `json:"mode"`
	Period  float64     `json:"period_us"`
	Samples uint64      `json:"samples"`
	Min     float64     `json:"min_us"`
	Avg     float64     `json:"avg_us"`
	P99     float64     `json:"p99_us"`
	Max     float64     `json:"max_us"`
	Overrun uint64      `json:"overruns"` // wake-ups later than a whole period
	// Hist is the coarse histogram printed with the report.
	Hist []HistBin `json:"histogram"`
}

// HistBin counts wake-ups with latency in [From, To) microseconds (To 0:
// unbounded).
type HistBin struct {
	From  int    `json:"from_us"`
	To    int    `json:"to_us"`
	Count uint64 `json:"count"`
}

// coarseEdges are the printed histogram's bin edges in microseconds.
var coarseEdges = []int{0, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}

// Quantile returns the latency below which a fraction q of the samples
// fall, to the microsecond (the upper edge of the bin that holds it, or
// the exact maximum in the overflow bin).
func (h *LatencyHist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for us := range h.bins {
		seen += uint64(h.bins[us])
		if seen >= rank {
			if us == histMaxUs {
				return h.max
			}
			return min(time.Duration(us+1)*time.Microsecond, h.max)
		}
	}
	return h.max
}

// Stats summarises the histogram.
func (h *LatencyHist) Stats() LatencyStats {
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	s := LatencyStats{Samples: h.n, Min: us(h.min), Max: us(h.max), P99: us(h.Quantile(0.99))}
	if h.n > 0 {
		s.Avg = us(h.sum) / float64(h.n)
	}
	for i := 0; i < len(coarseEdges); i++ {
		b := HistBin{From: coarseEdges[i]}
		hi := histMaxUs + 1
		if i+1 < len(coarseEdges) {
			b.To, hi = coarseEdges[i+1], coarseEdges[i+1]
		}
		for us := coarseEdges[i]; us < hi; us++ {
			b.Count += uint64(h.bins[us])
		}
		s.Hist = append(s.Hist, b)
	}
	return s
}

// RunLatency runs the probe: every Period it sleeps until the next
// absolute deadline and records how late it woke. A wake-up later than a
// whole period counts as an overrun and the schedule restarts from now,
// as a scan scheduler skips missed ticks.
func RunLatency(ctx context.Context, o LatencyOptions) (LatencyStats, error) {
	if o.Period <= 0 || o.Duration <= 0 {
		return LatencyStats{}, fmt.Errorf("run latency probe: period %v and duration %v must be positive", o.Period, o.Duration)
	}
	if o.Mode == "" {
		o.Mode = ModeNanosleep
	}
	if o.Mode != ModeNanosleep && o.Mode != ModeGoSleep {
		return LatencyStats{}, fmt.Errorf("run latency probe: unknown mode %q", o.Mode)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := new(LatencyHist)
	var overruns uint64
	now, err := monotonic()
	if err != nil {
		return LatencyStats{}, err
	}
	end := now + o.Duration
	next := now + o.Period
	for i := 0; next <= end; i++ {
		if i&63 == 0 && ctx.Err() != nil {
			break
		}
		if err := sleepAbs(o.Mode, next); err != nil {
			return LatencyStats{}, err
		}
		now, _ = monotonic()
		lat := now - next
		h.Add(lat)
		next += o.Period
		if lat > o.Period {
			overruns++
			next = now + o.Period
		}
	}
	s := h.Stats()
	s.Mode, s.Period, s.Overrun = o.Mode, float64(o.Period)/float64(time.Microsecond), overruns
	return s, nil
}

// monotonic reads CLOCK_MONOTONIC as a duration since its epoch.
func monotonic() (time.Duration, error) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0, fmt.Errorf("read monotonic clock: %w", err)
	}
	return time.Duration(ts.Nano()), nil
}

// sleepAbs sleeps until the monotonic time t.
func sleepAbs(mode LatencyMode, t time.Duration) error {
	if mode == ModeGoSleep {
		now, err := monotonic()
		if err != nil {
			return err
		}
		time.Sleep(t - now)
		return nil
	}
	ts := unix.NsecToTimespec(int64(t))
	for {
		err := unix.ClockNanosleep(unix.CLOCK_MONOTONIC, unix.TIMER_ABSTIME, &ts, nil)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("clock_nanosleep: %w", err)
		}
	}
}

// WriteLatency prints one run as a line of figures and its histogram.
func WriteLatency(w io.Writer, s LatencyStats) {
	fmt.Fprintf(w, "%-9s period %6.0f us  samples %7d  min %6.0f  avg %7.1f  p99 %7.0f  max %7.0f us  overruns %d\n",
		s.Mode, s.Period, s.Samples, s.Min, s.Avg, s.P99, s.Max, s.Overrun)
	var peak uint64
	for _, b := range s.Hist {
		peak = max(peak, b.Count)
	}
	for _, b := range s.Hist {
		if b.Count == 0 {
			continue
		}
		to := fmt.Sprintf("%d", b.To)
		if b.To == 0 {
			to = "inf"
		}
		bar := 0
		if peak > 0 {
			bar = int(40 * b.Count / peak)
		}
		fmt.Fprintf(w, "  [%5d, %5s) us %9d %s\n", b.From, to, b.Count, bars(max(bar, 1)))
	}
}

func bars(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '#'
	}
	return string(b)
}
