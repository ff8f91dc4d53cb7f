package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/redundancy"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// Redundancy tuning.
const (
	redundancyStatsInterval = time.Second
	// redundancyCaughtUp is the most messages a standby may still have to
	// mirror and yet take the lease: about one poll of each station.
	redundancyCaughtUp = 16
	// redundancyForward names the forwarder publishing this box's values
	// to the pair's stream (follower "forward.redundancy").
	redundancyForward = "redundancy"
	// redundancySource is the source of tags first seen through the
	// mirror.
	redundancySource = "redundancy"
)

// redundancyTags are the pair's system tags, pith.sys.redundancy.<suffix>.
var redundancyTags = []struct{ suffix, unit, help string }{
	{"role", "", "1 while this box is the active one of its pair, 0 while it stands by"},
	{"peer_seen_ms", "ms", "time since the other box last said it is alive (-1: never)"},
	{"lease_remaining_ms", "ms", "how long this box may still act unless it renews its lease (0 on the standby)"},
	{"backfill_pending", "messages", "messages of the pair's stream this box has not mirrored yet (-1: unknown)"},
}

// redundancyPart runs [redundancy]: the lease, the role changes (the
// agent's all-or-nothing reload with the role's config), the mirror of
// the other box's values and the pair's system tags.
type redundancyPart struct {
	agent *Agent
	cfg   *config.Config
	db    *store.DB
	tab   *tag.Table
	ctl   *controlRouter
	au    *automation
	// reports are paused on the standby like the automation.
	reports *reportsPart
	// inputs' MQTT subscriber runs on the active box only; set once the
	// inputs part exists.
	inputs atomic.Pointer[inputs]
	log    *slog.Logger
	nc     *nats.Conn // status reads and the alarms shared
	alarms alarmRecords
	// alarmsRead is set once this box has read what the pair's alarm
	// stream held when it subscribed: until then it may not take over.
	alarmsRead atomic.Bool
	// applyMu orders the other box's alarm transitions against a
	// takeover's sending again and judging (see standby): each is applied
	// wholly before it, or after it, when this box judges.
	applyMu sync.Mutex

	el      *redundancy.Elector
	pending atomic.Int64 // backfill pending, -1 unknown
	// stepping is set by a step-down request: the role change it causes
	// is a hand-over (see handover), not a lost lease.
	stepping atomic.Bool
	over     atomic.Pointer[handover] // the hand-over under way, nil when none
	// stations name the station of each polled tag, for the values of a
	// hand-over's overlap.
	stations stationMap
	roles    chan redundancy.Role
	cancel   context.CancelFunc
	done     chan struct{}
}

var _ Part = (*redundancyPart)(nil)

func (r *redundancyPart) Name() string { return "redundancy" }

// durable is this box's consumer of the pair's stream.
func (r *redundancyPart) durable() string {
	rc := r.cfg.Redundancy
	return "pith-redundancy-" + rc.Group + "-" + rc.Node
}

// subject is the pair's stream subject: the site's forwarding subject.
func (r *redundancyPart) subject() string { return "pith." + r.cfg.Site.Name + ".samples" }

func (r *redundancyPart) Start(ctx context.Context) error {
	rc := r.cfg.Redundancy
	r.pending.Store(-1)
	r.roles = make(chan redundancy.Role, 1)
	r.stations = stations(r.cfg)
	el, err := redundancy.New(redundancy.Options{
		URL: rc.NATS, Group: rc.Group, Node: rc.Node, TTL: rc.TTL(), HTTP: rc.URL,
		Eligible: func() bool {
			p := r.pending.Load()
			return p >= 0 && p <= redundancyCaughtUp && r.alarmsRead.Load()
		},
		OnRole: func(role redundancy.Role) {
			select {
			case <-r.roles:
			default:
			}
			r.roles <- role
		},
		Log: r.log.With("part", "redundancy"),
	})
	if err != nil {
		return err
	}
	r.el = el
	r.nc, err = nats.Connect(rc.NATS, nats.Name("pith-redundancy-status-"+rc.Node),
		nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.Timeout(rc.TTL()))
	if err != nil {
		return fmt.Errorf("redundancy: connect to nats %s: %w", rc.NATS, err)
	}
	r.ctl.setGate(r.gate)
	ids := make([]tag.ID, len(redundancyTags))
	for i, t := range redundancyTags {
		if ids[i], err = r.tab.Define(tag.Def{Name: "pith.sys.redundancy." + t.suffix, Unit: t.unit, Description: t.help, Source: "pith"}); err != nil {
			return err
		}
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	n := 5
	fin := make(chan struct{}, n)
	go func() { defer func() { fin <- struct{}{} }(); r.shareAlarms(ctx, r.nc) }()
	go func() { defer func() { fin <- struct{}{} }(); _ = el.Run(ctx) }()
	go func() { defer func() { fin <- struct{}{} }(); r.applyRoles(ctx) }()
	go func() { defer func() { fin <- struct{}{} }(); r.mirror(ctx) }()
	go func() { defer func() { fin <- struct{}{} }(); r.watch(ctx, ids) }()
	go func() {
		for range n {
			<-fin
		}
		close(r.done)
	}()
	r.log.Info("redundancy", "group", rc.Group, "node", rc.Node, "nats", rc.NATS, "lease_ttl", rc.TTL(), "role", "standby")
	return nil
}

// Stop releases the lease (the other box takes over at once) and stops.
func (r *redundancyPart) Stop() {
	r.cancel()
	<-r.done
	r.ctl.setGate(nil)
	if r.au != nil {
		r.au.share.publish.Store(nil)
	}
	r.nc.Close()
}

// errStandby refuses a device write on the standby, naming the active
// box and, when it said, its URL.
type errStandby struct{ active, url string }

// standbyErr returns the refusal of a device write on this box now.
func (r *redundancyPart) standbyErr() errStandby {
	st := r.el.Status()
	e := errStandby{active: st.Holder}
	if st.Holder != "" && st.Holder == st.Peer {
		e.url = st.PeerURL
	}
	return e
}

func (e errStandby) Error() string {
	switch {
	case e.active == "":
		return "this Pith is the standby of its redundant pair and no box holds the lease right now: retry in a moment"
	case e.url != "":
		return fmt.Sprintf("this Pith is the standby of its redundant pair: send control requests to the active box %q at %s", e.active, e.url)
	}
	return fmt.Sprintf("this Pith is the standby of its redundant pair: send control requests to the active box %q", e.active)
}

// HTTPStatus makes POST /api/v1/control answer 503.
func (errStandby) HTTPStatus() int { return http.StatusServiceUnavailable }

// gate lets a device write through only while this box holds its lease,
// and only until the lease's fence deadline.
func (r *redundancyPart) gate() (time.Time, error) {
	if dl := r.el.Deadline(); !dl.IsZero() {
		return dl, nil
	}
	return time.Time{}, r.standbyErr()
}

// applyRoles runs each role change as a reload with the role's config.
// The elector notices a lost lease at its next tick; so that the stations
// stop polling by the fence deadline itself (before the other box may
// start), an active box also demotes itself when the deadline passes.
// Device writes stopped at the deadline already (the gate).
//
// A step-down is a hand-over instead: the box pauses its automation and
// mutes its alarms at once (its writes are fenced by the release), but
// keeps its stations polling until the other box's own values show it
// polling every station steadily (see handover; or the hand-over's time
// limit), and only then reloads as the standby. Taking the lease back
// meanwhile ends the hand-over with the stations still running.
func (r *redundancyPart) applyRoles(ctx context.Context) {
	fence := time.NewTimer(time.Hour)
	fence.Stop()
	defer fence.Stop()
	applied := redundancy.Standby // the role whose config runs
	handing := false              // a hand-over is under way
	var over <-chan struct{}      // closed when the other box polls every station
	var overEnd <-chan time.Time  // the hand-over's end
	endOver := func() {
		handing, over, overEnd = false, nil, nil
		r.over.Store(nil)
	}
	for {
		role := applied
		select {
		case <-ctx.Done():
			return
		case role = <-r.roles:
		case <-fence.C:
			if dl := r.el.Deadline(); !dl.IsZero() {
				fence.Reset(time.Until(dl))
				continue
			}
			role = redundancy.Standby
		case <-over:
			// One more period of the slowest station: a margin over
			// the mirror's delay.
			h := r.over.Load()
			r.log.Info("hand-over: the other box polls every station steadily; standing by after one more period", "period", h.tail)
			over, overEnd = nil, time.After(h.tail)
			continue
		case <-overEnd:
			if over != nil {
				r.log.Warn("hand-over time limit: not every station's values came from the other box; standing by")
			}
			endOver()
			role = redundancy.Standby
		}
		stepping := r.stepping.Swap(false)
		if handing {
			if role != redundancy.Active {
				continue // the hand-over goes on
			}
			// The lease came back before the hand-over ended: the
			// stations never stopped, resume the rest.
			endOver()
			if dl := r.el.Deadline(); !dl.IsZero() {
				fence.Reset(time.Until(dl))
				r.standby(false)
				r.log.Info("lease taken back during the hand-over; active")
				continue
			}
			role = redundancy.Standby
		}
		if role == applied {
			continue
		}
		if role == redundancy.Active {
			dl := r.el.Deadline()
			if dl.IsZero() {
				continue // lost again meanwhile
			}
			fence.Reset(time.Until(dl))
		} else {
			fence.Stop()
			if stepping {
				h := newHandover(r.cfg)
				r.over.Store(h)
				handing, over, overEnd = true, h.done, time.After(h.limit)
				r.standby(true)
				// A box that took the lease before it heard of the
				// other polls at the wrong phase for the overlap.
				if err := r.agent.setLate(r.pollsLate()); err != nil {
					r.log.Error("hand-over: stations not moved to their phase", "err", err)
				}
				r.log.Info("stepped down: polling (reads only) until the other box polls steadily", "limit", h.limit)
				continue
			}
		}
		t := time.Now()
		if err := r.agent.setRole(role == redundancy.Active, r.pollsLate()); err != nil {
			r.log.Error("apply role", "role", role, "err", err)
			continue
		}
		applied = role
		r.standby(role != redundancy.Active)
		r.log.Info("role applied", "role", role, "took", time.Since(t).Round(time.Millisecond))
	}
}

// standby pauses (true) or resumes (false) the calculated tags and input
// chains, the schedules, the rules, the scheduled reports, the MQTT
// subscriber and the Sparkplug hosts and edge nodes, mutes or
// restores the alarm notifications, and makes the alarm engine follow
// the active box or judge again. A box taking over first sends again the
// alarm transitions nobody delivered (see shareAlarms), then judges every
// alarm on the values it holds: what changed while no box judged is
// raised or cleared, and notified, then. A box standing by, once its
// engine follows, takes the other box's transitions it heard while it
// still judged (followPeer).
func (r *redundancyPart) standby(s bool) {
	if r.reports != nil {
		r.reports.pause(s)
	}
	r.inputs.Load().setActive(!s)
	r.agent.setSparkplugActive(!s)
	if r.au == nil {
		return
	}
	if pr := r.au.plant.Process(); pr != nil {
		pr.Pause(s)
	}
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if !s && r.au.alarms != nil {
		r.au.alarms.Mute(false)
		r.renotify()
	}
	r.au.standby(s)
	if s && r.au.alarms != nil {
		r.followPeer()
	}
}

// mirror stores what the other box publishes to the pair's stream:
// values as replicas (its own forwarders do not send them again), shown
// in the tag table as any stored value; deletes and labels applied. The
// other box's system tags are left out: this box has its own.
func (r *redundancyPart) mirror(ctx context.Context) {
	h := forward.Handlers{
		SkipNode: r.cfg.Redundancy.Node,
		Points: func(_ string, pts []model.Point) error {
			out := pts[:0]
			for _, p := range pts {
				if !strings.HasPrefix(p.Tag, "pith.sys.") {
					out = append(out, p)
				}
			}
			out = r.overlapped(out)
			if err := r.db.WriteReplica(ctx, out); err != nil {
				var pe *model.PointError
				if errors.As(err, &pe) {
					r.log.Error("store refused a mirrored value; skipping the batch", "tag", pe.Tag, "err", pe.Err)
					return nil
				}
				return err
			}
			r.tab.Stored(out, redundancySource)
			if h := r.over.Load(); h != nil {
				h.saw(out)
			}
			return nil
		},
		// Text values are stored as replicas too (not forwarded again).
		Text: func(_ string, pts []model.TextPoint) error {
			out := pts[:0]
			for _, p := range pts {
				if !strings.HasPrefix(p.Tag, "pith.sys.") {
					out = append(out, p)
				}
			}
			if err := r.db.WriteTextReplica(ctx, out); err != nil {
				var pe *model.PointError
				if errors.As(err, &pe) {
					r.log.Error("store refused a mirrored text value; skipping the batch", "tag", pe.Tag, "err", pe.Err)
					return nil
				}
				return err
			}
			r.tab.StoredText(out, redundancySource)
			return nil
		},
		// Labels are stored as replicas (not sent back), and kept on
		// the tags' definitions as pushed labels are.
		Labels: func(_ string, series []model.Series) error {
			err := r.tab.LabelVia(ctx, series, r.db.SetLabelsReplica)
			var pe *model.PointError
			if errors.As(err, &pe) {
				r.log.Error("store refused mirrored labels; skipping them", "tag", pe.Tag, "err", pe.Err)
				return nil
			}
			return err
		},
		// A delete applied here is this box's own and goes back to the
		// other box, which has nothing left to delete: one that finds
		// nothing is not applied, so the echo stops there.
		Delete: func(_, tg string, from, to int64) error {
			if s, err := r.db.Raw(tg, from, to, 1); err != nil || len(s) == 0 {
				return nil
			}
			_, err := r.db.Delete(ctx, tg, from, to)
			if errors.Is(err, store.ErrUnknownTag) || errors.Is(err, store.ErrTooOld) {
				return nil
			}
			return err
		},
	}
	// Retried every tick, not with a growing pause: until its consumer
	// exists (the stream appears with the other box's first publish) this
	// box does not know its backfill and may not take the lease.
	wait := r.cfg.Redundancy.TTL() / redundancy.RenewShare
	for ctx.Err() == nil {
		err := forward.Consume(ctx, r.cfg.Redundancy.NATS, []string{r.subject()}, r.durable(), h, r.log.With("part", "redundancy mirror"))
		if ctx.Err() != nil {
			return
		}
		r.log.Debug("mirror stopped; retrying", "in", wait, "err", err)
		sleepCtx(ctx, wait)
	}
}

// watch reads the mirror's backlog and writes the system tags, each
// second and more often while this box waits to be eligible.
func (r *redundancyPart) watch(ctx context.Context, ids []tag.ID) {
	ttl := r.cfg.Redundancy.TTL()
	nc := r.nc
	t := time.NewTicker(ttl / redundancy.RenewShare)
	defer t.Stop()
	var lastStats time.Time
	for {
		r.pending.Store(r.backlog(ctx, nc, ttl/redundancy.RenewShare))
		if now := time.Now(); now.Sub(lastStats) >= redundancyStatsInterval {
			lastStats = now
			r.writeStats(ids, now)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// backlog returns the messages the mirror has not taken yet: 0 when the
// stream does not exist (nothing was ever published), -1 when unknown.
func (r *redundancyPart) backlog(ctx context.Context, nc *nats.Conn, timeout time.Duration) int64 {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stream, err := redundancy.StreamOf(ctx, nc, r.subject())
	if err != nil {
		return -1
	}
	if stream == "" {
		return 0
	}
	n, found, err := redundancy.ConsumerPending(ctx, nc, stream, r.durable())
	if err != nil || !found {
		return -1 // the mirror has not created its consumer yet
	}
	return n
}

func (r *redundancyPart) writeStats(ids []tag.ID, now time.Time) {
	st := r.el.Status()
	role := 0.0
	if st.Role == redundancy.Active && r.el.Active() {
		role = 1
	}
	seen := -1.0
	if !st.PeerSeen.IsZero() {
		seen = float64(now.Sub(st.PeerSeen).Milliseconds())
	}
	ms := now.UnixMilli()
	vals := []float64{role, seen, float64(st.LeaseLeft.Milliseconds()), float64(r.pending.Load())}
	batch := make([]tag.Sample, len(ids))
	for i, id := range ids {
		batch[i] = tag.Sample{ID: id, T: ms, V: vals[i], Q: model.QualityGood}
	}
	r.tab.Update(batch)
}

// stepDownHandler answers POST /api/v1/admin/redundancy/step-down: the
// active box gives its lease to the other one, which takes over while
// this one still polls; 409 on the standby.
type stepDownHandler struct{ r *redundancyPart }

func (h stepDownHandler) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		api.WriteError(w, http.StatusMethodNotAllowed, "use POST")
		return
	}
	if h.r == nil {
		api.WriteError(w, http.StatusNotFound, "this Pith is not one box of a redundant pair ([redundancy] is off)")
		return
	}
	if !h.r.el.Active() {
		api.WriteError(w, http.StatusConflict, h.r.standbyErr().Error())
		return
	}
	ctx, cancel := context.WithTimeout(req.Context(), 2*h.r.cfg.Redundancy.TTL())
	defer cancel()
	h.r.stepping.Store(true)
	// The Sparkplug hosts and edge nodes say offline (STATE, NDEATH) and
	// disconnect before the lease is released: the other box, which
	// connects with the same ids once it holds the lease, never finds
	// this one's sessions still open.
	h.r.agent.setSparkplugActive(false)
	if err := h.r.el.StepDown(ctx); err != nil {
		h.r.agent.setSparkplugActive(h.r.el.Active())
		h.r.stepping.Store(false)
		api.WriteError(w, http.StatusServiceUnavailable, "step down: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = fmt.Fprintf(w, "{\"stepped_down\":true,\"node\":%q}\n", h.r.cfg.Redundancy.Node)
}

// roleConfig returns the config a box runs in its role: the full one
// when it is active or not in a pair; without stations and Modbus
// servers on the standby (it mirrors the active box instead). With late
// the active box's Modbus stations poll half a period after the
// period's multiples (config.ModbusClient.Phase).
func roleConfig(cfg *config.Config, active, late bool) *config.Config {
	if !cfg.Redundancy.Enabled() || active && !late {
		return cfg
	}
	c := *cfg
	if !active {
		c.Modbus.Clients, c.Modbus.Servers, c.OPCUA.Clients = nil, nil, nil
		return &c
	}
	c.Modbus.Clients = slices.Clone(cfg.Modbus.Clients)
	for i := range c.Modbus.Clients {
		c.Modbus.Clients[i].Phase = c.Modbus.Clients[i].Period / 2
	}
	return &c
}

// pollsLate says whether this box, active, polls half a period late:
// when its name sorts after the other box's. At a step-down both boxes
// poll for a few periods (the hand-over), and their polls then never fall
// at the same millisecond: a device read twice at one time would leave
// two values at one timestamp in the site's stream.
func (r *redundancyPart) pollsLate() bool {
	peer := r.el.Status().Peer
	return peer != "" && peer < r.cfg.Redundancy.Node
}

// setSparkplugActive runs (true) or stops (false) the Sparkplug hosts and
// edge nodes with this box's role; nothing once Pith is stopping.
func (a *Agent) setSparkplugActive(active bool) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.stopping || a.sp == nil {
		return
	}
	a.sp.setActive(active)
}

// setLate makes the active box's stations poll half a period late, or
// not (roleConfig), when they do not already: at a step-down, by a box
// that took the lease before it knew the other box's name. Nothing
// happens on a standby or once Pith is stopping.
func (a *Agent) setLate(late bool) error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.stopping || !a.active || a.late == late {
		return nil
	}
	if err := a.applyLocked(roleConfig(a.cur, true, late)); err != nil {
		return err
	}
	a.late = late
	return nil
}

// setRole applies the role's config to every reloadable part, or to
// none, as a reload does.
func (a *Agent) setRole(active, late bool) error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.stopping {
		return errors.New("set role: Pith is stopping")
	}
	a.active, a.late = active, late
	return a.applyLocked(roleConfig(a.cur, active, late))
}
