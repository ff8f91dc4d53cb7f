package agent

import (
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/testpeer"
)

// TestHandoverSaw: a step-down's hand-over ends once the other box's
// values show it polling every station steadily: three polls in a row of
// a station archived at every poll, each within 1.5 periods of the one
// before (the tags of one poll count once, a longer interval starts
// again, station statistics do not count); any value, or a statistic, of
// a station archived on change. Other tags do not count.
func TestHandoverSaw(t *testing.T) {
	cfg := &config.Config{}
	cfg.Redundancy = config.Redundancy{Group: "g", Node: "a", NATS: "nats://x:4222", LeaseTTL: config.Duration(time.Second)}
	cfg.Modbus.Clients = []config.ModbusClient{
		{Name: "s1", Period: config.Duration(200 * time.Millisecond), Tags: []config.ModbusTagSpec{{Name: "s1.v{i}", Register: "holding:0", Type: "uint16", Order: "ABCD", Count: 2, Scale: 1, Archive: "all"}}},
		{Name: "s2", Period: config.Duration(3 * time.Second), Tags: []config.ModbusTagSpec{{Name: "s2.v", Register: "holding:0", Type: "uint16", Order: "ABCD", Count: 1, Scale: 1, Archive: "change"}}},
	}
	h := newHandover(cfg)
	if got, want := h.tail, 3*time.Second; got != want {
		t.Fatalf("tail %s, want the slowest period %s", got, want)
	}
	if got, want := h.limit, 2*time.Second+6*3*time.Second; got != want {
		t.Fatalf("limit %s, want %s", got, want)
	}
	done := func() bool {
		select {
		case <-h.done:
			return true
		default:
			return false
		}
	}
	h.saw([]model.Point{{Tag: "pith.station.s2.comm", T: 1}})
	for _, b := range [][]model.Point{
		{{Tag: "calc.x", T: 1000}, {Tag: "s1.v0", T: 1000}, {Tag: "s1.v1", T: 1000}},
		{{Tag: "s1.v0", T: 1200}, {Tag: "pith.station.s1.polls", T: 1300}},
		{{Tag: "s1.v1", T: 1200}, {Tag: "s1.v0", T: 1100}}, // seen already
		{{Tag: "s1.v0", T: 1600}}, // 400 ms: a new run
		{{Tag: "s1.v0", T: 1890}, {Tag: "s1.v1", T: 1890}},
	} {
		h.saw(b)
		if done() {
			t.Fatalf("done after %v: station s1 not polled steadily yet", b)
		}
	}
	h.saw([]model.Point{{Tag: "s1.v1", T: 2100}})
	if !done() {
		t.Fatal("not done once s1 was polled three times in a row and s2 seen")
	}
	h.saw([]model.Point{{Tag: "s1.v0", T: 2300}}) // after done: no second close
	if h := newHandover(&config.Config{}); h == nil || !func() bool { <-h.done; return true }() {
		t.Fatal("a hand-over without stations is not done at once")
	}
}

// TestForwardMQTTClientID: the two boxes of a pair share the site, so an
// MQTT forwarder's default client id names the box too.
func TestForwardMQTTClientID(t *testing.T) {
	c := config.ForwardMQTT{Name: "broker"}
	for _, tt := range []struct{ id, node, want string }{
		{"", "", "pith-s1-broker"},
		{"", "a", "pith-s1-broker-a"},
		{"mine", "a", "mine"},
	} {
		c.ClientID = tt.id
		if got := mqttClientID(c, "s1", tt.node); got != tt.want {
			t.Errorf("client id %q on node %q: %q, want %q", tt.id, tt.node, got, tt.want)
		}
	}
}

// TestRedundancyStepDownNoHole: a pair polls a Modbus device every 200 ms
// and steps down again and again, each box in turn; in the archive
// (both boxes hold the same samples) no interval across a hand-over is
// longer than 1.5 poll periods. The hand-over is where the box that
// stepped down still polls and the new active box already does, from the
// new box's first sample to the old box's last, with a period before and
// five after.
// Each box reaches the device through its own proxy, which answers the
// new active box's second and third polls 350 ms late, as a box that has
// just taken over on a loaded machine may poll: each then skips a tick,
// and the old box must poll on until the new one polls steadily.
// PITH_STEPDOWNS sets how many (default 2).
func TestRedundancyStepDownNoHole(t *testing.T) {
	natsURL := testpeer.Env(t, "PITH_TEST_NATS", "nats://127.0.0.1:4222")
	steps := 2
	if s := os.Getenv("PITH_STEPDOWNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("PITH_STEPDOWNS=%q: want a count", s)
		}
		steps = n
	}
	const ttl, period = 2 * time.Second, 200 * time.Millisecond
	dev := modbus.NewServer(modbus.ServerOptions{Addr: "127.0.0.1:0", HoldingRegisters: 4, InputRegisters: -1, Coils: -1, DiscreteInputs: -1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = dev.Serve(ln) }()
	t.Cleanup(func() { dev.Close() })
	proxies := map[string]*slowProxy{"a": newSlowProxy(t, ln.Addr().String()), "b": newSlowProxy(t, ln.Addr().String())}

	site := fmt.Sprintf("redundancystep%d", time.Now().UnixNano()%1_000_000_000)
	t.Cleanup(func() { dropRedundancy(natsURL, site, "pith-redundancy-"+site+"-a", "pith-redundancy-"+site+"-b") })
	const tg = "dev.v"
	boxes := map[string]*instance{}
	// Box b starts first and takes the lease before it hears of a: it
	// polls at the phase of a box alone until its step-down moves it.
	for _, node := range []string{"b", "a"} {
		cfg := fwdConfig(t, site, t.TempDir())
		cfg.Redundancy = config.Redundancy{Group: site, Node: node, NATS: natsURL, LeaseTTL: config.Duration(ttl)}
		cfg.Modbus.Clients = []config.ModbusClient{{Name: "dev", URL: "tcp://" + proxies[node].addr, Unit: 1,
			Period: config.Duration(period), Timeout: config.Duration(500 * time.Millisecond),
			Tags: []config.ModbusTagSpec{{Name: tg, Register: "holding:0", Type: "uint16", Order: "ABCD", Count: 1, Scale: 1, Archive: "all"}}}}
		boxes[node] = startInstance(t, cfg)
		if node == "b" {
			eventually(t, 15*time.Second, "b active", func() bool { return roleOf(t, boxes["b"]) == 1 })
		}
	}
	other := map[string]string{"a": "b", "b": "a"}
	act := "b"
	from := time.Now().UnixMilli()
	type step struct {
		at       int64  // the request's time
		old, new string // the boxes
	}
	var done []step
	for range steps {
		// Long enough for the last hand-over to end, and for the box
		// that stepped down to be allowed the lease again (two TTLs).
		time.Sleep(2*ttl + time.Second)
		nw := other[act]
		proxies[nw].slow(2, 3, 350*time.Millisecond)
		at := time.Now().UnixMilli()
		if code, body := post(t, boxes[act].base+"/api/v1/admin/redundancy/step-down", ""); code != 200 {
			t.Fatalf("step-down of %s: %d %s", act, code, body)
		}
		eventually(t, 10*time.Second, nw+" active after the step-down", func() bool { return roleOf(t, boxes[nw]) == 1 })
		done = append(done, step{at, act, nw})
		act = nw
	}
	time.Sleep(2*ttl + time.Second) // the last hand-over ends
	to := time.Now().UnixMilli()
	time.Sleep(2 * time.Second) // the samples before to reach the stream

	// Every sample once in the stream, by the box that polled it; both
	// archives hold all of them.
	by := map[int64]string{}
	eachStreamPoint(t, natsURL, "pith."+site+".samples", tg, func(node string, ts int64) {
		if n, ok := by[ts]; ok {
			t.Errorf("sample %d in the stream from %s and from %s", ts, n, node)
		}
		by[ts] = node
	})
	var ts []int64
	for x := range by {
		if x >= from && x < to {
			ts = append(ts, x)
		}
	}
	slices.Sort(ts)
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		na, nb := boxes["a"].count(t, tg, from, to), boxes["b"].count(t, tg, from, to)
		if na == len(ts) && nb == len(ts) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the archives hold %d (a) and %d (b) samples, the stream %d", na, nb, len(ts))
		}
	}
	maxGap := period * 3 / 2
	var worst time.Duration
	var report []string
	for k, s := range done {
		// The old box's last sample and the new box's first, of this
		// hand-over.
		end := to
		if k+1 < len(done) {
			end = done[k+1].at
		}
		var lastOld, firstNew int64
		for _, x := range ts {
			if x < s.at-ttl.Milliseconds() || x >= end {
				continue
			}
			if by[x] == s.old {
				lastOld = x
			} else if firstNew == 0 {
				firstNew = x
			}
		}
		if lastOld == 0 || firstNew == 0 {
			t.Fatalf("step-down %d (%s to %s): the old box's last sample %d, the new box's first %d", k, s.old, s.new, lastOld, firstNew)
		}
		// A hole the old box left by stopping too early shows within
		// the few periods after its last sample.
		lo, hi := min(firstNew, lastOld)-period.Milliseconds(), max(firstNew, lastOld)+5*period.Milliseconds()
		var gap int64
		for i := 1; i < len(ts); i++ {
			if ts[i] >= lo && ts[i-1] <= hi {
				gap = max(gap, ts[i]-ts[i-1])
			}
		}
		g := time.Duration(gap) * time.Millisecond
		worst = max(worst, g)
		report = append(report, fmt.Sprintf("%s>%s gap %d ms overlap %d ms", s.old, s.new, gap, lastOld-firstNew))
		if g > maxGap {
			t.Errorf("step-down %d (%s to %s): an interval of %s across the hand-over (over %s); samples from %d ms after the request, by box: %s",
				k, s.old, s.new, g, maxGap, lo-s.at, nearBy(ts, by, lo, hi, s.at))
		}
	}
	t.Logf("%d step-downs at %s polls: longest interval across a hand-over %s; %s", len(done), period, worst, strings.Join(report, ", "))
}

// nearBy lists the samples of ts within [lo, hi] as "<ms from ref><box>".
func nearBy(ts []int64, by map[int64]string, lo, hi, ref int64) string {
	var out []string
	for _, x := range ts {
		if x >= lo && x <= hi {
			out = append(out, strconv.FormatInt(x-ref, 10)+by[x])
		}
	}
	return strings.Join(out, " ")
}

// slowProxy passes a Modbus TCP connection to a device, answering chosen
// responses late.
type slowProxy struct {
	addr string
	mu   sync.Mutex
	n    int // responses since slow
	from int // the first response answered late (1: the first after slow), 0 none
	to   int // the last one
	by   time.Duration
}

func newSlowProxy(t *testing.T, target string) *slowProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &slowProxy{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(d, c); d.Close() }()
			go func() {
				defer c.Close()
				buf := make([]byte, 512)
				for {
					n, err := d.Read(buf) // one response: a request is answered before the next is sent
					if err != nil {
						return
					}
					time.Sleep(p.delay())
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}

// slow answers the from-th to the to-th responses from now on late by d.
func (p *slowProxy) slow(from, to int, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n, p.from, p.to, p.by = 0, from, to, d
}

// delay returns how late to answer the next response.
func (p *slowProxy) delay() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if p.from > 0 && p.n >= p.from && p.n <= p.to {
		return p.by
	}
	return 0
}
