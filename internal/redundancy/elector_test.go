package redundancy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pith-historian/pith/internal/testpeer"
)

// box is one elector under test, reaching NATS through its own proxy.
type box struct {
	e      *Elector
	px     *testpeer.Proxy
	cancel context.CancelFunc
	done   chan struct{}
	roles  atomic.Int32 // role changes seen
}

func startBox(t *testing.T, url, group, node string, ttl time.Duration) *box {
	t.Helper()
	b := &box{px: testpeer.NewProxy(t, strings.TrimPrefix(url, "nats://")), done: make(chan struct{})}
	t.Cleanup(func() { dropStream(url, Bucket(group)) })
	e, err := New(Options{URL: b.px.URL(), Group: group, Node: node, TTL: ttl, HTTP: "http://" + node + ".example:8080", OnRole: func(Role) { b.roles.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	b.e = e
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() { defer close(b.done); e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-b.done })
	return b
}

// watch samples both boxes every millisecond until stop and fails the
// test when both act at once; it returns when each became active last.
func watch(t *testing.T, a, b *box, stop <-chan struct{}) (both *atomic.Int64) {
	both = &atomic.Int64{}
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if a.e.Active() && b.e.Active() {
				both.Add(1)
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return both
}

func waitActive(t *testing.T, boxes []*box, within time.Duration) *box {
	t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		for _, b := range boxes {
			if b.e.Active() {
				return b
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no box active within %s", within)
	return nil
}

// TestElectorSplits runs two boxes against a real NATS server, each through
// a proxy the test stalls (a network split) at random: at no sampled
// moment do both act, the other box takes over within the TTL plus two
// ticks of a split, and a healed box does not take the lease back
// (hysteresis: one takeover per split, no storm).
func TestElectorSplits(t *testing.T) {
	url := testpeer.Env(t, "PITH_TEST_NATS", "nats://127.0.0.1:4222")
	ttl := time.Second
	group := fmt.Sprintf("redundancy_test_%d", time.Now().UnixNano())
	a := startBox(t, url, group, "a", ttl)
	b := startBox(t, url, group, "b", ttl)
	stop := make(chan struct{})
	defer close(stop)
	both := watch(t, a, b, stop)
	act := waitActive(t, []*box{a, b}, 5*ttl)
	rounds := 4
	for i := range rounds {
		other := a
		if act == a {
			other = b
		}
		before := other.roles.Load()
		act.px.Cut()
		cut := time.Now()
		for !other.e.Active() {
			if time.Since(cut) > 3*ttl {
				t.Fatalf("round %d: the other box not active %s after the split", i, time.Since(cut))
			}
			time.Sleep(2 * time.Millisecond)
		}
		took := time.Since(cut)
		if act.e.Active() {
			t.Fatalf("round %d: split box still active", i)
		}
		// Keep the split a random while, then heal: the lease stays.
		time.Sleep(time.Duration(rand.Int64N(int64(ttl))))
		act.px.Heal()
		time.Sleep(3 * ttl)
		if !other.e.Active() || act.e.Active() {
			t.Fatalf("round %d: after the heal the lease moved back (old %v, new %v)", i, act.e.Active(), other.e.Active())
		}
		if n := other.roles.Load() - before; n != 1 {
			t.Fatalf("round %d: the new active changed role %d times, want 1", i, n)
		}
		if st := act.e.Status(); st.Holder != other.e.opts.Node || st.Peer != other.e.opts.Node || st.PeerURL != other.e.opts.HTTP {
			t.Fatalf("round %d: healed box sees holder %q peer %q at %q", i, st.Holder, st.Peer, st.PeerURL)
		}
		t.Logf("round %d: takeover %s after the split", i, took.Round(time.Millisecond))
		act = other
	}
	if n := both.Load(); n != 0 {
		t.Fatalf("both boxes active at %d sampled moments", n)
	}
}

// TestElectorStepDown: a step-down hands the lease to the other box within
// a tick or two, never with both acting.
func TestElectorStepDown(t *testing.T) {
	url := testpeer.Env(t, "PITH_TEST_NATS", "nats://127.0.0.1:4222")
	ttl := time.Second
	group := fmt.Sprintf("redundancy_test_%d", time.Now().UnixNano())
	a := startBox(t, url, group, "a", ttl)
	b := startBox(t, url, group, "b", ttl)
	stop := make(chan struct{})
	defer close(stop)
	both := watch(t, a, b, stop)
	act := waitActive(t, []*box{a, b}, 5*ttl)
	other := a
	if act == a {
		other = b
	}
	start := time.Now()
	if err := act.e.StepDown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for !other.e.Active() {
		if time.Since(start) > ttl {
			t.Fatalf("no takeover %s after a step-down", time.Since(start))
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Logf("step-down handed over in %s", time.Since(start).Round(time.Millisecond))
	if both.Load() != 0 {
		t.Fatal("both boxes active during the step-down")
	}
	if st := act.e.Status(); st.Role != Standby {
		t.Fatalf("stepped-down box is %v", st.Role)
	}
}

// TestElectorNATSNodeRestart runs the pair on a three-node cluster and
// kills and restarts each server in turn: never both active, and at most
// one takeover per restart (no storm), with a box active at the end.
func TestElectorNATSNodeRestart(t *testing.T) {
	bin := testpeer.NATSServer(t)
	cl := testpeer.StartNATSCluster(t, bin, 3)
	// The default lease_ttl: a stream leader's election after a kill can
	// take more than a second on a loaded machine, and a shorter lease
	// than users run would measure that, not the elector's hysteresis.
	ttl := 2 * time.Second
	group := fmt.Sprintf("redundancy_test_%d", time.Now().UnixNano())
	var boxes []*box
	for _, node := range []string{"a", "b"} {
		e, err := New(Options{URL: cl.URLs(), Group: group, Node: node, TTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		b := &box{e: e, done: make(chan struct{})}
		e.opts.OnRole = func(Role) { b.roles.Add(1) }
		ctx, cancel := context.WithCancel(context.Background())
		go func() { defer close(b.done); e.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-b.done })
		boxes = append(boxes, b)
	}
	stop := make(chan struct{})
	defer close(stop)
	both := watch(t, boxes[0], boxes[1], stop)
	act := waitActive(t, boxes, 30*time.Second) // the cluster elects its leaders first
	changes := func() int32 { return boxes[0].roles.Load() + boxes[1].roles.Load() }
	for i := range 3 {
		before := changes()
		cl.Kill(i)
		time.Sleep(3 * ttl)
		cl.Start(i)
		time.Sleep(5 * ttl)
		// A lost lease is two role changes (down, then one box up).
		if n := changes() - before; n > 2 {
			t.Errorf("server n%d restart: %d role changes, want at most 2 (no storm)", i, n)
		}
		now := waitActive(t, boxes, 10*ttl)
		moved := "stayed"
		if now != act {
			moved, act = "moved", now
		}
		t.Logf("server n%d killed and restarted: %d role changes, the lease %s", i, changes()-before, moved)
	}
	if n := both.Load(); n != 0 {
		t.Fatalf("both boxes active at %d sampled moments", n)
	}
}

// dropStream removes a lease stream a test left on the shared server.
func dropStream(url, name string) {
	nc, err := nats.Connect(url)
	if err != nil {
		return
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = nc.RequestWithContext(ctx, "$JS.API.STREAM.DELETE."+name, nil)
}
