package acq

import (
	"slices"
	"sync"
	"time"
)

// Statistic windows.
const (
	rttWindow  = 10 * time.Second // rtt_ms covers polls started this long ago at most
	rttRing    = 4096             // most recent polls kept for rtt_ms
	lateWindow = 1024             // scans kept for the lateness figures
	secBuckets = 16               // per-second counters kept (>= slowStats+2)
)

// StationStats are one station's diagnostics.
type StationStats struct {
	Name      string
	Comm      bool   // the last poll succeeded
	Polls     uint64 // polls since start
	Errors    uint64 // failed polls since start
	Changes   uint64 // value changes since start
	Overruns  uint64 // polls that took longer than their period (ticks skipped)
	LastError string
	RTT       Dist // poll durations of the polls started in the last 10 s
	Late      Dist // scan-start lateness behind the tick over the last 1024 scans (periodic stations only)
}

// Dist summarises durations.
type Dist struct {
	N                       int
	Min, Avg, P50, P99, Max time.Duration
}

func dist(d []time.Duration) Dist {
	if len(d) == 0 {
		return Dist{}
	}
	s := slices.Clone(d)
	slices.Sort(s)
	var sum time.Duration
	for _, v := range s {
		sum += v
	}
	n := len(s)
	return Dist{N: n, Min: s[0], Avg: sum / time.Duration(n), P50: s[n/2], P99: s[min(n-1, n*99/100)], Max: s[n-1]}
}

type rttSample struct {
	start time.Time
	rtt   time.Duration
}

// bucket counts the polls that started in one wall-clock second.
type bucket struct {
	sec                    int64
	polls, errors, changes uint64
}

// emission is what the stats loop writes for one station at a whole second.
type emission struct {
	polls    uint64 // polls started in the previous second
	errors   uint64 // failed polls started before now
	changes  uint64 // changes of polls started in the previous 10 s
	rttP99ms float64
}

// accum collects a runner's statistics: the runner records, the stats loop
// and Stats read. Polls are attributed to the second in which they
// started, so that a poll starting on the same tick as the stats loop is
// counted in the next second whichever goroutine runs first; a poll still
// running a whole second after its start is missed by polls_per_s.
type accum struct {
	mu       sync.Mutex
	polls    uint64
	errors   uint64
	changes  uint64
	overruns uint64
	comm     bool
	lastErr  string
	secs     [secBuckets]bucket
	rtt      [rttRing]rttSample
	rttN     int
	late     [lateWindow]time.Duration
	lateN    int
}

func (a *accum) record(start time.Time, periodic bool, late, rtt time.Duration, changes int, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.polls++
	a.changes += uint64(changes)
	a.comm = err == nil
	sec := start.Unix()
	b := &a.secs[uint64(sec)%secBuckets]
	if b.sec != sec {
		*b = bucket{sec: sec}
	}
	b.polls++
	b.changes += uint64(changes)
	if err != nil {
		a.errors++
		b.errors++
		a.lastErr = err.Error()
	}
	a.rtt[a.rttN%rttRing] = rttSample{start: start, rtt: rtt}
	a.rttN++
	if periodic {
		a.late[a.lateN%lateWindow] = late
		a.lateN++
	}
}

func (a *accum) overrun() {
	a.mu.Lock()
	a.overruns++
	a.mu.Unlock()
}

// bucketAt returns the counters of second sec, or zero ones; a.mu is held.
func (a *accum) bucketAt(sec int64) bucket {
	if b := a.secs[uint64(sec)%secBuckets]; b.sec == sec {
		return b
	}
	return bucket{sec: sec}
}

// recentRTT returns the durations of polls started in [now-rttWindow, now);
// a.mu is held.
func (a *accum) recentRTT(now time.Time) []time.Duration {
	var out []time.Duration
	for i := a.rttN - 1; i >= 0 && i >= a.rttN-rttRing; i-- {
		s := a.rtt[i%rttRing]
		if !s.start.Before(now) {
			continue
		}
		if now.Sub(s.start) > rttWindow {
			break
		}
		out = append(out, s.rtt)
	}
	return out
}

// emit computes the statistic tags for the whole second now.
func (a *accum) emit(now time.Time, slow bool) emission {
	a.mu.Lock()
	defer a.mu.Unlock()
	sec := now.Unix()
	e := emission{polls: a.bucketAt(sec - 1).polls, errors: a.errors}
	// Errors of polls that started at or after now (a runner that got
	// ahead of the stats loop) belong to the next emission.
	e.errors -= a.bucketAt(sec).errors + a.bucketAt(sec+1).errors
	if slow {
		for s := sec - slowStats; s < sec; s++ {
			e.changes += a.bucketAt(s).changes
		}
		e.rttP99ms = float64(dist(a.recentRTT(now)).P99) / float64(time.Millisecond)
	}
	return e
}

func (r *runner) stats(now time.Time) StationStats {
	a := &r.acc
	a.mu.Lock()
	defer a.mu.Unlock()
	return StationStats{
		Name:      r.st.Name(),
		Comm:      a.comm,
		Polls:     a.polls,
		Errors:    a.errors,
		Changes:   a.changes,
		Overruns:  a.overruns,
		LastError: a.lastErr,
		RTT:       dist(a.recentRTT(now.Add(time.Nanosecond))),
		Late:      dist(a.late[:min(a.lateN, lateWindow)]),
	}
}
