// Package redundancy runs the lease that makes one Pith of a hot-standby
// pair the active one. The lease is a key of a JetStream key-value bucket
// whose TTL is the lease TTL: a box acquires it by creating the key (which
// fails while it exists), renews it by updating it at the revision it last
// wrote (which fails once another box holds it), and loses it when it
// cannot renew. NATS does the consensus; this package only keeps time.
//
// Fencing: the active box counts its lease from the moment it sent the
// write that created or renewed the key, and stops acting (Active turns
// false) FenceShare of the TTL later unless a renewal succeeded. The server
// keeps the key for the TTL from the moment it stored the write, which is
// later, so the other box can acquire the key only after this one stopped
// acting: the two never both act, whatever the network does, as long as
// their clocks run at about the same rate (a quarter of the TTL is the
// margin). docs/redundancy.md explains the timing.
package redundancy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Timing of the lease, as shares of the TTL.
const (
	// RenewShare: the active renews, and the standby looks at the lease,
	// every TTL/RenewShare.
	RenewShare = 4
	// FenceNum/FenceDen of the TTL after the renewal was sent, the active
	// stops acting unless a later renewal succeeded.
	FenceNum, FenceDen = 3, 4
	// HoldoffShares: a box that lost or gave up the lease does not try to
	// take it again for HoldoffShares TTLs, so that a flapping link cannot
	// make the lease bounce between the boxes (hysteresis).
	HoldoffShares = 2
	// leaderKey is the lease's key; node.<name> keys say a box is alive.
	leaderKey   = "leader"
	nodeKey     = "node."
	releasedKey = "released" // published after a release: the other box looks at once
)

// Role is what a box of the pair does.
type Role int32

const (
	// Standby mirrors the active box and acts on nothing.
	Standby Role = iota
	// Active holds the lease: it polls, writes to devices, runs automation.
	Active
)

func (r Role) String() string {
	if r == Active {
		return "active"
	}
	return "standby"
}

// Options configure an Elector.
type Options struct {
	URL   string        // NATS servers, comma separated
	Group string        // the pair's name: the bucket is pith_redundancy_<Group>
	Node  string        // this box's name in the pair
	TTL   time.Duration // the lease TTL
	// HTTP is where clients reach this box (http(s)://host:port), told
	// to the other box with each alive message; "" when unknown.
	HTTP string
	// Eligible says whether this box may take the lease now (it has
	// caught up with the stream). Nil: always. Called from the elector's
	// goroutine.
	Eligible func() bool
	// OnRole is called, from the elector's goroutine, each time the role
	// changes. Active() changes before it is called (a lost lease is
	// fenced at once, before OnRole(Standby) runs).
	OnRole func(Role)
	Log    *slog.Logger
}

// Status is what the elector knows, for system tags and answers.
type Status struct {
	Role   Role
	Holder string // the box holding the lease, "" when none is known
	// LeaseLeft is how long this box may still act unless it renews
	// (zero on a standby).
	LeaseLeft time.Duration
	// PeerSeen is when another box of the group last said it is alive;
	// zero when never.
	PeerSeen time.Time
	Peer     string // that box's name
	PeerURL  string // where clients reach that box, "" when it did not say
}

// alive is the message of a box's alive key.
type alive struct {
	Role string `json:"role"`
	URL  string `json:"url,omitempty"`
}

// Elector runs the lease of one box. Build it with New, then Run it.
type Elector struct {
	opts Options
	log  *slog.Logger
	base time.Time // monotonic origin of fence
	// fence is the monotonic time (since base, ns) until which this box
	// may act; 0 when it may not.
	fence atomic.Int64
	step  chan chan struct{}
	kick  chan struct{} // the other box released the lease

	mu      sync.Mutex
	role    Role
	holder  string
	peer    string
	peerURL string
	seen    time.Time
}

// New returns an elector; nothing runs until Run.
func New(opts Options) (*Elector, error) {
	if opts.Group == "" || opts.Node == "" || opts.TTL <= 0 {
		return nil, errors.New("redundancy: group, node and TTL are required")
	}
	if strings.ContainsAny(opts.Node, ".*> ") {
		return nil, fmt.Errorf("redundancy: node name %q has '.', '*', '>' or a space", opts.Node)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	return &Elector{opts: opts, log: opts.Log, base: time.Now(), step: make(chan chan struct{}), kick: make(chan struct{}, 1)}, nil
}

// Bucket returns the name of the pair's stream, which holds the lease.
func Bucket(group string) string { return "PITH_REDUNDANCY_" + group }

// Active reports whether this box may act now: it holds the lease and its
// fence deadline has not passed. Every device write asks it first. Safe
// for concurrent use.
func (e *Elector) Active() bool {
	f := e.fence.Load()
	return f != 0 && int64(time.Since(e.base)) < f
}

// Deadline returns when this box stops acting unless it renews its lease
// (a monotonic time), zero when it may not act now. A device write runs
// under a context with this deadline, so that a write held up past it
// (a process stopped between the check and the write) is not sent. Safe
// for concurrent use.
func (e *Elector) Deadline() time.Time {
	f := e.fence.Load()
	if f == 0 || int64(time.Since(e.base)) >= f {
		return time.Time{}
	}
	return e.base.Add(time.Duration(f))
}

// Status returns what the elector knows. Safe for concurrent use.
func (e *Elector) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := Status{Role: e.role, Holder: e.holder, PeerSeen: e.seen, Peer: e.peer, PeerURL: e.peerURL}
	if f := e.fence.Load(); f != 0 && e.role == Active {
		st.LeaseLeft = max(0, time.Duration(f-int64(time.Since(e.base))))
	}
	return st
}

// StepDown makes an active box give the lease up (the other box takes it
// at its next look) and hold off for HoldoffShares TTLs. It returns once
// the lease is released or ctx ends; on a standby it does nothing.
func (e *Elector) StepDown(ctx context.Context) error {
	done := make(chan struct{})
	select {
	case e.step <- done:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run connects to NATS, creates the stream when missing and runs the
// lease until ctx ends; the box starts as standby. An unreachable server
// is retried; Run returns when ctx ends (releasing the lease it holds).
func (e *Elector) Run(ctx context.Context) error {
	ttl := e.opts.TTL
	nc, err := nats.Connect(e.opts.URL, nats.Name("pith-redundancy-"+e.opts.Node), nats.MaxReconnects(-1),
		nats.ReconnectWait(ttl/RenewShare), nats.Timeout(ttl), nats.RetryOnFailedConnect(true),
		nats.PingInterval(ttl), nats.MaxPingsOutstanding(2))
	if err != nil {
		return fmt.Errorf("connect to nats %s: %w", e.opts.URL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("open jetstream: %w", err)
	}
	b := newBucket(nc, e.opts.Group)
	for {
		c, cancel := context.WithTimeout(ctx, 2*ttl)
		err = b.ensure(c, js, ttl, min(3, len(strings.Split(e.opts.URL, ","))))
		cancel()
		if err == nil {
			break
		}
		e.log.Warn("open redundancy stream; retrying", "stream", b.stream, "err", err)
		if sleep(ctx, ttl) != nil {
			return nil
		}
	}
	// The other box's alive messages, as they are published.
	sub, err := nc.Subscribe(b.prefix+nodeKey+"*", func(m *nats.Msg) {
		if name := b.nodeName(m.Subject); name != "" && name != e.opts.Node {
			var a alive
			_ = json.Unmarshal(m.Data, &a) // an older box sends its role only
			e.mu.Lock()
			e.seen, e.peer, e.peerURL = time.Now(), name, a.URL
			e.mu.Unlock()
		}
	})
	if err == nil {
		defer sub.Unsubscribe()
	}
	rel, err := nc.Subscribe(b.prefix+releasedKey, func(m *nats.Msg) {
		if string(m.Data) != e.opts.Node {
			select {
			case e.kick <- struct{}{}:
			default:
			}
		}
	})
	if err == nil {
		defer rel.Unsubscribe()
	}
	tick := time.NewTicker(ttl / RenewShare)
	defer tick.Stop()
	var rev uint64        // revision of our lease while active
	var holdoff time.Time // no campaign before
	var lastAlive time.Time
	var lastRead, grace time.Time // the last answered look at the lease; no campaign before grace
	for {
		now := time.Now()
		if now.Sub(lastAlive) >= ttl/2 {
			// Say this box is alive, for the other box's peer_seen_ms.
			c, cancel := e.op(ctx)
			msg, _ := json.Marshal(alive{Role: e.role.String(), URL: e.opts.HTTP})
			if _, err := b.put(c, nodeKey+e.opts.Node, msg, -1); err == nil {
				lastAlive = now
			}
			cancel()
		}
		if e.role == Active {
			start := time.Since(e.base)
			c, cancel := e.op(ctx)
			r, err := b.put(c, leaderKey, []byte(e.opts.Node), int64(rev))
			cancel()
			switch {
			case err == nil && !e.Active():
				// Renewed, but too late: this box stopped acting at its
				// fence deadline (and its stations are stopping). Once
				// fenced a box stands by; give the lease to the other.
				e.log.Warn("lease renewed after the fence deadline; releasing it")
				e.release(b, r)
				holdoff = now.Add(HoldoffShares * ttl)
			case err == nil:
				rev = r
				e.fence.Store(int64(start + ttl*FenceNum/FenceDen))
			case errors.Is(err, errWrongRev):
				e.log.Warn("lease lost (expired or taken); standing by", "err", err)
				e.demote()
				holdoff = now.Add(HoldoffShares * ttl)
			default:
				if !e.Active() {
					// NATS did not answer in time (a server or the
					// stream's leader restarting): stand by, but try to
					// take the lease again at once, ahead of the other box
					// (which waits when it could not read either).
					e.log.Warn("lease not renewed in time; fenced, standing by", "err", err)
					e.demote()
				} else {
					e.log.Warn("renew lease", "err", err)
				}
			}
		} else {
			c, cancel := e.op(ctx)
			val, _, err := b.get(c, leaderKey)
			cancel()
			if err == nil || errors.Is(err, errNotFound) {
				if !lastRead.IsZero() && now.Sub(lastRead) > ttl {
					// NATS was out of reach for this box too: the lease
					// may have expired for want of NATS, not of the active
					// box, which gets half a TTL to take it back.
					grace = now.Add(ttl / 2)
				}
				lastRead = now
			}
			switch {
			case err == nil:
				e.mu.Lock()
				e.holder = string(val)
				e.mu.Unlock()
			case errors.Is(err, errNotFound):
				e.mu.Lock()
				e.holder = ""
				e.mu.Unlock()
				if now.After(holdoff) && now.After(grace) && (e.opts.Eligible == nil || e.opts.Eligible()) {
					start := time.Since(e.base)
					c, cancel := e.op(ctx)
					r, err := b.put(c, leaderKey, []byte(e.opts.Node), 0)
					cancel()
					if err == nil {
						rev = r
						e.fence.Store(int64(start + ttl*FenceNum/FenceDen))
						e.mu.Lock()
						e.role, e.holder = Active, e.opts.Node
						e.mu.Unlock()
						e.log.Info("lease acquired; active", "node", e.opts.Node, "revision", r)
						if e.opts.OnRole != nil {
							e.opts.OnRole(Active)
						}
					} else if !errors.Is(err, errWrongRev) {
						e.log.Warn("acquire lease", "err", err)
					}
				}
			default:
				e.log.Debug("read lease", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			if e.role == Active {
				e.release(b, rev)
			}
			return nil
		case done := <-e.step:
			if e.role == Active {
				e.release(b, rev)
				holdoff = time.Now().Add(HoldoffShares * ttl)
			}
			close(done)
		case <-e.kick:
		case <-tick.C:
		}
	}
}

// release fences this box at once, deletes the lease at its revision so
// the other box may take it without waiting for the TTL, and demotes.
func (e *Elector) release(b *bucket, rev uint64) {
	e.fence.Store(0)
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.TTL/RenewShare)
	defer cancel()
	if err := b.del(ctx, rev); err != nil {
		e.log.Warn("release lease; it expires on its own", "err", err)
	} else {
		_ = b.nc.Publish(b.prefix+releasedKey, []byte(e.opts.Node))
		_ = b.nc.FlushTimeout(e.opts.TTL / RenewShare)
	}
	e.log.Info("lease released; standing by")
	e.demote()
}

// demote makes this box a standby (fenced first) and tells OnRole.
func (e *Elector) demote() {
	e.fence.Store(0)
	e.mu.Lock()
	e.role, e.holder = Standby, ""
	e.mu.Unlock()
	if e.opts.OnRole != nil {
		e.opts.OnRole(Standby)
	}
}

// op returns a context for one bucket operation: at most one tick long.
func (e *Elector) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.opts.TTL/RenewShare)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
