package acq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/tag"
)

// Table is the part of the tag table the scheduler uses; *tag.Table
// implements it. All methods are safe for concurrent use.
type Table interface {
	Define(d tag.Def) (tag.ID, error)
	Update(batch []tag.Sample) int
}

var _ Table = (*tag.Table)(nil)

// Station statistic tag suffixes, under pith.station.<name>.
const (
	TagComm     = "comm"            // 1 communicating, 0 failed; written with every poll
	TagPolls    = "polls_per_s"     // polls completed in the last second, every 1 s
	TagChanges  = "changes_per_10s" // value changes in the last 10 s, every 10 s
	TagErrors   = "errors"          // failed polls since start, every 1 s
	TagRTT      = "rtt_ms"          // p99 poll duration over the last 10 s, every 10 s
	statsPeriod = time.Second
	slowStats   = 10 // statsPeriod ticks per changes/rtt emission
)

// Scheduler polls stations and writes their values into the table.
type Scheduler struct {
	tab Table
	clk Clock
	log *slog.Logger

	mu       sync.Mutex
	runners  []*runner
	names    map[string]bool
	started  bool
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	statsIDs []tag.ID // 4 per runner, in runner order: polls, changes, errors, rtt

	beat atomic.Pointer[time.Time] // see Heartbeat
}

// NewScheduler returns a scheduler writing into tab; clk nil means the
// wall clock.
func NewScheduler(tab Table, clk Clock, log *slog.Logger) *Scheduler {
	if clk == nil {
		clk = RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{tab: tab, clk: clk, log: log, names: map[string]bool{}}
}

// StatTag returns the name of a station statistic tag.
func StatTag(station, suffix string) string {
	return "pith.station." + station + "." + suffix
}

// Add registers a station before Start, defining its tags and its
// statistic tags in the table.
func (s *Scheduler) Add(st Station, o StationOptions) error {
	name := st.Name()
	if err := o.fill(); err != nil {
		return fmt.Errorf("add station %q: %w", name, err)
	}
	if err := tag.CheckName(StatTag(name, TagComm)); err != nil {
		return fmt.Errorf("add station %q: %w", name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return fmt.Errorf("add station %q: scheduler already started", name)
	}
	if s.names[name] {
		return fmt.Errorf("add station %q: duplicate name", name)
	}
	defs := st.Tags()
	r := &runner{st: st, o: o, log: s.log.With("station", name), ids: make([]tag.ID, len(defs))}
	for i, d := range defs {
		id, err := s.tab.Define(d)
		if err != nil {
			return fmt.Errorf("add station %q: %w", name, err)
		}
		r.ids[i] = id
	}
	src := "pith"
	var err error
	r.commID, err = s.tab.Define(tag.Def{Name: StatTag(name, TagComm), Source: src,
		Description: "1 when the last poll of station " + name + " succeeded, 0 when it failed"})
	if err != nil {
		return fmt.Errorf("add station %q: %w", name, err)
	}
	for _, d := range []tag.Def{
		{Name: StatTag(name, TagPolls), Unit: "1/s", Description: "polls in the last second"},
		{Name: StatTag(name, TagChanges), Unit: "1/10s", Description: "value changes in the last 10 s"},
		{Name: StatTag(name, TagErrors), Description: "failed polls since start"},
		{Name: StatTag(name, TagRTT), Unit: "ms", Description: "p99 poll duration over the last 10 s"},
	} {
		d.Source = src
		id, err := s.tab.Define(d)
		if err != nil {
			return fmt.Errorf("add station %q: %w", name, err)
		}
		s.statsIDs = append(s.statsIDs, id)
	}
	s.names[name] = true
	s.runners = append(s.runners, r)
	return nil
}

// Start runs every station in its own goroutine, plus one goroutine
// writing the statistic tags, until Stop or ctx's end.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("start scheduler: already started")
	}
	s.started = true
	now := s.clk.Now()
	s.beat.Store(&now)
	ctx, s.cancel = context.WithCancel(ctx)
	for _, r := range s.runners {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			r.run(ctx, s.clk, s.tab)
		}()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.statsLoop(ctx)
	}()
	return nil
}

// Stop ends the polling and waits for the goroutines: at most the longest
// poll Timeout.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	s.wg.Wait()
}

// Stats returns every station's statistics.
func (s *Scheduler) Stats() []StationStats {
	s.mu.Lock()
	rs := s.runners
	s.mu.Unlock()
	out := make([]StationStats, len(rs))
	for i, r := range rs {
		out[i] = r.stats(s.clk.Now())
	}
	return out
}

// Heartbeat returns when the scheduler last showed it is alive: its
// Start, then each whole second at which its loop went round with no
// station stuck in a poll for longer than twice its Timeout. A service
// watchdog reads it; zero before Start.
func (s *Scheduler) Heartbeat() time.Time {
	if t := s.beat.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

// stuck returns the first station whose poll has run for longer than
// twice its Timeout (drivers must honour the poll's deadline), or "".
func (s *Scheduler) stuck(now time.Time) string {
	for _, r := range s.runners {
		if t := r.pollStart.Load(); t != 0 && now.Sub(time.Unix(0, t)) > 2*r.o.Timeout {
			return r.st.Name()
		}
	}
	return ""
}

// statsLoop writes the statistic tags of all stations at whole seconds
// and beats the heartbeat.
func (s *Scheduler) statsLoop(ctx context.Context) {
	next := nextTick(s.clk.Now(), statsPeriod)
	batch := make([]tag.Sample, 0, 4*len(s.runners))
	wasStuck := false
	for {
		if err := s.clk.SleepUntil(ctx, next, 0); err != nil {
			return
		}
		now := next
		slow := (now.Unix() % slowStats) == 0
		batch = batch[:0]
		ms := now.UnixMilli()
		for i, r := range s.runners {
			ids := s.statsIDs[4*i : 4*i+4]
			e := r.acc.emit(now, slow)
			batch = append(batch,
				tag.Sample{ID: ids[0], T: ms, V: float64(e.polls)},
				tag.Sample{ID: ids[2], T: ms, V: float64(e.errors)})
			if slow {
				batch = append(batch,
					tag.Sample{ID: ids[1], T: ms, V: float64(e.changes)},
					tag.Sample{ID: ids[3], T: ms, V: e.rttP99ms})
			}
		}
		if len(batch) > 0 {
			s.tab.Update(batch)
		}
		beat := s.clk.Now()
		name := s.stuck(beat)
		if name == "" {
			s.beat.Store(&beat)
		} else if !wasStuck {
			s.log.Error("station stuck in a poll past twice its timeout", "station", name)
		}
		wasStuck = name != ""
		// Ticks missed while the machine was suspended or overloaded are
		// skipped.
		next = nextTick(s.clk.Now(), statsPeriod)
	}
}

// runner polls one station.
type runner struct {
	st     Station
	o      StationOptions
	log    *slog.Logger
	ids    []tag.ID
	commID tag.ID
	acc    accum
	// pollStart is the clock's UnixNano when the poll under way started,
	// 0 between polls; the stats loop reads it to spot a stuck station.
	pollStart atomic.Int64
}

func (r *runner) run(ctx context.Context, clk Clock, tab Table) {
	if r.o.Spin > 0 {
		// A fast station keeps its thread: its precise sleeps wake it there.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	vals := make([]Value, len(r.ids))
	batch := make([]tag.Sample, 0, len(r.ids)+1)
	var tick time.Time
	if r.o.Period > 0 {
		tick = nextTickPhase(clk.Now(), r.o.Period, r.o.Phase)
	}
	failing := false
	for {
		if r.o.Period > 0 {
			if err := clk.SleepUntil(ctx, tick, r.o.Spin); err != nil {
				return
			}
		}
		start := clk.Now()
		late := time.Duration(0)
		if r.o.Period > 0 {
			late = start.Sub(tick)
		}
		for i := range vals {
			vals[i] = Value{V: math.NaN()}
		}
		pctx, cancel := context.WithTimeout(ctx, r.o.Timeout)
		r.pollStart.Store(start.UnixNano())
		err := r.st.Poll(pctx, vals)
		r.pollStart.Store(0)
		cancel()
		if ctx.Err() != nil {
			return // stopping: a cancelled poll says nothing about the device
		}
		end := clk.Now()
		ms := start.UnixMilli()
		batch = batch[:0]
		if err == nil {
			for i, id := range r.ids {
				batch = append(batch, tag.Sample{ID: id, T: ms, V: vals[i].V, Q: vals[i].Q})
			}
			batch = append(batch, tag.Sample{ID: r.commID, T: ms, V: 1})
		} else {
			for _, id := range r.ids {
				batch = append(batch, tag.Sample{ID: id, T: ms, Q: model.QualityBad, Hold: true})
			}
			batch = append(batch, tag.Sample{ID: r.commID, T: ms, V: 0})
		}
		changes := tab.Update(batch)
		r.acc.record(start, r.o.Period > 0, late, end.Sub(start), changes, err)
		if err != nil && !failing {
			r.log.Warn("station poll failed", "err", err)
		} else if err == nil && failing {
			r.log.Info("station communicating again")
		}
		failing = err != nil

		// Choose the next poll.
		switch {
		case r.o.Period > 0:
			tick = tick.Add(r.o.Period)
			earliest := end
			if err != nil {
				earliest = end.Add(r.o.RetryPause)
			}
			if tick.Before(earliest) {
				// Missed ticks are skipped, never polled in a burst.
				if err == nil {
					r.acc.overrun()
				}
				tick = nextTickPhase(earliest, r.o.Period, r.o.Phase)
			}
		case err != nil:
			if clk.SleepUntil(ctx, end.Add(r.o.RetryPause), 0) != nil {
				return
			}
		case r.o.Pause > 0:
			if clk.SleepUntil(ctx, end.Add(r.o.Pause), 0) != nil {
				return
			}
		default:
			if ctx.Err() != nil {
				return
			}
		}
	}
}
