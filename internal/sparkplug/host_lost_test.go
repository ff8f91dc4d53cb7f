package sparkplug

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// cutProxy forwards TCP connections to target until Cut closes them all.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	open  bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, open: true}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if !p.open {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

// cut closes every connection and refuses new ones.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestHostLosesBroker cuts the host's connection: the broker publishes
// its STATE will (offline, with the birth's timestamp), and the host turns
// every metric it knew bad.
func TestHostLosesBroker(t *testing.T) {
	broker := brokerURL(t)
	proxy := newCutProxy(t, broker[len("mqtt://"):])
	group, hostID := uniqueID("grp"), uniqueID("pith")
	defer clearRetained(t, broker, "spBv1.0/STATE/"+hostID)
	sink := &memSink{}
	opts := DefaultHostOptions()
	opts.Broker, opts.Groups, opts.HostID = "mqtt://"+proxy.ln.Addr().String(), []string{group}, hostID
	opts.BatchDelay, opts.KeepAlive, opts.ReconnectDelay = 10*time.Millisecond, 2*time.Second, time.Hour
	h, err := NewHost(sink, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	defer func() { cancel(); <-done }()
	eventually(t, 10*time.Second, "host subscribed", func() bool { return h.Stats().Subscribed.Load() > 0 })
	var birth struct {
		Online    bool  `json:"online"`
		Timestamp int64 `json:"timestamp"`
	}
	eventually(t, 5*time.Second, "STATE online", func() bool {
		return json.Unmarshal([]byte(retained(t, broker, "spBv1.0/STATE/"+hostID)), &birth) == nil && birth.Online
	})
	// An edge node (our own encoder, straight to the broker) is born.
	nb := encode(Payload{Timestamp: uint64(time.Now().UnixMilli()), HasSeq: true, Metrics: []Metric{dbl("T", 1, 7)}})
	publishRaw(t, broker, "spBv1.0/"+group+"/NBIRTH/n1", nb)
	sink.waitValue(t, group+".n1.T", 7, model.QualityGood)

	proxy.cut()
	sink.waitValue(t, group+".n1.T", 7, model.QualityBad)
	var will struct {
		Online    bool  `json:"online"`
		Timestamp int64 `json:"timestamp"`
	}
	eventually(t, 10*time.Second, "STATE will", func() bool {
		return json.Unmarshal([]byte(retained(t, broker, "spBv1.0/STATE/"+hostID)), &will) == nil && !will.Online
	})
	if will.Timestamp != birth.Timestamp {
		t.Errorf("will timestamp %d, birth %d", will.Timestamp, birth.Timestamp)
	}
}
