package archive

import (
	"slices"
	"time"
)

// latencyWindow is how many recent commits the latency figures cover.
const latencyWindow = 128

// rateWindow is the shortest interval over which the write rate is
// computed, so that the figure reads as "points per second".
const rateWindow = time.Second

// Stats is a snapshot of the queue, the figures D2000 shows as its archive
// system variables.
type Stats struct {
	Pending      int64   // points queued or being written
	PendingBytes int64   // their memory estimate
	Enqueued     uint64  // points accepted by Enqueue
	Written      uint64  // points written (durable)
	Writes       uint64  // successful Write calls
	WriteErrors  uint64  // failed Write calls (each retried)
	Overflows    uint64  // batches refused by Enqueue (byte bound or closed)
	Dropped      uint64  // points in those batches
	WrongKind    uint64  // numbers for a tag the store holds as text, dropped
	PerSec       float64 // points written per second, over the last second or more
	Commit       Latency // Write call durations over the last 128 writes
	Frozen       bool
	FrozenUntil  time.Time // meaningful when Frozen
	Draining     bool      // a freeze ended and its backlog is being written
	LastDrain    Drain     // the last completed drain after a freeze
}

// Latency summarises recent commit durations.
type Latency struct {
	Last, P50, P99, Max time.Duration
}

// Drain reports how a backlog was written after a freeze.
type Drain struct {
	Points   uint64        // points written from the end of the freeze until the queue was empty
	Duration time.Duration // how long that took
	PerSec   float64       // Points / Duration: the drain rate
	At       time.Time     // when the queue became empty
}

type counters struct {
	enqueued, written, writes, writeErrors, overflows, dropped uint64
	wrongKind                                                  uint64

	lat  [latencyWindow]time.Duration
	latN int // commits recorded, the ring's write position is latN % len(lat)

	rateT0 time.Time // start of the current rate interval
	rateN0 uint64    // written at rateT0
	rate   float64   // last computed rate
}

func (c *counters) wrote(n int, took time.Duration, now time.Time) {
	c.written += uint64(n)
	c.writes++
	c.lat[c.latN%latencyWindow] = took
	c.latN++
	c.updateRate(now)
}

func (c *counters) updateRate(now time.Time) {
	if d := now.Sub(c.rateT0); d >= rateWindow {
		c.rate = float64(c.written-c.rateN0) / d.Seconds()
		c.rateT0, c.rateN0 = now, c.written
	}
}

func (c *counters) latency() Latency {
	n := min(c.latN, latencyWindow)
	if n == 0 {
		return Latency{}
	}
	s := slices.Clone(c.lat[:n])
	slices.Sort(s)
	return Latency{
		Last: c.lat[(c.latN-1)%latencyWindow],
		P50:  s[n/2],
		P99:  s[min(n-1, n*99/100)],
		Max:  s[n-1],
	}
}

type drainState struct {
	active   bool
	start    time.Time
	written0 uint64
	last     Drain
}

// endFreeze starts measuring the drain; q.mu is held.
func (q *Queue) endFreeze(now time.Time) {
	q.frozenTo = time.Time{}
	q.drain.active, q.drain.start, q.drain.written0 = true, now, q.c.written
	q.log.Info("archive freeze ended; draining", "pending", q.pending)
	q.drainProgress()
}

// drainProgress closes the drain measurement once the queue is empty;
// q.mu is held.
func (q *Queue) drainProgress() {
	if !q.drain.active || q.pending != 0 {
		return
	}
	now := time.Now()
	d := Drain{Points: q.c.written - q.drain.written0, Duration: now.Sub(q.drain.start), At: now}
	if d.Duration > 0 {
		d.PerSec = float64(d.Points) / d.Duration.Seconds()
	}
	q.drain = drainState{last: d}
	q.log.Info("archive drained", "points", d.Points, "duration", d.Duration, "per_s", int64(d.PerSec))
}

// Stats returns a snapshot of the queue's figures.
func (q *Queue) Stats() Stats {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := time.Now()
	q.c.updateRate(now)
	return Stats{
		Pending:      q.pending,
		PendingBytes: q.pending * pointBytes,
		Enqueued:     q.c.enqueued,
		Written:      q.c.written,
		Writes:       q.c.writes,
		WriteErrors:  q.c.writeErrors,
		Overflows:    q.c.overflows,
		Dropped:      q.c.dropped,
		WrongKind:    q.c.wrongKind,
		PerSec:       q.c.rate,
		Commit:       q.c.latency(),
		Frozen:       now.Before(q.frozenTo),
		FrozenUntil:  q.frozenTo,
		Draining:     q.drain.active,
		LastDrain:    q.drain.last,
	}
}
