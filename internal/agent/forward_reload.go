package agent

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/store"
)

// forwardConnectTimeout bounds how long a reload waits for a new
// forwarder's upstream to answer.
const forwardConnectTimeout = 10 * time.Second

// connector is a sink that can reach its upstream on demand;
// *forward.PostgresSink implements it. A reload connects a new or changed
// forwarder's sink before anything of the new config runs. Connect may be
// called from any goroutine.
type connector interface {
	Connect(ctx context.Context) error
}

var _ connector = (*forward.PostgresSink)(nil)

// forwardPlan is a forwarder a reload starts or restarts.
type forwardPlan struct {
	e    forwardEntry
	old  *forwarder // the running forwarder it replaces; nil for a new one
	sink sinkOf
	f    *forwarder // a new forwarder, its follower open but not running; nil for a changed one
}

// forwardChange is a prepared reload of the forwarders.
type forwardChange struct {
	fw      *forwarders
	cfg     *config.Config
	order   []string               // cfg's forwarders, in order
	keep    map[string]*forwarder  // unchanged: keep running
	plans   map[string]forwardPlan // new or changed
	removed []*forwarder
}

// Prepare opens the sinks of cfg's new and changed forwarders, connects
// those that can reach their upstream on demand, and opens the followers
// of the new ones (a changed forwarder keeps the running one's follower,
// reopened at Commit at its cursor). Nothing of them runs yet and the
// running forwarders are untouched; on error what was opened is closed.
func (fw *forwarders) Prepare(cfg *config.Config) (Change, error) {
	fw.mu.RLock()
	old := make(map[string]*forwarder, len(fw.list))
	for _, f := range fw.list {
		old[f.name] = f
	}
	fw.mu.RUnlock()
	c := &forwardChange{fw: fw, cfg: cfg, keep: map[string]*forwarder{}, plans: map[string]forwardPlan{}}
	for _, e := range forwardEntries(cfg) {
		c.order = append(c.order, e.name)
		f := old[e.name]
		delete(old, e.name)
		if f != nil && f.kind == e.kind && reflect.DeepEqual(f.entry, e.entry) {
			c.keep[e.name] = f
			continue
		}
		pl, err := fw.plan(cfg, e, f)
		if err != nil {
			c.Abort()
			return nil, err
		}
		c.plans[e.name] = pl
	}
	for _, f := range old {
		c.removed = append(c.removed, f)
	}
	return c, nil
}

// plan opens what a new or changed forwarder needs before Commit.
func (fw *forwarders) plan(cfg *config.Config, e forwardEntry, old *forwarder) (forwardPlan, error) {
	pl := forwardPlan{e: e, old: old}
	var err error
	if pl.sink, err = openSinkOf(e, fw.log); err != nil {
		return pl, err
	}
	if cn, ok := pl.sink.sink.(connector); ok {
		ctx, cancel := context.WithTimeout(fw.ctx, forwardConnectTimeout)
		err := cn.Connect(ctx)
		cancel()
		if err != nil {
			pl.sink.close()
			return pl, fmt.Errorf("forward %s: %w", e.name, err)
		}
	}
	if old == nil {
		// A forwarder added by a reload forwards what is committed from
		// now on.
		if pl.f, err = fw.follow(cfg, e, pl.sink, store.FollowFromEnd); err != nil {
			return pl, err
		}
	}
	return pl, nil
}

// Commit makes the prepared forwarders the running ones: unchanged ones
// keep running, changed ones restart on the same follower (resuming at
// its cursor: nothing unconfirmed is skipped), removed ones stop and
// their followers are removed (releasing the WAL they held), new ones
// start.
func (c *forwardChange) Commit() {
	fw := c.fw
	fw.mu.Lock()
	defer fw.mu.Unlock()
	var next []*forwarder
	for _, name := range c.order {
		if f := c.keep[name]; f != nil {
			next = append(next, f)
			continue
		}
		pl := c.plans[name]
		if pl.f != nil {
			fw.run(pl.f)
			next = append(next, pl.f)
			continue
		}
		fw.closeOne(pl.old, false)
		fw.log.Info("forwarder changed, restarting", "forward", name)
		// The follower was open a moment ago; only a disk failure makes
		// opening it again fail. Its cursor stays, so a later start
		// resumes there.
		f, err := fw.follow(c.cfg, pl.e, pl.sink, store.FollowFromEnd)
		if err != nil {
			fw.log.Error("restart changed forwarder; it stays stopped", "forward", name, "err", err)
			continue
		}
		fw.run(f)
		next = append(next, f)
	}
	for _, f := range c.removed {
		fw.closeOne(f, true)
		fw.log.Info("forwarder removed; its store follower is removed", "forward", f.name)
	}
	fw.list = next
	fw.cfg = c.cfg
}

// Abort closes what Prepare opened, removing the followers it created;
// the running forwarders are untouched.
func (c *forwardChange) Abort() {
	for _, pl := range c.plans {
		if pl.f != nil {
			c.fw.closeOne(pl.f, true)
			continue
		}
		pl.sink.close()
	}
	c.plans = nil
}
