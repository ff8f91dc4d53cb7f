package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/clock"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/sparkplug"
	"github.com/pith-historian/pith/internal/tag"
)

// sparkplugPart runs the [[sparkplug.host]] host applications, which
// store what edge nodes publish through the push road (inputs' writer and
// new-tag gate), and the [[sparkplug.edge]] edge nodes, which publish the
// tag table and write commanded tags through the automation's guarded
// control path. A reload restarts the entries whose settings changed.
//
// On a box of a redundant pair the hosts and edge nodes run on the active
// box only (setActive): both boxes have the same config, so the same
// client ids, host id and edge node ids, and the pair looks like one host
// and one edge node to the broker. The standby holds a host's values
// through the pair's mirror, as every other value.
type sparkplugPart struct {
	in  *inputs
	au  *automation
	log *slog.Logger

	// paused says the box stands by: no entry runs. Start, Prepare and
	// setActive all run under the agent's reloadMu, which guards it.
	paused bool
	cfg    *config.Config // the config last committed; guarded by mu

	ctx    context.Context // the agent's, from Start
	cancel context.CancelFunc
	done   chan struct{} // closed when the system-tag writer ended

	mu      sync.Mutex          // guards running against the system-tag writer
	running map[string]*spEntry // by name
}

// controlRouter is the control path behind the guard: a tag a Sparkplug
// host archives is written to its edge node (NCMD or DCMD), any other by
// the plant's controller.
type controlRouter struct {
	next api.Controller
	log  *slog.Logger

	mu    sync.RWMutex
	hosts []*sparkplug.Host // the running hosts, set by the sparkplug part
	// gate, when set, is asked before every write (the redundant pair's
	// lease): an error refuses the write, a non-zero time is the deadline
	// the write must be done by.
	gate func() (time.Time, error)
}

// setGate sets the function every write asks first; nil lets all through.
func (r *controlRouter) setGate(g func() (time.Time, error)) {
	r.mu.Lock()
	r.gate = g
	r.mu.Unlock()
}

var _ api.Controller = (*controlRouter)(nil)

// setHosts replaces the hosts (at start and on reload).
func (r *controlRouter) setHosts(hs []*sparkplug.Host) {
	r.mu.Lock()
	r.hosts = hs
	r.mu.Unlock()
}

// Control writes through the host that archives the tag, logging who,
// what and the result as the plant does, or through the plant.
func (r *controlRouter) Control(ctx context.Context, name string, value float64, who string) error {
	r.mu.RLock()
	hosts, gate := r.hosts, r.gate
	r.mu.RUnlock()
	if gate != nil {
		dl, err := gate()
		if err != nil {
			r.log.Info("control write refused", "who", who, "tag", name, "value", value, "err", err)
			return err
		}
		if !dl.IsZero() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl)
			defer cancel()
		}
	}
	for _, h := range hosts {
		start := time.Now()
		err := h.Control(ctx, name, value, who)
		if errors.Is(err, sparkplug.ErrNotHostTag) {
			continue
		}
		attrs := []any{"who", who, "tag", name, "value", value, "took", time.Since(start).Round(time.Microsecond), "sparkplug_host", h.Name()}
		if err != nil {
			r.log.Info("control write refused", append(attrs, "err", err)...)
			return err
		}
		r.log.Info("control write done", attrs...)
		return nil
	}
	return r.next.Control(ctx, name, value, who)
}

// sparkplugStatsInterval is how often the system tags are written.
const sparkplugStatsInterval = time.Second

// sparkplugHostTags and sparkplugEdgeTags are the system tags of a host
// and of an edge node, pith.sys.sparkplug.<name>.<suffix>: counters since
// the entry started.
var (
	sparkplugHostTags = []string{"messages", "points", "bad", "gaps", "rebirths", "deaths", "unborn", "skipped", "refused", "dropped"}
	sparkplugEdgeTags = []string{"births", "data", "values", "commands", "writes", "refused", "lost"}
)

func hostCounters(st *sparkplug.HostStats) []int64 {
	var skipped int64
	for i := range st.Skipped {
		skipped += st.Skipped[i].Load()
	}
	return []int64{st.Messages.Load(), st.Points.Load(), st.Bad.Load(), st.Gaps.Load(), st.Rebirths.Load(),
		st.Deaths.Load(), st.Unborn.Load(), skipped, st.Refused.Load(), st.Dropped.Load()}
}

func edgeCounters(st *sparkplug.EdgeStats) []int64 {
	return []int64{st.Births.Load(), st.Data.Load(), st.Values.Load(), st.Commands.Load(), st.Writes.Load(),
		st.Refused.Load(), st.Lost.Load()}
}

var _ Reloadable = (*sparkplugPart)(nil)

// spEntry is one running host or edge node.
type spEntry struct {
	conf     any // its config.SparkplugHost or config.SparkplugEdge
	run      func(context.Context) error
	stop     func()
	suffixes []string        // its system tags
	counters func() []int64  // their values, in the order of suffixes
	ids      []tag.ID        // the system tags' IDs
	host     *sparkplug.Host // a host's, for the control path; nil for an edge node
}

func (s *sparkplugPart) Name() string { return "sparkplug" }

func (s *sparkplugPart) Start(ctx context.Context) error {
	s.ctx, s.running = ctx, map[string]*spEntry{}
	// A box of a pair starts as the standby (see redundancy.go).
	s.paused = s.in.cfg.Redundancy.Enabled()
	ch, err := s.prepare(s.in.cfg)
	if err != nil {
		return err
	}
	ch.Commit()
	var sctx context.Context
	sctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.writeStats(sctx)
	return nil
}

func (s *sparkplugPart) Stop() {
	s.cancel()
	<-s.done
	s.au.ctl.setHosts(nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.running {
		e.stop()
	}
	s.running = nil
}

// writeStats writes every entry's system tags each second.
func (s *sparkplugPart) writeStats(ctx context.Context) {
	defer close(s.done)
	t := clock.NewAligned(sparkplugStatsInterval)
	defer t.Stop()
	var batch []tag.Sample
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			t.Next()
			batch = batch[:0]
			s.mu.Lock()
			for _, e := range s.running {
				for i, v := range e.counters() {
					batch = append(batch, tag.Sample{ID: e.ids[i], T: now.UnixMilli(), V: float64(v)})
				}
			}
			s.mu.Unlock()
			if len(batch) > 0 {
				s.in.plant.Table().Update(batch)
			}
		}
	}
}

// Prepare builds the entries of cfg that are new or changed; nothing
// connects before Commit.
func (s *sparkplugPart) Prepare(cfg *config.Config) (Change, error) { return s.prepare(cfg) }

func (s *sparkplugPart) prepare(cfg *config.Config) (Change, error) {
	next := map[string]*spEntry{}
	var start []string
	s.mu.Lock()
	running := s.running
	s.mu.Unlock()
	add := func(name string, conf any, build func() (*spEntry, error)) error {
		if cur, ok := running[name]; ok && reflect.DeepEqual(cur.conf, conf) {
			next[name] = cur
			return nil
		}
		e, err := build()
		if err != nil {
			return fmt.Errorf("prepare sparkplug %q: %w", name, err)
		}
		e.conf = conf
		next[name] = e
		start = append(start, name)
		return nil
	}
	hosts, edges := cfg.Sparkplug.Host, cfg.Sparkplug.Edge
	if s.paused {
		hosts, edges = nil, nil
	}
	for _, c := range hosts {
		if err := add(c.Name, c, func() (*spEntry, error) {
			h, err := sparkplug.NewHost(s.in.subscriberSink(), hostOptions(c, s.in.gate, s.in.plant.Table(), s.log))
			if err != nil {
				return nil, err
			}
			return &spEntry{run: h.Run, host: h, suffixes: sparkplugHostTags, counters: func() []int64 { return hostCounters(h.Stats()) }}, nil
		}); err != nil {
			return nil, err
		}
	}
	for _, c := range edges {
		if err := add(c.Name, c, func() (*spEntry, error) {
			o := edgeOptions(c, s.log)
			dir := filepath.Join(cfg.Store.Dir, "sparkplug")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, fmt.Errorf("make %s: %w", dir, err)
			}
			o.BdSeqFile = filepath.Join(dir, c.Name+".bdseq")
			e, err := sparkplug.NewEdge(s.in.plant.Table(), s.au.guard, o)
			if err != nil {
				return nil, err
			}
			return &spEntry{run: e.Run, suffixes: sparkplugEdgeTags, counters: func() []int64 { return edgeCounters(e.Stats()) }}, nil
		}); err != nil {
			return nil, err
		}
	}
	return funcChange{commit: func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for name, e := range s.running {
			if next[name] != e {
				e.stop()
			}
		}
		for _, name := range start {
			e := next[name]
			s.defineTags(name, e)
			e.stop = s.launch(name, e.run)
		}
		s.running, s.cfg = next, cfg
		var hosts []*sparkplug.Host
		for _, e := range next {
			if e.host != nil {
				hosts = append(hosts, e.host)
			}
		}
		s.au.ctl.setHosts(hosts)
	}}, nil
}

// setActive runs (true) or stops (false) every host and edge node of a
// redundant pair's box with its role. A host stopping publishes its STATE
// offline, an edge node its NDEATH, before they disconnect; the box taking
// over connects with the same ids and is born again. The agent's reloadMu
// is held.
func (s *sparkplugPart) setActive(active bool) {
	if s.paused == !active {
		return
	}
	s.paused = !active
	s.mu.Lock()
	cfg := s.cfg
	s.mu.Unlock()
	ch, err := s.prepare(cfg)
	if err != nil {
		// The same entries were built from this config before.
		s.log.Error("sparkplug not started", "err", err)
		return
	}
	ch.Commit()
	switch {
	case len(cfg.Sparkplug.Host)+len(cfg.Sparkplug.Edge) == 0:
	case active:
		s.log.Info("sparkplug started: this box is active", "hosts", len(cfg.Sparkplug.Host), "edge_nodes", len(cfg.Sparkplug.Edge))
	default:
		s.log.Info("sparkplug stopped: this box stands by")
	}
}

// defineTags defines an entry's system tags (names checked by the
// config: they cannot be refused); one that is refused is not written.
func (s *sparkplugPart) defineTags(name string, e *spEntry) {
	e.ids = e.ids[:0]
	for _, suf := range e.suffixes {
		id, err := s.in.plant.Table().Define(tag.Def{Name: "pith.sys.sparkplug." + name + "." + suf, Unit: "count", Source: "pith",
			Description: "Sparkplug " + suf + " since the entry started (docs/sparkplug.md)"})
		if err != nil {
			s.log.Error("define sparkplug system tag", "name", name, "err", err)
			e.counters, e.ids = func() []int64 { return nil }, nil
			return
		}
		e.ids = append(e.ids, id)
	}
}

// launch runs one entry until the returned stop.
func (s *sparkplugPart) launch(name string, run func(context.Context) error) func() {
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := run(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("sparkplug stopped", "name", name, "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

func hostOptions(c config.SparkplugHost, gate *ingest.TagGate, tab *tag.Table, log *slog.Logger) sparkplug.HostOptions {
	o := sparkplug.DefaultHostOptions()
	// What the tag table holds is archived (or mirrored from the other
	// box of a pair): a birth repeating it is not stored again.
	o.Stored = func(name string) (int64, float64, bool) {
		vs, err := tab.Latest(name)
		if err != nil || !vs[0].Has || vs[0].IsText || vs[0].Q != model.QualityGood {
			return 0, 0, false
		}
		return vs[0].T, vs[0].V, true
	}
	o.Name, o.Broker, o.ClientID, o.Username, o.Password = c.Name, c.Broker, c.ClientID, c.Username, c.Password
	o.HostID, o.TagTemplate, o.Writable, o.Gate = c.HostID, c.TagTemplate, c.Writable, gate
	if len(c.Groups) > 0 {
		o.Groups = c.Groups
	}
	if c.RebirthWait > 0 {
		o.RebirthWait = c.RebirthWait.Std()
	}
	o.Logger = log.With("part", "sparkplug")
	return o
}

func edgeOptions(c config.SparkplugEdge, log *slog.Logger) sparkplug.EdgeOptions {
	o := sparkplug.DefaultEdgeOptions()
	o.Name, o.Broker, o.ClientID, o.Username, o.Password = c.Name, c.Broker, c.ClientID, c.Username, c.Password
	o.Group, o.Node, o.Device, o.Tags, o.Writable = c.Group, c.Node, c.Device, c.Tags, c.Writable
	o.PrimaryHost = c.PrimaryHost
	if c.Interval > 0 {
		o.Interval = c.Interval.Std()
	}
	o.Logger = log.With("part", "sparkplug")
	return o
}
