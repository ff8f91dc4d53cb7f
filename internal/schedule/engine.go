package schedule

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/atomicfile"
	"github.com/pith-historian/pith/internal/clock"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/tag"
)

// Clock tells the engine the time; tests pass a fake one.
type Clock = clock.Clock

// Table is the part of the tag table the engine writes; *tag.Table
// implements it. All methods are safe for concurrent use.
type Table interface {
	Define(d tag.Def) (tag.ID, error)
	Update(batch []tag.Sample) int
}

var _ Table = (*tag.Table)(nil)

// ErrUnknownBooking is returned by DeleteBooking for an id it does not
// hold (or one from the config file, which the API cannot delete).
var ErrUnknownBooking = errors.New("unknown booking")

// bookingsFile is the API's bookings, in the engine's directory.
const bookingsFile = "bookings.json"

// maxBookings bounds the API's bookings, against a runaway client.
const maxBookings = 10_000

// Engine computes schedule states on a scan and writes them to their
// tags. Its methods are safe for concurrent use.
type Engine struct {
	log  *slog.Logger
	tab  Table
	clk  Clock
	dir  string
	scan time.Duration

	paused atomic.Bool // see Pause

	mu       sync.Mutex
	cal      *Calendar
	fromCfg  []Booking // the config file's bookings
	fromAPI  []Booking // persisted in dir/bookings.json
	ids      map[string]tag.ID
	state    map[string]bool
	holidays []string
}

// New builds the engine of the [schedules] section, keeping API bookings
// in dir (created when missing). clk nil is the wall clock.
func New(c config.Schedules, dir string, tab Table, clk Clock, log *slog.Logger) (*Engine, error) {
	if clk == nil {
		clk = clock.Real{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{log: log, tab: tab, clk: clk, dir: dir, scan: c.Scan.Std(), ids: map[string]tag.ID{}, state: map[string]bool{}}
	if e.scan <= 0 {
		e.scan = config.DefaultScheduleScan.Std()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create schedules dir: %w", err)
	}
	if err := e.Reload(c); err != nil {
		return nil, err
	}
	if err := e.loadBookings(); err != nil {
		return nil, err
	}
	return e, nil
}

// Reload replaces the schedules, holidays and config bookings; the API's
// bookings are kept (those of a schedule that no longer exists stay
// stored but inert, and are listed).
func (e *Engine) Reload(c config.Schedules) error {
	apply, err := e.PrepareReload(c)
	if err != nil {
		return err
	}
	apply()
	return nil
}

// PrepareReload checks c and builds what Reload would apply, changing
// nothing but the definitions of the schedules' tags (a new tag has no
// value until apply). The returned apply cannot fail; a config reload
// calls it only once every part of the new config was prepared.
func (e *Engine) PrepareReload(c config.Schedules) (apply func(), err error) {
	cal, err := NewCalendar(c)
	if err != nil {
		return nil, err
	}
	var fromCfg []Booking
	for i, b := range c.Booking {
		bk := Booking{ID: fmt.Sprintf("config-%d", i), Schedule: b.Schedule, Start: b.Start, End: b.End, Note: b.Note, Source: "config"}
		if err := cal.parseBooking(&bk); err != nil {
			return nil, fmt.Errorf("schedules.booking[%d]: %w", i, err)
		}
		fromCfg = append(fromCfg, bk)
	}
	ids := map[string]tag.ID{}
	for _, name := range cal.order {
		s := cal.scheds[name]
		id, err := e.tab.Define(tag.Def{Name: s.Tag, Source: "schedule:" + name, Unit: "on/off",
			Description: "state of schedule " + name + " (1 on, 0 off)"})
		if err != nil {
			return nil, fmt.Errorf("define tag of schedule %q: %w", name, err)
		}
		ids[name] = id
	}
	return func() { e.apply(c, cal, fromCfg, ids) }, nil
}

// apply makes a prepared calendar the running one.
func (e *Engine) apply(c config.Schedules, cal *Calendar, fromCfg []Booking, ids map[string]tag.ID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	// A schedule removed from the file is off: its tag must not stay at 1
	// and keep a rule running.
	var off []tag.Sample
	now := e.clk.Now().UnixMilli()
	for name, id := range e.ids {
		if _, kept := ids[name]; !kept {
			off = append(off, tag.Sample{ID: id, T: now, V: 0})
			delete(e.state, name)
		}
	}
	if len(off) > 0 {
		e.tab.Update(off)
	}
	e.cal, e.fromCfg, e.ids, e.holidays = cal, fromCfg, ids, append([]string(nil), c.Holidays...)
	for i := range e.fromAPI {
		if err := cal.parseBooking(&e.fromAPI[i]); err != nil {
			e.log.Warn("booking inert after reload", "id", e.fromAPI[i].ID, "err", err)
		}
	}
}

// Run writes the states every scan until ctx ends.
func (e *Engine) Run(ctx context.Context) error {
	t := time.NewTicker(e.scan)
	defer t.Stop()
	for {
		if !e.paused.Load() {
			e.Scan(e.clk.Now())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Pause stops (true) or resumes (false) Run's scans: a paused engine
// writes no schedule tag (the standby box of a redundant pair mirrors the
// active box's instead). Bookings and the API keep working.
func (e *Engine) Pause(p bool) { e.paused.Store(p) }

// Scan computes every schedule's state at now and writes it to its tag
// (the table archives only changes under the default policy).
func (e *Engine) Scan(now time.Time) {
	e.mu.Lock()
	batch := make([]tag.Sample, 0, len(e.cal.order))
	for _, name := range e.cal.order {
		on := e.onLocked(name, now)
		if prev, seen := e.state[name]; !seen || prev != on {
			e.log.Info("schedule "+map[bool]string{true: "on", false: "off"}[on], "schedule", name)
		}
		e.state[name] = on
		v := 0.0
		if on {
			v = 1
		}
		batch = append(batch, tag.Sample{ID: e.ids[name], T: now.UnixMilli(), V: v})
	}
	e.mu.Unlock()
	e.tab.Update(batch)
}

func (e *Engine) onLocked(name string, now time.Time) bool {
	s, ok := e.cal.scheds[name]
	if !ok {
		return false
	}
	return e.cal.On(s, e.fromCfg, now) || e.cal.On(s, e.validAPI(), now)
}

// validAPI returns the API bookings whose schedule exists; e.mu is held.
func (e *Engine) validAPI() []Booking {
	out := e.fromAPI[:0:0]
	for _, b := range e.fromAPI {
		if _, ok := e.cal.scheds[b.Schedule]; ok && !b.start.IsZero() {
			out = append(out, b)
		}
	}
	return out
}

// On reports whether the named schedule is on at now; ok is false for an
// unknown schedule. Rules call it through their schedule() function.
func (e *Engine) On(name string, now time.Time) (on, ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.cal.scheds[name]; !ok {
		return false, false
	}
	return e.onLocked(name, now), true
}

// AddBooking checks, stores durably and returns a booking made through
// the API.
func (e *Engine) AddBooking(b Booking) (Booking, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b.Source = "api"
	if err := e.cal.parseBooking(&b); err != nil {
		return Booking{}, err
	}
	if len(e.fromAPI) >= maxBookings {
		return Booking{}, fmt.Errorf("booking: at most %d bookings; delete old ones", maxBookings)
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	b.ID = hex.EncodeToString(id[:])
	next := append(append([]Booking(nil), e.fromAPI...), b)
	if err := e.saveLocked(next); err != nil {
		return Booking{}, err
	}
	e.fromAPI = next
	e.log.Info("booking added", "id", b.ID, "schedule", b.Schedule, "start", b.Start, "end", b.End)
	return b, nil
}

// DeleteBooking removes an API booking durably.
func (e *Engine) DeleteBooking(id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	next := make([]Booking, 0, len(e.fromAPI))
	for _, b := range e.fromAPI {
		if b.ID != id {
			next = append(next, b)
		}
	}
	if len(next) == len(e.fromAPI) {
		return fmt.Errorf("delete booking %q: %w", id, ErrUnknownBooking)
	}
	if err := e.saveLocked(next); err != nil {
		return err
	}
	e.fromAPI = next
	e.log.Info("booking deleted", "id", id)
	return nil
}

// Info is the state of the schedules as GET /api/v1/schedules shows it.
type Info struct {
	Timezone  string         `json:"timezone"`
	Holidays  []string       `json:"holidays"`
	Schedules []ScheduleInfo `json:"schedules"`
	Bookings  []Booking      `json:"bookings"`
}

// ScheduleInfo is one schedule with its current state.
type ScheduleInfo struct {
	Name     string   `json:"name"`
	Tag      string   `json:"tag"`
	On       bool     `json:"on"`
	Lead     string   `json:"lead"`
	Weekly   []string `json:"weekly"`
	Holidays bool     `json:"holidays"`
}

// Info returns the schedules, their states at now and every booking,
// sorted by start.
func (e *Engine) Info(now time.Time) Info {
	e.mu.Lock()
	defer e.mu.Unlock()
	in := Info{Timezone: e.cal.loc.String(), Holidays: append([]string{}, e.holidays...),
		Schedules: []ScheduleInfo{}, Bookings: []Booking{}}
	for _, name := range e.cal.order {
		s := e.cal.scheds[name]
		si := ScheduleInfo{Name: name, Tag: s.Tag, On: e.onLocked(name, now), Lead: s.Lead.String(),
			Holidays: s.SkipHolidays, Weekly: []string{}}
		for _, p := range s.Weekly {
			si.Weekly = append(si.Weekly, p.String())
		}
		in.Schedules = append(in.Schedules, si)
	}
	in.Bookings = append(append(in.Bookings, e.fromCfg...), e.fromAPI...)
	sort.SliceStable(in.Bookings, func(i, j int) bool { return in.Bookings[i].Start < in.Bookings[j].Start })
	return in
}

// loadBookings reads the API's bookings.
func (e *Engine) loadBookings() error {
	b, err := os.ReadFile(filepath.Join(e.dir, bookingsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read bookings: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	bs, err := decodeBookings(b, e.cal, func(bk Booking, err error) {
		e.log.Warn("stored booking inert", "id", bk.ID, "err", err)
	})
	if err != nil {
		return fmt.Errorf("read bookings %s: %w", filepath.Join(e.dir, bookingsFile), err)
	}
	e.fromAPI = bs
	return nil
}

// decodeBookings parses the bookings file and checks each booking against
// cal; inert is told about the ones that do not fit it (they are kept).
func decodeBookings(data []byte, cal *Calendar, inert func(Booking, error)) ([]Booking, error) {
	var f struct {
		Bookings []Booking `json:"bookings"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	for i := range f.Bookings {
		f.Bookings[i].Source = "api"
		if err := cal.parseBooking(&f.Bookings[i]); err != nil {
			inert(f.Bookings[i], err)
		}
	}
	return f.Bookings, nil
}

// saveLocked writes the API's bookings atomically: a temporary file,
// fsync, rename, fsync of the directory. e.mu is held.
func (e *Engine) saveLocked(bs []Booking) error {
	if bs == nil {
		bs = []Booking{}
	}
	data, err := json.MarshalIndent(struct {
		Bookings []Booking `json:"bookings"`
	}{bs}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode bookings: %w", err)
	}
	return atomicfile.Write(filepath.Join(e.dir, bookingsFile), append(data, '\n'), 0o644)
}
