package agent

import (
	"strings"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/acq"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
)

// Hand-over tuning.
const (
	// minHandoverTail is the least time the box that stepped down polls
	// on once the other box polls steadily, and the least period a
	// station polling back to back is given.
	minHandoverTail = 50 * time.Millisecond
	// handoverSteady is how many polls in a row of a station, each within
	// handoverSlack periods of the one before, the other box's values
	// must show before the box that stepped down stops polling.
	handoverSteady = 3
	// handoverSlack is the longest interval between two polls of a
	// steady station, in periods.
	handoverSlack = 1.5
)

// handover is a step-down under way, on the box that stepped down: its
// device writes are fenced already (it released the lease), but it keeps
// polling, reads only, until the other box's own values of every station
// reach it through the mirror showing that box polling steadily, and one
// period of the slowest station more. The archive then has no hole at the
// hand-over: for a few polls both boxes read the devices, and each archive
// holds both boxes' values.
//
// Steadily: a station with a value archived at every poll (archive "all";
// for OPC UA a cyclically read one) must show handoverSteady polls in a
// row from the other box, each within handoverSlack periods of the one
// before. The other box's first poll alone is not enough: a box that has
// just taken over may poll once and then late (its reload, the alarms it
// judges, a loaded machine), and a box that stopped at its first value
// would leave that hole. A station whose values are archived on change
// only shows no polls: its first value from the other box (or a station
// statistic) is enough. A station whose values do not come (the other box
// cannot reach it) holds the hand-over up to its time limit.
type handover struct {
	limit time.Duration // the longest the old box keeps polling
	tail  time.Duration // how long it polls on once every station was seen: the slowest station's period

	st   stationMap
	mu   sync.Mutex
	left map[string]*stationRun // stations the other box does not poll steadily yet
	done chan struct{}          // closed once every station was seen
}

// stationRun is the other box's polls of one station seen in a row.
type stationRun struct {
	last int64 // the newest poll's time (Unix ms)
	n    int   // polls in a row, each within handoverSlack periods of the one before
}

// stationMap is what a hand-over knows of cfg's stations.
type stationMap struct {
	byTag    map[string]string        // tag -> station
	byPrefix map[string]string        // "pith.station.<name>." -> station
	every    map[string]bool          // tags archived at every poll
	regular  map[string]bool          // stations with a tag archived at every poll
	period   map[string]time.Duration // station -> its period (minHandoverTail at least)
	slowest  time.Duration            // the longest period
}

// stations returns what a hand-over knows of cfg's stations: the station
// of each tag they poll and of each statistics tag prefix
// ("pith.station.<name>."), the tags archived at every poll, and each
// station's period.
func stations(cfg *config.Config) stationMap {
	m := stationMap{byTag: map[string]string{}, byPrefix: map[string]string{}, every: map[string]bool{}, regular: map[string]bool{}, period: map[string]time.Duration{}}
	add := func(st string, period time.Duration) {
		m.byPrefix[acq.StatTag(st, "")] = st
		// A station polling back to back (no period) is given a moment.
		period = max(period, minHandoverTail)
		m.period[st] = period
		m.slowest = max(m.slowest, period)
	}
	for i := range cfg.Modbus.Clients {
		c := &cfg.Modbus.Clients[i]
		add(c.Name, c.Period.Std())
		tags, _ := c.ExpandedTags()
		for _, t := range tags {
			m.byTag[t.Name] = c.Name
			m.every[t.Name] = t.Archive == config.ArchiveAll
			m.regular[c.Name] = m.regular[c.Name] || m.every[t.Name]
		}
	}
	for i := range cfg.OPCUA.Clients {
		c := &cfg.OPCUA.Clients[i]
		period := max(c.PublishInterval.Std(), c.ReadPeriod.Std())
		if period <= 0 {
			period = time.Second // both default to a second
		}
		add(c.Name, period)
		tags, _ := c.ExpandedTags()
		for _, t := range tags {
			m.byTag[t.Name] = c.Name
			// A monitored item's values come when the server sends them.
			m.every[t.Name] = t.Read && t.Archive == config.ArchiveAll
			m.regular[c.Name] = m.regular[c.Name] || m.every[t.Name]
		}
	}
	return m
}

// of returns the station polling tag, "" when none does.
func (m stationMap) of(tag string) string {
	if st, ok := m.byTag[tag]; ok {
		return st
	}
	if strings.HasPrefix(tag, "pith.station.") {
		for pre, st := range m.byPrefix {
			if strings.HasPrefix(tag, pre) {
				return st
			}
		}
	}
	return ""
}

// newHandover returns the hand-over of cfg's stations; its done channel
// is closed already when there are none. Its time limit is twice the
// lease TTL plus handoverSteady+3 periods of the slowest station: the
// other box takes the lease within a quarter TTL, reloads, polls steadily
// from its first tick, and this one polls on for a period after that.
func newHandover(cfg *config.Config) *handover {
	h := &handover{st: stations(cfg), left: map[string]*stationRun{}, done: make(chan struct{})}
	for _, st := range cfg.StationNames() {
		h.left[st] = &stationRun{}
	}
	slowest := max(h.st.slowest, minHandoverTail)
	h.limit, h.tail = 2*cfg.Redundancy.TTL()+(handoverSteady+3)*slowest, slowest
	if len(h.left) == 0 {
		close(h.done)
	}
	return h
}

// saw notes the points the mirror stored from the other box. Safe for
// concurrent use.
func (h *handover) saw(pts []model.Point) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.left) == 0 {
		return
	}
	for _, p := range pts {
		st := h.st.of(p.Tag)
		r := h.left[st]
		if r == nil {
			continue
		}
		if h.st.regular[st] {
			if !h.st.every[p.Tag] || p.T <= r.last {
				continue // not a poll's time, or a poll seen already
			}
			if r.n == 0 || float64(p.T-r.last) > handoverSlack*float64(h.st.period[st].Milliseconds()) {
				r.n = 0 // a new run
			}
			r.last = p.T
			if r.n++; r.n < handoverSteady {
				continue
			}
		}
		delete(h.left, st)
		if len(h.left) == 0 {
			close(h.done)
			return
		}
	}
}

// overlapped drops, on the active box, the mirrored values of station
// tags at a time it polled itself. They come from the box that stepped
// down, which polls on for a few polls of the hand-over at the same
// period-aligned times: both boxes then keep the active box's value (the
// box that stepped down stores the active's after its own, and of two
// values at one time a store keeps the one written last), so the two
// archives stay equal. It reads the store only for station tags, which
// reach the active box through the mirror only during a hand-over.
func (r *redundancyPart) overlapped(pts []model.Point) []model.Point {
	if !r.el.Active() {
		return pts
	}
	out := pts[:0]
	for _, p := range pts {
		if r.stations.of(p.Tag) != "" {
			if s, err := r.db.Raw(p.Tag, p.T, p.T+1, 1); err == nil && len(s) > 0 {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}
