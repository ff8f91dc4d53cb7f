package opcua

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/acq"
	"github.com/pith-historian/pith/internal/tag"
)

// Statistic tag suffixes under pith.station.<name>, beside the ones a
// Modbus station has (acq.TagComm, acq.TagPolls, acq.TagChanges,
// acq.TagErrors, acq.TagRTT).
const (
	TagNotifications = "notifications_per_s" // monitored item values received in the last second, every 1 s
	TagOverflows     = "queue_overflows"     // values the server dropped from a full monitored item queue (overflow bit seen) since start, every 1 s
	statsPeriod      = time.Second
	slowStats        = 10 // statsPeriod ticks per changes/rtt emission
	rttKeep          = 1024
)

// statIDs are the station's statistic tags.
type statIDs struct {
	comm, polls, changes, errors, rtt, notifications, overflows tag.ID
}

// counters are the station's running totals; the session goroutines add,
// the stats loop reads.
type counters struct {
	comm          atomic.Bool
	notifications atomic.Uint64
	changes       atomic.Uint64
	errors        atomic.Uint64
	overflows     atomic.Uint64
	reads         atomic.Uint64

	mu      sync.Mutex
	lastErr string
	rtt     []time.Duration // durations of recent cyclic reads
}

func (c *counters) recordRead(d time.Duration, err error) {
	c.reads.Add(1)
	if err != nil {
		c.errors.Add(1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.lastErr = err.Error()
	}
	if len(c.rtt) >= rttKeep {
		c.rtt = c.rtt[1:]
	}
	c.rtt = append(c.rtt, d)
}

func (s *Station) setLastErr(err error) {
	if err == nil {
		return
	}
	s.cnt.mu.Lock()
	s.cnt.lastErr = err.Error()
	s.cnt.mu.Unlock()
}

func (s *Station) defineStats() error {
	name := s.cfg.Name
	for _, d := range []struct {
		id   *tag.ID
		suf  string
		unit string
		desc string
	}{
		{&s.stat.comm, acq.TagComm, "", "1 while the OPC UA session of station " + name + " is up, 0 when it is lost"},
		{&s.stat.polls, acq.TagPolls, "1/s", "cyclic reads in the last second"},
		{&s.stat.changes, acq.TagChanges, "1/10s", "value changes in the last 10 s"},
		{&s.stat.errors, acq.TagErrors, "", "connection losses and failed reads since start"},
		{&s.stat.rtt, acq.TagRTT, "ms", "p99 cyclic read duration over the last 10 s"},
		{&s.stat.notifications, TagNotifications, "1/s", "monitored item values received in the last second"},
		{&s.stat.overflows, TagOverflows, "", "monitored item values the server dropped from a full queue since start"},
	} {
		id, err := s.tab.Define(tag.Def{Name: acq.StatTag(name, d.suf), Unit: d.unit, Description: d.desc, Source: "pith"})
		if err != nil {
			return err
		}
		*d.id = id
	}
	return nil
}

// statsLoop writes the statistic tags at whole seconds, the slow ones every
// 10 s, as the Modbus scheduler does.
func (s *Station) statsLoop(ctx context.Context) {
	var lastNotes, lastReads, lastChanges uint64
	tick := 0
	for {
		now := time.Now()
		next := now.Truncate(statsPeriod).Add(statsPeriod)
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		tick++
		ms := next.UnixMilli()
		notes, reads := s.cnt.notifications.Load(), s.cnt.reads.Load()
		batch := []tag.Sample{
			{ID: s.stat.notifications, T: ms, V: float64(notes - lastNotes)},
			{ID: s.stat.polls, T: ms, V: float64(reads - lastReads)},
			{ID: s.stat.errors, T: ms, V: float64(s.cnt.errors.Load())},
			{ID: s.stat.overflows, T: ms, V: float64(s.cnt.overflows.Load())},
		}
		lastNotes, lastReads = notes, reads
		if next.Unix()%slowStats == 0 {
			ch := s.cnt.changes.Load()
			batch = append(batch, tag.Sample{ID: s.stat.changes, T: ms, V: float64(ch - lastChanges)},
				tag.Sample{ID: s.stat.rtt, T: ms, V: s.rttP99ms()})
			lastChanges = ch
		}
		s.tab.Update(batch)
	}
}

func (s *Station) rttP99ms() float64 {
	s.cnt.mu.Lock()
	d := slices.Clone(s.cnt.rtt)
	s.cnt.rtt = s.cnt.rtt[:0]
	s.cnt.mu.Unlock()
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[min(len(d)-1, len(d)*99/100)]) / float64(time.Millisecond)
}

// Stats are a station's counters since start.
type Stats struct {
	Name          string
	Comm          bool
	Notifications uint64 // monitored item values received
	Changes       uint64 // value changes applied to the table
	Errors        uint64 // connection losses and failed reads
	Overflows     uint64 // values the server dropped from full queues
	Reads         uint64 // cyclic reads
	LastError     string
}

// Stats returns the station's counters.
func (s *Station) Stats() Stats {
	s.cnt.mu.Lock()
	last := s.cnt.lastErr
	s.cnt.mu.Unlock()
	return Stats{Name: s.cfg.Name, Comm: s.cnt.comm.Load(), Notifications: s.cnt.notifications.Load(),
		Changes: s.cnt.changes.Load(), Errors: s.cnt.errors.Load(), Overflows: s.cnt.overflows.Load(),
		Reads: s.cnt.reads.Load(), LastError: last}
}
