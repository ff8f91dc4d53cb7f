// Package report sends energy reports on a schedule: after every local
// week or month (DST-correct in the site's zone) it computes the report of
// the period just ended and delivers it, as a CSV file plus a link to its
// page, to the notification sinks alarms use (webhooks and an MQTT
// broker). The next period owed to each sink is kept in a state file, so
// a restart neither sends a period twice nor skips one (docs/config.md,
// "[energy]"; docs/api.md, "Scheduled reports").
package report

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/atomicfile"
	"github.com/pith-historian/pith/internal/clock"
	"github.com/pith-historian/pith/internal/energy"
)

// Dir is the folder of the data directory holding the state file.
const Dir = "reports"

// stateFile keeps, per report and sink, the start of the next period owed.
const stateFile = "state.json"

// DefaultPoll is the longest wait between two checks of due periods.
const DefaultPoll = time.Minute

// Schedule is one scheduled report.
type Schedule struct {
	Name   string
	Every  energy.Unit // energy.Week or energy.Month
	Energy []energy.Source
	Tags   []string
	Tariff *energy.Tariff // nil: no costs
	Delay  time.Duration  // wait after the period's end, for late data
	Topic  string         // MQTT topic of this report
}

// Sent is one report as it is delivered.
type Sent struct {
	ID       string // "<site>-<report>-<period start ms>": the same on every delivery of the period
	Report   string
	Site     string
	Period   string // "2026-10" for a month, "2026-W43" for an ISO week
	From, To int64  // Unix ms, local period edges
	Timezone string
	Link     string // the report page of the period
	Filename string // of the CSV
	CSV      []byte
	Topic    string // the schedule's MQTT topic
}

// Sender delivers reports to one sink. Send is called from the
// scheduler's goroutine only; it returns nil once the sink confirmed the
// report (a 2xx answer, a broker's acknowledgement).
type Sender interface {
	Name() string
	Send(ctx context.Context, r *Sent) error
}

// Options configure a Scheduler.
type Options struct {
	DataDir  string // the state lives in DataDir/reports
	Site     string
	Location *time.Location // local weeks and months; nil is UTC
	Queries  energy.Queries
	Clock    clock.Clock // nil is the wall clock
	Senders  []Sender
	Link     string        // base address of links; "" makes them relative
	Poll     time.Duration // 0 is DefaultPoll
	Log      *slog.Logger
	// Paused, when set and true, makes Run skip its checks: the standby
	// box of a redundant pair sends no reports (the active one does).
	Paused func() bool
}

// Scheduler sends the due periods of its schedules. Check is called from
// one goroutine at a time (Run's, or a test's).
type Scheduler struct {
	o      Options
	scheds []Schedule
	path   string

	mu    sync.Mutex
	state map[string]int64 // "<report>/<every>/<sender>" -> start of the next period owed
}

// New loads the state of the schedules from o.DataDir.
func New(o Options, scheds []Schedule) (*Scheduler, error) {
	if o.Location == nil {
		o.Location = time.UTC
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	for _, s := range scheds {
		if s.Every != energy.Week && s.Every != energy.Month {
			return nil, fmt.Errorf("report %s: every must be a week or a month", s.Name)
		}
	}
	dir := filepath.Join(o.DataDir, Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create reports folder: %w", err)
	}
	s := &Scheduler{o: o, scheds: scheds, path: filepath.Join(dir, stateFile), state: map[string]int64{}}
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read report state: %w", err)
	default:
		if err := json.Unmarshal(b, &s.state); err != nil {
			return nil, fmt.Errorf("report state %s: %w", s.path, err)
		}
	}
	return s, nil
}

func key(s *Schedule, snd Sender) string { return s.Name + "/" + s.Every.String() + "/" + snd.Name() }

// save writes the state atomically.
func (s *Scheduler) save() error {
	s.mu.Lock()
	b, err := json.MarshalIndent(s.state, "", "  ")
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encode report state: %w", err)
	}
	if err := atomicfile.Write(s.path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report state: %w", err)
	}
	return nil
}

// Next returns the start of the next period owed to sender name of
// report, and whether it is known.
func (s *Scheduler) Next(report, every, sender string) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.state[report+"/"+every+"/"+sender]
	return v, ok
}

// Check sends every period that ended (plus the schedule's delay) before
// now and that a sink has not confirmed, oldest first, and records each
// confirmation before the next. A sink seen for the first time is owed
// the last period that ended; periods before are not sent. A failing
// sink keeps its period owed and is tried again at the next Check. It
// returns the first error met.
func (s *Scheduler) Check(ctx context.Context) error {
	now := s.o.Clock.Now()
	var first error
	note := func(err error) {
		if first == nil {
			first = err
		}
	}
	for i := range s.scheds {
		sc := &s.scheds[i]
		cache := map[int64]*Sent{}
		for _, snd := range s.o.Senders {
			k := key(sc, snd)
			s.mu.Lock()
			next, known := s.state[k]
			s.mu.Unlock()
			if !known {
				// The period that ended last (its delay passed or not).
				cur, _ := energy.Period(now, sc.Every, s.o.Location)
				next, _ = energy.Period(time.UnixMilli(cur-1), sc.Every, s.o.Location)
				s.mu.Lock()
				s.state[k] = next
				s.mu.Unlock()
				if err := s.save(); err != nil {
					return err
				}
			}
			for ctx.Err() == nil {
				from, to := energy.Period(time.UnixMilli(next), sc.Every, s.o.Location)
				if from != next {
					// A zone change moved the edges: realign on the period holding next.
					next = from
				}
				if now.Before(time.UnixMilli(to).Add(sc.Delay)) {
					break
				}
				r := cache[from]
				if r == nil {
					var err error
					if r, err = s.build(sc, from, to); err != nil {
						note(fmt.Errorf("report %s: %w", sc.Name, err))
						break
					}
					cache[from] = r
				}
				if err := snd.Send(ctx, r); err != nil {
					s.o.Log.Warn("send report; will retry", "report", sc.Name, "period", r.Period, "sink", snd.Name(), "err", err)
					note(fmt.Errorf("send report %s to %s: %w", sc.Name, snd.Name(), err))
					break
				}
				s.o.Log.Info("report sent", "report", sc.Name, "period", r.Period, "sink", snd.Name())
				next = to
				s.mu.Lock()
				s.state[k] = next
				s.mu.Unlock()
				if err := s.save(); err != nil {
					return err
				}
			}
		}
	}
	return first
}

// build computes the report of [from, to).
func (s *Scheduler) build(sc *Schedule, from, to int64) (*Sent, error) {
	loc := s.o.Location
	rep, err := energy.ComputeReport(s.o.Queries, sc.Energy, sc.Tags, from, to, loc, sc.Tariff)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := energy.WriteReportCSV(&buf, rep, loc, sc.Tariff); err != nil {
		return nil, err
	}
	start := time.UnixMilli(from).In(loc)
	period := start.Format("2006-01")
	if sc.Every == energy.Week {
		y, w := start.ISOWeek()
		period = fmt.Sprintf("%d-W%02d", y, w)
	}
	q := url.Values{}
	q.Set("from", strconv.FormatInt(from, 10))
	q.Set("to", strconv.FormatInt(to, 10))
	for _, e := range sc.Energy {
		q.Add("energy", e.Tag)
	}
	for _, t := range sc.Tags {
		q.Add("tag", t)
	}
	if sc.Tariff != nil {
		q.Set("tariff", sc.Tariff.Name)
	} else {
		q.Set("tariff", "none")
	}
	return &Sent{
		ID:       s.o.Site + "-" + sc.Name + "-" + strconv.FormatInt(from, 10),
		Report:   sc.Name,
		Site:     s.o.Site,
		Period:   period,
		From:     from,
		To:       to,
		Timezone: loc.String(),
		Link:     s.o.Link + "/dashboard#report?" + q.Encode(),
		Filename: "pith-report-" + sc.Name + "-" + period + ".csv",
		CSV:      buf.Bytes(),
		Topic:    sc.Topic,
	}, nil
}

// Run checks at every period's end (plus its delay) and at least every
// Poll until ctx ends.
func (s *Scheduler) Run(ctx context.Context) {
	for {
		if s.o.Paused != nil && s.o.Paused() {
			// Checked again within Poll; the state stays as it was.
		} else if err := s.Check(ctx); err != nil && ctx.Err() == nil {
			s.o.Log.Warn("scheduled reports", "err", err)
		}
		wait := s.o.Poll
		now := s.o.Clock.Now()
		for i := range s.scheds {
			sc := &s.scheds[i]
			_, end := energy.Period(now, sc.Every, s.o.Location)
			if d := time.UnixMilli(end).Add(sc.Delay).Sub(now); d > 0 && d < wait {
				wait = d
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
