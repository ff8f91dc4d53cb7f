package agent

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/tag"
)

// forwardStatsInterval is how often the forwarders' system tags are written.
const forwardStatsInterval = time.Second

// forwarder is one [[forward.*]] entry: a disk-backed queue feeding a sink.
type forwarder struct {
	name   string
	kind   string
	entry  any // the config entry, to tell a changed forwarder at reload
	q      *forward.Queue
	close  func() // closes the sink once the queue is closed
	sub    *tag.Subscription
	ids    []tag.ID // system tags, in forwardSysTags order
	cancel context.CancelFunc
	done   chan struct{} // closed when the feed has moved its last changes
}

// forwarders are the running forwarders, a Reloadable part.
type forwarders struct {
	cfg    *config.Config // the config Start runs
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
	{"backlog", "points", "values queued and not yet confirmed by the upstream"},
	{"sent_per_s", "points/s", "values confirmed by the upstream per second"},
	{"oldest_s", "s", "age of the oldest unconfirmed value"},
	{"errors", "count", "failed sends since start (each is retried)"},
	{"dropped", "points", "values lost since start: queue caps, reject_new, or a full tag-table feed"},
}

var _ Reloadable = (*forwarders)(nil)

func newForwarders(cfg *config.Config, tab *tag.Table, log *slog.Logger) *forwarders {
	return &forwarders{cfg: cfg, tab: tab, log: log}
}

func (fw *forwarders) Name() string { return "forwarders" }

// Start opens a disk-backed queue per [[forward.*]] entry under
// <store.dir>/forward/<name>, fed with every sample the tag table stores:
// acquired, pushed and imported values, and system tags (the forwarders'
// own included: they change once a second per forwarder, which is no
// feedback loop, and let a central Pith watch its edges' backlogs). The
// forwarders' system tags are
// written every second. An upstream that cannot be reached at start is
// retried by its queue: what is queued waits on disk.
func (fw *forwarders) Start(ctx context.Context) error {
	fw.ctx, fw.cancel = context.WithCancel(ctx)
	for _, e := range forwardEntries(fw.cfg) {
		f, err := fw.open(fw.cfg, e, nil)
		if err != nil {
			fw.Stop()
			return err
		}
		fw.list = append(fw.list, f)
	}
	fw.wg.Add(1)
	go func() {
		defer fw.wg.Done()
		fw.writeStats(fw.ctx, fw.tab)
	}()
	return nil
}

// forwardEntry is one [[forward.*]] entry of any kind.
type forwardEntry struct {
	name, kind string
	entry      any
	queue      config.ForwardQueue
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
		out = append(out, forwardEntry{c.Name, "mqtt", c, c.ForwardQueue, mqttSink(c, site)})
	}
	for _, c := range cfg.Forward.HTTP {
		out = append(out, forwardEntry{c.Name, "http", c, c.ForwardQueue, httpSink(c, site)})
	}
	return out
}

// open starts one forwarder: its sink, its queue and the feed from the
// tag table.
func (fw *forwarders) open(cfg *config.Config, e forwardEntry, sub *tag.Subscription) (*forwarder, error) {
	sk, err := openSinkOf(e, fw.log)
	if err != nil {
		return nil, err
	}
	qo, err := queueOptions(cfg, e)
	if err != nil {
		sk.close()
		return nil, err
	}
	f, err := fw.openQueue(cfg, e, qo, sk)
	if err != nil {
		return nil, err
	}
	fw.run(f, sub)
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

// queueOptions maps e's queue settings onto the queue's options.
func queueOptions(cfg *config.Config, e forwardEntry) (forward.Options, error) {
	qo := forward.DefaultOptions()
	qo.Site = cfg.Site.Name
	if e.queue.MaxBytes > 0 { // 0 keeps the queue's default
		qo.MaxBytes = e.queue.MaxBytes
	}
	if e.queue.MaxAge > 0 {
		qo.MaxAge = e.queue.MaxAge.Std()
	}
	var err error
	if qo.Overflow, err = forward.ParseOverflow(e.queue.Overflow); err != nil {
		return qo, fmt.Errorf("forward %s: %w", e.name, err)
	}
	return qo, nil
}

// openQueue opens e's queue on sk and defines its system tags; nothing
// feeds it until run. On error sk is closed.
func (fw *forwarders) openQueue(cfg *config.Config, e forwardEntry, qo forward.Options, sk sinkOf) (*forwarder, error) {
	flog := fw.log.With("forward", e.name)
	q, err := forward.Open(filepath.Join(cfg.Store.Dir, "forward", e.name), qo, sk.sink, flog)
	if err != nil {
		sk.close()
		return nil, fmt.Errorf("forward %s: %w", e.name, err)
	}
	f := &forwarder{name: e.name, kind: e.kind, entry: e.entry, q: q, close: sk.close, done: make(chan struct{})}
	for _, st := range forwardSysTags {
		id, err := fw.tab.Define(tag.Def{Name: "pith.sys.forward." + e.name + "." + st.suffix, Unit: st.unit, Description: st.help, Source: "pith"})
		if err != nil {
			q.Close()
			sk.close()
			return nil, fmt.Errorf("forward %s: %w", e.name, err)
		}
		f.ids = append(f.ids, id)
	}
	flog.Info("forwarding", "kind", e.kind, "to", sk.desc, "max_bytes", qo.MaxBytes, "max_age", qo.MaxAge, "overflow", qo.Overflow)
	return f, nil
}

// run starts feeding f from the tag table through sub (a new
// subscription when nil).
func (fw *forwarders) run(f *forwarder, sub *tag.Subscription) {
	f.sub = sub
	if f.sub == nil {
		f.sub = fw.tab.Subscribe(tag.SubOptions{Name: "forward:" + f.name, Mode: tag.Every})
	}
	var fctx context.Context
	fctx, f.cancel = context.WithCancel(fw.ctx)
	go func() {
		defer close(f.done)
		fw.feed(fctx, f)
	}()
}

// close stops f's feed (moving the changes still pending into its queue),
// then closes the queue and the sink. keepSub leaves the subscription to a
// successor, which then misses no change.
func (fw *forwarders) closeOne(f *forwarder, keepSub bool) {
	f.cancel()
	<-f.done
	if !keepSub {
		fw.tab.Unsubscribe(f.sub)
	}
	if err := f.q.Close(); err != nil {
		fw.log.Warn("close forward queue", "forward", f.name, "err", err)
	}
	f.close()
}

// feed moves every sample the tag table stores (acquired, pushed,
// imported; tag.Every) into f's queue until ctx ends, then moves what is
// still pending, so that a graceful stop forwards every value stored
// before it.
func (fw *forwarders) feed(ctx context.Context, f *forwarder) {
	var buf []tag.Change
	var pts []model.Point
	for {
		chs, err := f.sub.Next(ctx, buf[:0])
		if err != nil {
			chs = f.sub.Take(buf[:0])
			ctx = context.WithoutCancel(ctx)
		}
		buf = chs
		pts = pts[:0]
		for _, c := range chs {
			if c.Has {
				pts = append(pts, model.Point{Tag: c.Tag, T: c.T, V: c.V, Q: c.Q})
			}
		}
		if len(pts) > 0 {
			if err := f.q.Enqueue(ctx, pts); err != nil {
				fw.log.Warn("forward queue refused values", "forward", f.name, "points", len(pts), "err", err)
			}
		}
		if err != nil {
			return
		}
	}
}

// writeStats writes every forwarder's system tags each second.
func (fw *forwarders) writeStats(ctx context.Context, tab *tag.Table) {
	t := time.NewTicker(forwardStatsInterval)
	defer t.Stop()
	var batch []tag.Sample
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			batch = batch[:0]
			ms := now.UnixMilli()
			fw.mu.RLock()
			for _, f := range fw.list {
				st := f.q.Stats()
				lost := st.Dropped + st.Rejected + f.sub.Stats().Overflow
				for i, v := range []float64{float64(st.Backlog), st.SentPerS, st.OldestS, float64(st.Errors), float64(lost)} {
					batch = append(batch, tag.Sample{ID: f.ids[i], T: ms, V: v, Q: model.QualityGood})
				}
			}
			fw.mu.RUnlock()
			if len(batch) > 0 {
				tab.Update(batch)
			}
		}
	}
}

// Stop ends the feeds and closes the queues, then the sinks, in reverse
// start order. The changes still pending move into the queues, but Stop
// does not wait for the upstreams: what is queued is on disk and is sent
// after the next start.
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
