package forward

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// proxy is a TCP relay to a NATS server that the test can cut and
// restore, to play a network outage while a queue keeps running.
type proxy struct {
	t      *testing.T
	addr   string // fixed listen address, kept across outages
	target string
	mu     sync.Mutex
	l      net.Listener
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, addr: "127.0.0.1:0", target: target}
	p.up()
	p.addr = p.l.Addr().String()
	t.Cleanup(p.down)
	return p
}

func (p *proxy) url() string { return "nats://" + p.addr }

// up starts listening again.
func (p *proxy) up() {
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.l = l
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
}

// down closes the listener and every relayed connection.
func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestNATSNetworkOutage cuts the network under a running forwarder while
// points keep coming, then restores it: the sink reconnects, and every
// point arrives exactly once and in order.
func TestNATSNetworkOutage(t *testing.T) {
	url := natsURL(t)
	site := testSite(t)
	p := newProxy(t, strings.TrimPrefix(url, "nats://"))
	sink := newNATSSink(t, p.url(), site)
	defer sink.Close()
	h := openForwarder(t, t.TempDir(), testOptions(site), sink)
	const per, n = 500, 40000
	for i := 0; i < n; i += per {
		switch i {
		case n / 4:
			p.down()
		case n / 2:
			waitUntil(t, "failed sends", func() bool { return h.f.Stats().Errors > 0 })
			if st := h.f.Stats(); st.OldestMs == 0 {
				t.Errorf("stats during outage = %+v", st)
			}
			p.up()
		}
		h.write(i, per, per)
		time.Sleep(time.Millisecond) // acquisition pace
	}
	h.drained()
	h.close()
	ids, pts := streamMessages(t, url, sink.Subject())
	if len(ids) != n/per {
		t.Errorf("stream holds %d messages, want %d", len(ids), n/per)
	}
	checkUniqueIDs(t, ids)
	checkSeq(t, pts, n)
	t.Logf("duplicates dropped by the stream: %d", sink.Duplicates())
}

// TestNATSWokenAfterOutage: with an hour between retries, the forwarder
// still sends again within seconds of the link coming back: the NATS
// client reconnects by itself and wakes it (Waker).
func TestNATSWokenAfterOutage(t *testing.T) {
	url := natsURL(t)
	site := testSite(t)
	p := newProxy(t, strings.TrimPrefix(url, "nats://"))
	sink := newNATSSink(t, p.url(), site)
	defer sink.Close()
	o := testOptions(site)
	o.RetryMin, o.RetryMax = time.Hour, time.Hour
	h := openForwarder(t, t.TempDir(), o, sink)
	h.write(0, 500, 500)
	h.drained()
	p.down()
	h.write(500, 500, 500)
	waitUntil(t, "a failed send", func() bool { return h.f.Stats().Errors > 0 })
	p.up()
	h.drained()
	h.close()
	_, pts := streamMessages(t, url, sink.Subject())
	checkSeq(t, pts, 1000)
}
