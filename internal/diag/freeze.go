package diag

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/archive"
)

// Freezer is the archive queue as FREEZE drives it, implemented by
// *archive.Queue. All methods are safe for concurrent use.
type Freezer interface {
	Freeze(d time.Duration) // pause writes for d, queueing meanwhile
	Thaw()                  // end a freeze early
	Stats() archive.Stats
}

var _ Freezer = (*archive.Queue)(nil)

// FreezeEvent is one progress line of a FREEZE: every Tick while frozen
// (Phase "frozen"), then every Tick while the backlog drains ("drain").
type FreezeEvent struct {
	Phase   string  `json:"phase"`
	Seconds float64 `json:"t"`       // since the freeze began
	Pending int64   `json:"pending"` // values in the queue
	// InPerSec is the rate values entered the queue over the last tick,
	// OutPerSec the rate they were written to the store.
	InPerSec  float64 `json:"in_per_s"`
	OutPerSec float64 `json:"out_per_s"`
}

// FreezeSummary ends a FREEZE.
type FreezeSummary struct {
	Phase        string  `json:"phase"`         // "summary"
	FrozenFor    float64 `json:"frozen_s"`      // seconds writes were held
	Accumulated  int64   `json:"accumulated"`   // backlog when writes resumed
	DrainSeconds float64 `json:"drain_s"`       // from resume until the backlog was written
	DrainPerSec  float64 `json:"drained_per_s"` // Accumulated / DrainSeconds
	PeakPerSec   float64 `json:"peak_write_per_s"`
	Enqueued     uint64  `json:"enqueued"` // values accepted during the whole command
	Written      uint64  `json:"written"`  // values written during the whole command
	Dropped      uint64  `json:"dropped"`  // values refused by a full queue: lost
	Drained      bool    `json:"drained"`  // the backlog was written within the watch time
}

// FreezeOptions configure RunFreeze.
type FreezeOptions struct {
	Freeze time.Duration // how long writes are held
	Watch  time.Duration // longest the drain is watched after the freeze
	Tick   time.Duration // progress interval (default 1 s)
	// Poll is how often the queue is sampled to time the end of the drain
	// precisely (default 5 ms).
	Poll time.Duration
}

// RunFreeze freezes q for o.Freeze, reporting its depth every tick, then
// watches the drain until the backlog present at resume is written (or
// the queue is empty) or o.Watch passes, and returns the summary. emit may
// be nil; an error from it (the client left) thaws the queue and ends the
// run. Values keep flowing into the queue throughout: acquisition never
// stops.
func RunFreeze(ctx context.Context, q Freezer, o FreezeOptions, emit func(FreezeEvent) error) (FreezeSummary, error) {
	if o.Tick <= 0 {
		o.Tick = time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 5 * time.Millisecond
	}
	if emit == nil {
		emit = func(FreezeEvent) error { return nil }
	}
	sum := FreezeSummary{Phase: "summary"}
	s0 := q.Stats()
	start := time.Now()
	// This loop thaws the queue (Thaw below, or abort); the queue's own
	// deadline, a little later, only guards against a run that never
	// ends. Were it the same, a tick that a loaded machine runs late would
	// see the queue already draining and report it as frozen.
	q.Freeze(o.Freeze + o.Tick + time.Second)
	last, lastT := s0, start
	tick := func(phase string, now time.Time, s archive.Stats) error {
		dt := now.Sub(lastT).Seconds()
		ev := FreezeEvent{Phase: phase, Seconds: now.Sub(start).Seconds(), Pending: s.Pending}
		if dt > 0 {
			ev.InPerSec = float64(s.Enqueued-last.Enqueued) / dt
			ev.OutPerSec = float64(s.Written-last.Written) / dt
		}
		// A short last interval (the drain ended between ticks) would
		// turn one burst of writes into an inflated rate.
		if phase == "drain" && dt >= o.Tick.Seconds()/2 {
			sum.PeakPerSec = max(sum.PeakPerSec, ev.OutPerSec)
		}
		last, lastT = s, now
		return emit(ev)
	}
	abort := func(err error) (FreezeSummary, error) {
		q.Thaw()
		return sum, err
	}

	// Frozen: report every tick until the deadline.
	end := start.Add(o.Freeze)
	for next := start.Add(o.Tick); ; next = next.Add(o.Tick) {
		if !next.Before(end) {
			if err := SleepUntil(ctx, end); err != nil {
				return abort(err)
			}
			break
		}
		if err := SleepUntil(ctx, next); err != nil {
			return abort(err)
		}
		if err := tick("frozen", time.Now(), q.Stats()); err != nil {
			return abort(err)
		}
	}
	// The queue thaws by its own deadline; Thaw makes the moment exact.
	q.Thaw()
	resume := time.Now()
	s1 := q.Stats()
	sum.FrozenFor = resume.Sub(start).Seconds()
	sum.Accumulated = s1.Pending
	if err := tick("frozen", resume, s1); err != nil {
		return sum, err
	}

	// Drain: poll finely to time the end, report every tick.
	target := s1.Written + uint64(s1.Pending)
	deadline := resume.Add(o.Watch)
	nextTick := resume.Add(o.Tick)
	var s archive.Stats
	for {
		if err := SleepUntil(ctx, time.Now().Add(o.Poll)); err != nil {
			return sum, err
		}
		now := time.Now()
		s = q.Stats()
		if s.Written >= target || s.Pending == 0 {
			sum.Drained = true
			sum.DrainSeconds = now.Sub(resume).Seconds()
			if err := tick("drain", now, s); err != nil {
				return sum, err
			}
			break
		}
		if !now.Before(nextTick) {
			nextTick = nextTick.Add(o.Tick)
			if err := tick("drain", now, s); err != nil {
				return sum, err
			}
		}
		if !now.Before(deadline) {
			sum.DrainSeconds = now.Sub(resume).Seconds()
			break
		}
	}
	if sum.Drained && sum.DrainSeconds > 0 {
		sum.DrainPerSec = float64(sum.Accumulated) / sum.DrainSeconds
		sum.PeakPerSec = max(sum.PeakPerSec, float64(s.Written-s1.Written)/sum.DrainSeconds)
	}
	sum.Enqueued = s.Enqueued - s0.Enqueued
	sum.Written = s.Written - s0.Written
	sum.Dropped = s.Dropped - s0.Dropped
	return sum, nil
}

// SleepUntil sleeps until t or until ctx ends, returning ctx's error then.
func SleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// FreezeRequest is the body of POST /api/v1/admin/freeze.
type FreezeRequest struct {
	Seconds      float64 `json:"seconds"`       // freeze length, > 0
	WatchSeconds float64 `json:"watch_seconds"` // longest drain watch, >= 0
}

// Bounds of a FREEZE request.
const (
	maxFreeze       = time.Hour
	maxFreezeBody   = 4 << 10 // bytes
	freezeMediaType = "application/x-ndjson"
)

// FreezeHandler serves POST /api/v1/admin/freeze: it runs RunFreeze on q
// and streams each FreezeEvent, then the FreezeSummary, as one JSON object
// per line (NDJSON), flushed as they happen. One FREEZE runs at a time; a
// second request gets 409. It must sit behind the API's admin
// authorisation once the API has one.
type FreezeHandler struct {
	q    Freezer
	log  *slog.Logger
	tick time.Duration
	busy sync.Mutex
}

// NewFreezeHandler returns the handler for q.
func NewFreezeHandler(q Freezer, log *slog.Logger) *FreezeHandler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &FreezeHandler{q: q, log: log, tick: time.Second}
}

func jsonError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (h *FreezeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		jsonError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed (allowed: POST)")
		return
	}
	var req FreezeRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxFreezeBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		jsonError(w, http.StatusBadRequest, fmt.Sprintf("decode freeze request: %v", err))
		return
	}
	freeze := time.Duration(req.Seconds * float64(time.Second))
	watch := time.Duration(req.WatchSeconds * float64(time.Second))
	if !(freeze > 0 && freeze <= maxFreeze) {
		jsonError(w, http.StatusBadRequest, fmt.Sprintf("seconds %v: want more than 0 and at most %v", req.Seconds, maxFreeze.Seconds()))
		return
	}
	if !(watch >= 0 && watch <= maxFreeze) {
		jsonError(w, http.StatusBadRequest, fmt.Sprintf("watch_seconds %v: want 0 to %v", req.WatchSeconds, maxFreeze.Seconds()))
		return
	}
	if !h.busy.TryLock() {
		jsonError(w, http.StatusConflict, "a freeze is already running")
		return
	}
	defer h.busy.Unlock()
	w.Header().Set("Content-Type", freezeMediaType)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	send := func(v any) error {
		if err := enc.Encode(v); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	}
	h.log.Info("freeze requested", "seconds", req.Seconds, "watch_seconds", req.WatchSeconds, "remote", r.RemoteAddr)
	sum, err := RunFreeze(r.Context(), h.q, FreezeOptions{Freeze: freeze, Watch: watch, Tick: h.tick},
		func(ev FreezeEvent) error { return send(ev) })
	if err != nil {
		h.log.Warn("freeze ended early", "err", err)
		return
	}
	h.log.Info("freeze done", "accumulated", sum.Accumulated, "drained_per_s", int64(sum.DrainPerSec),
		"peak_write_per_s", int64(sum.PeakPerSec), "dropped", sum.Dropped)
	send(sum)
}
