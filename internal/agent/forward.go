package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/clock"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// forwardStatsInterval is how often the forwarders' system tags are written.
const forwardStatsInterval = time.Second

// forwardArchiveEvery is how many stats readings pass between two that
// are archived (on change).
const forwardArchiveEvery = 10

// forwardLagCost is how many times the last lag reading (db.Followers,
// which reads the WAL between each cursor and the end) the stats loop
// waits before the next one, so that a large backlog is not read every
// second.
const forwardLagCost = 10

// forwardIdle is how long a forwarder waits for the store to commit more
// before its backlog reads 0.
const forwardIdle = 100 * time.Millisecond

// followerPrefix starts the store follower name of every forwarder:
// "forward.<name>".
const followerPrefix = "forward."

// forwarder is one [[forward.*]] entry: a store follower feeding a sink.
type forwarder struct {
	name   string
	kind   string
	entry  any // the config entry, to tell a changed forwarder at reload
	fo     *store.Follower
	fwd    *forward.Forwarder
	sink   sinkOf
	ids    []tag.ID // system tags, in forwardSysTags order
	cancel context.CancelFunc
	done   chan struct{} // closed when the forwarding loop returned

	// Read and written by the stats loop only.
	lastSent uint64
	lastAt   time.Time
}

// forwarders are the running forwarders, a Reloadable part.
type forwarders struct {
	cfg    *config.Config // the config Start runs
	db     *store.DB
	ctx    context.Context
	tab    *tag.Table
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.RWMutex // guards list; a reload holds it to swap forwarders
	list []*forwarder
}

// forwardSysTags are the system tags of each forwarder,
// pith.sys.forward.<name>.<suffix>, in the order of forwarder.ids.
var forwardSysTags = []struct{ suffix, unit, help string }{
	{"backlog", "records", "store log records not yet confirmed by the upstream (the follower's lag)"},
	{"sent_per_s", "points/s", "values confirmed by the upstream per second"},
	{"oldest_s", "s", "age of the oldest value of the batch being sent"},
	{"errors", "count", "failed sends since start (each is retried)"},
	{"dropped", "points", "values never sent: released by the store's follower budget, max_bytes or max_age, or refused by the upstream"},
}

var _ Reloadable = (*forwarders)(nil)

func newForwarders(cfg *config.Config, db *store.DB, tab *tag.Table, log *slog.Logger) *forwarders {
	return &forwarders{cfg: cfg, db: db, tab: tab, log: log}
}

func (fw *forwarders) Name() string { return "forwarders" }

// Start opens a store follower "forward.<name>" per [[forward.*]] entry
// and forwards what the store commits: acquired, pushed and imported
// values, deletes, and system tags (the forwarders' own included: they
// change once a second per forwarder, which is no feedback loop, and let a
// central Pith watch its edges' backlogs). A follower left by a forwarder
// no longer configured is removed, releasing the WAL it held. The
// forwarders' system tags are written every second. An upstream that
// cannot be reached at start is retried: what is not confirmed waits in
// the store's WAL.
func (fw *forwarders) Start(ctx context.Context) error {
	fw.ctx, fw.cancel = context.WithCancel(ctx)
	entries := forwardEntries(fw.cfg)
	fw.unfollowStale(entries)
	for _, e := range entries {
		// At start a new follower takes what the WAL holds, which is what
		// this process stored so far (the store checkpoints and releases
		// the WAL at close): nothing acquired before the forwarders
		// started is missed.
		f, err := fw.open(fw.cfg, e, store.FollowFromOldest)
		if err != nil {
			fw.Stop()
			return err
		}
		fw.run(f)
		fw.list = append(fw.list, f)
	}
	fw.wg.Add(1)
	go func() {
		defer fw.wg.Done()
		fw.writeStats(fw.ctx, fw.tab)
	}()
	return nil
}

// unfollowStale removes the followers of forwarders not in entries.
func (fw *forwarders) unfollowStale(entries []forwardEntry) {
	want := map[string]bool{}
	for _, e := range entries {
		want[followerPrefix+e.name] = true
	}
	for _, st := range fw.db.Followers() {
		if !strings.HasPrefix(st.Name, followerPrefix) || want[st.Name] || st.Open {
			continue
		}
		if err := fw.db.Unfollow(st.Name); err != nil {
			fw.log.Warn("remove follower of a removed forwarder", "follower", st.Name, "err", err)
			continue
		}
		fw.log.Info("forwarder no longer configured; released its store log", "follower", st.Name, "unsent_records", st.LagRecords)
	}
}

// forwardEntry is one [[forward.*]] entry of any kind.
type forwardEntry struct {
	name, kind string
	entry      any
	limits     config.ForwardQueue
	open       openSink
}

func forwardEntries(cfg *config.Config) []forwardEntry {
	var out []forwardEntry
	site := cfg.Site.Name
	for _, c := range cfg.Forward.NATS {
		out = append(out, forwardEntry{c.Name, "nats", c, c.ForwardQueue, natsSink(c, site)})
	}
	for _, c := range cfg.Forward.Postgres {
		out = append(out, forwardEntry{c.Name, "postgres", c, c.ForwardQueue, postgresSink(c, site)})
	}
	for _, c := range cfg.Forward.MQTT {
		out = append(out, forwardEntry{c.Name, "mqtt", c, c.ForwardQueue, mqttSink(c, site, cfg.Redundancy.Node)})
	}
	for _, c := range cfg.Forward.HTTP {
		out = append(out, forwardEntry{c.Name, "http", c, c.ForwardQueue, httpSink(c, site)})
	}
	if r := cfg.Redundancy; r.Enabled() {
		out = append(out, forwardEntry{redundancyForward, "nats", r, config.ForwardQueue{}, redundancySink(r, site)})
	}
	return out
}

// open makes one forwarder: its sink and its follower (a new one starting
// at start). Nothing runs until run.
func (fw *forwarders) open(cfg *config.Config, e forwardEntry, start store.FollowStart) (*forwarder, error) {
	sk, err := openSinkOf(e, fw.log)
	if err != nil {
		return nil, err
	}
	f, err := fw.follow(cfg, e, sk, start)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// sinkOf is an opened sink with how to close it and, for the logs, where
// it sends.
type sinkOf struct {
	sink  forward.Sink
	close func()
	desc  string
}

func openSinkOf(e forwardEntry, log *slog.Logger) (sinkOf, error) {
	sink, closeSink, desc, err := e.open(log.With("forward", e.name))
	if err != nil {
		return sinkOf{}, fmt.Errorf("forward %s: %w", e.name, err)
	}
	return sinkOf{sink, closeSink, desc}, nil
}

// forwardOptions maps e's limits onto the forwarder's options.
func forwardOptions(cfg *config.Config, e forwardEntry) forward.Options {
	o := forward.DefaultOptions()
	o.Site = cfg.Site.Name
	if cfg.Redundancy.Enabled() {
		// Both boxes of a pair forward as one site: their entry ids name
		// the box too, or the same WAL position of each would collide.
		o.Site += "." + cfg.Redundancy.Node
	}
	o.MaxBytes = e.limits.MaxBytes
	o.MaxAge = e.limits.MaxAge.Std()
	o.PoisonDir = filepath.Join(cfg.Store.Dir, "forward", e.name, "poison")
	return o
}

// follow opens e's store follower (created, starting at start, when new;
// an existing one resumes at its cursor) and defines its system tags. On
// error sk is closed.
func (fw *forwarders) follow(cfg *config.Config, e forwardEntry, sk sinkOf, start store.FollowStart) (*forwarder, error) {
	flog := fw.log.With("forward", e.name)
	fo, err := fw.db.Follow(followerPrefix+e.name, store.FollowOptions{Start: start})
	if err != nil {
		sk.close()
		return nil, fmt.Errorf("forward %s: %w", e.name, err)
	}
	o := forwardOptions(cfg, e)
	fwd, err := forward.NewForwarder(fo, sk.sink, o, flog)
	if err != nil {
		fo.Close()
		sk.close()
		return nil, fmt.Errorf("forward %s: %w", e.name, err)
	}
	f := &forwarder{name: e.name, kind: e.kind, entry: e.entry, fo: fo, fwd: fwd, sink: sk, done: make(chan struct{})}
	for _, st := range forwardSysTags {
		id, err := fw.tab.Define(tag.Def{Name: "pith.sys.forward." + e.name + "." + st.suffix, Unit: st.unit, Description: st.help, Source: "pith"})
		if err != nil {
			fo.Close()
			sk.close()
			return nil, fmt.Errorf("forward %s: %w", e.name, err)
		}
		f.ids = append(f.ids, id)
	}
	flog.Info("forwarding", "kind", e.kind, "to", sk.desc, "follower", followerPrefix+e.name, "max_bytes", o.MaxBytes, "max_age", o.MaxAge)
	if _, err := os.Stat(filepath.Join(cfg.Store.Dir, "forward", e.name, "wal")); err == nil {
		// Forwarders kept queues of their own before they followed the
		// store's log; what such a queue still holds is not sent.
		flog.Warn("found the queue of an earlier version; its unsent values are not forwarded (remove the directory)", "dir", filepath.Join(cfg.Store.Dir, "forward", e.name, "wal"))
	}
	return f, nil
}

// run starts f's forwarding loop.
func (fw *forwarders) run(f *forwarder) {
	var fctx context.Context
	fctx, f.cancel = context.WithCancel(fw.ctx)
	go func() {
		defer close(f.done)
		f.fwd.Run(fctx)
	}()
}

// closeOne stops f's loop, detaches its follower (its cursor stays) and
// closes its sink. With unfollow the follower is removed as well,
// releasing the WAL it held.
func (fw *forwarders) closeOne(f *forwarder, unfollow bool) {
	if f.cancel != nil {
		f.cancel()
		<-f.done
	}
	if err := f.fo.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
		fw.log.Warn("close forward follower", "forward", f.name, "err", err)
	}
	f.sink.close()
	if unfollow {
		if err := fw.db.Unfollow(followerPrefix + f.name); err != nil {
			fw.log.Warn("remove forward follower", "forward", f.name, "err", err)
		}
	}
}

// writeStats writes every forwarder's system tags each second.
func (fw *forwarders) writeStats(ctx context.Context, tab *tag.Table) {
	t := clock.NewAligned(forwardStatsInterval)
	defer t.Stop()
	var batch []tag.Sample
	lags := map[string]store.FollowerStats{}
	var nextLag time.Time
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			t.Next()
			if !now.Before(nextLag) {
				start := time.Now()
				clear(lags)
				for _, st := range fw.db.Followers() {
					lags[st.Name] = st
				}
				nextLag = now.Add(forwardLagCost * time.Since(start))
			}
			batch = batch[:0]
			ms := now.UnixMilli()
			fw.mu.RLock()
			for _, f := range fw.list {
				lag := lags[followerPrefix+f.name]
				f.fwd.SetLag(lag.LagBytes)
				batch = append(batch, f.stats(now, lag)...)
				for i := range batch[len(batch)-len(f.ids):] {
					s := &batch[len(batch)-len(f.ids)+i]
					s.ID, s.T, s.Q = f.ids[i], ms, model.QualityGood
					// Current every second, archived every tenth (as
					// the other system tags): the figures move with the
					// forwarders' own archived writes.
					s.NoArchive = n%forwardArchiveEvery != 0
				}
			}
			fw.mu.RUnlock()
			if len(batch) > 0 {
				tab.Update(batch)
			}
		}
	}
}

// stats returns f's system tag values in forwardSysTags order (IDs and
// times unset). Only the stats loop calls it.
func (f *forwarder) stats(now time.Time, lag store.FollowerStats) []tag.Sample {
	st := f.fwd.Stats()
	var rate, oldest float64
	if !f.lastAt.IsZero() {
		if dt := now.Sub(f.lastAt).Seconds(); dt > 0 {
			rate = float64(st.Sent-f.lastSent) / dt
		}
	}
	f.lastSent, f.lastAt = st.Sent, now
	if st.OldestMs != 0 {
		oldest = max(0, float64(now.UnixMilli()-st.OldestMs)/1000)
	}
	backlog := float64(lag.LagRecords)
	if !st.WaitingSince.IsZero() && now.Sub(st.WaitingSince) > forwardIdle {
		// Everything read is sent; what the lag still counts are records
		// without entries (see forward.Stats.WaitingSince), or records
		// committed since the lag was read.
		backlog = 0
	}
	dropped := float64(st.Dropped) + float64(lag.Dropped.Points)
	return []tag.Sample{
		{V: backlog},
		{V: rate},
		{V: oldest},
		{V: float64(st.Errors)},
		{V: dropped},
	}
}

// Stop ends the forwarding loops, detaches the followers and closes the
// sinks, in reverse start order. It does not wait for the upstreams: what
// is not confirmed stays in the store's WAL and is sent after the next
// start.
func (fw *forwarders) Stop() {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	for i := len(fw.list) - 1; i >= 0; i-- {
		fw.closeOne(fw.list[i], false)
	}
	fw.list = nil
	fw.cancel()
	fw.wg.Wait()
}
