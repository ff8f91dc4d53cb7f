package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/sparkplug"
	"github.com/pith-historian/pith/internal/tag"
	"github.com/pith-historian/pith/internal/testpeer"
)

// TestRedundancySparkplug: a pair's Sparkplug host and edge node run on
// the active box only, with the same ids on both boxes, so the pair is
// one host to edge nodes. An edge node waiting for the pair's host id
// (primary host) is born to the active box; the values it publishes are
// stored by that box alone and reach the stream once, the other box
// holding them through the mirror. After a step-down the old box says
// offline, the new one online, the edge node is born again to it and the
// new active box stores what follows; both archives hold each value once.
func TestRedundancySparkplug(t *testing.T) {
	natsURL := testpeer.Env(t, "PITH_TEST_NATS", "nats://127.0.0.1:4222")
	addr := testpeer.Env(t, "PITH_TEST_MQTT", "127.0.0.1:1883")
	addr = strings.TrimPrefix(strings.TrimPrefix(addr, "mqtt://"), "tcp://")
	broker := "mqtt://" + addr
	site := fmt.Sprintf("redundancysp%d", time.Now().UnixNano()%1_000_000_000)
	t.Cleanup(func() { dropRedundancy(natsURL, site, "pith-redundancy-"+site+"-a", "pith-redundancy-"+site+"-b") })
	hostID := "pair" + site
	stateTopic := "spBv1.0/STATE/" + hostID
	// The retained STATE outlives the test: remove it.
	t.Cleanup(func() { publishRetained(t, addr, stateTopic, nil) })

	boxes := map[string]*instance{}
	for _, node := range []string{"a", "b"} {
		cfg := fwdConfig(t, site, t.TempDir())
		cfg.Redundancy = config.Redundancy{Group: site, Node: node, NATS: natsURL, LeaseTTL: config.Duration(2 * time.Second)}
		cfg.Sparkplug.Host = []config.SparkplugHost{{Name: "host", Broker: broker, ClientID: "pith-host-" + site,
			HostID: hostID, Groups: []string{site}, TagTemplate: "sp.{metric}"}}
		// The pair's own edge node, publishing its role in another group.
		cfg.Sparkplug.Edge = []config.SparkplugEdge{{Name: "edge", Broker: broker, ClientID: "pith-edge-" + site,
			Group: site + "out", Node: "pair", Tags: []string{"pith.sys.redundancy.role"}}}
		boxes[node] = startInstance(t, cfg)
	}
	nodes := []string{"a", "b"}
	a := activeOf(t, []*instance{boxes["a"], boxes["b"]})
	act, sb := nodes[a], nodes[1-a]

	// The edge node: a tag changed every 20 ms, each change at its own
	// millisecond, published as metric e/v once the primary host is
	// online.
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	id, err := tab.Define(tag.Def{Name: "e.v", Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	eo := sparkplug.DefaultEdgeOptions()
	eo.Name, eo.Broker, eo.ClientID = "field", broker, "pith-field-"+site
	eo.Group, eo.Node, eo.Tags, eo.Interval, eo.PrimaryHost = site, "field", []string{"e.*"}, 20*time.Millisecond, hostID
	eo.ReconnectDelay = 200 * time.Millisecond
	edge, err := sparkplug.NewEdge(tab, nil, eo)
	if err != nil {
		t.Fatal(err)
	}
	from := time.Now().UnixMilli()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = edge.Run(ctx) }()
	var mu sync.Mutex
	last := from // the newest value's time
	go func() {
		defer wg.Done()
		tk := time.NewTicker(20 * time.Millisecond)
		defer tk.Stop()
		for v := 0.0; ; v++ {
			select {
			case <-ctx.Done():
				return
			case now := <-tk.C:
				mu.Lock()
				last = max(last+1, now.UnixMilli())
				tab.Update([]tag.Sample{{ID: id, T: last, V: v}})
				mu.Unlock()
			}
		}
	}()
	stopEdge := func() {
		if ctx.Err() == nil {
			cancel()
			wg.Wait()
		}
	}
	t.Cleanup(stopEdge)

	const metric = "sp.e.v"
	eventually(t, 20*time.Second, "the active box stores the edge node's values", func() bool {
		return boxes[act].count(t, metric, from, from+3_600_000) >= 20
	})
	if d := boxes[sb].count(t, metric, from, from+3_600_000); d == 0 {
		t.Errorf("the standby holds none of the edge node's values: the mirror should bring them")
	}
	// The standby never ran its host or its edge node.
	for _, s := range []string{"pith.sys.sparkplug.host.messages", "pith.sys.sparkplug.edge.births"} {
		if _, ok := boxes[sb].latest(t, s); ok {
			t.Errorf("the standby has %s: it ran a Sparkplug entry", s)
		}
		if _, ok := boxes[act].latest(t, s); !ok {
			t.Errorf("the active box has no %s", s)
		}
	}
	st0 := retainedState(t, addr, stateTopic)
	if !st0.Online {
		t.Errorf("STATE of the pair's host while a box is active: %+v", st0)
	}
	births := edge.Stats().Births.Load()

	// Step down: the other box takes over, the edge node is born to it.
	if code, body := post(t, boxes[act].base+"/api/v1/admin/redundancy/step-down", ""); code != 200 {
		t.Fatalf("step-down: %d %s", code, body)
	}
	stepped := time.Now().UnixMilli()
	old, nw := act, sb
	eventually(t, 20*time.Second, "the new active box stores the edge node's values", func() bool {
		return roleOf(t, boxes[nw]) == 1 && streamPointsBy(t, natsURL, "pith."+site+".samples", metric)[nw] >= 20
	})
	if got := edge.Stats().Births.Load(); got <= births {
		t.Errorf("the edge node was born %d times, and as often after the step-down: not born again to the new active box", got)
	}
	if st := retainedState(t, addr, stateTopic); !st.Online || st.Timestamp <= st0.Timestamp {
		t.Errorf("STATE of the pair's host after the step-down: %+v, want online from the new active box (the old one's: %+v)", st, st0)
	}
	if _, ok := boxes[old].latest(t, "pith.sys.sparkplug.host.messages"); !ok {
		t.Errorf("the old box lost its own system tags")
	}
	stopEdge()

	// Each value once in the stream and in both archives.
	var seen map[int64]string
	eventually(t, 20*time.Second, "both archives hold every value of the stream", func() bool {
		seen = map[int64]string{}
		dup := 0
		eachStreamPoint(t, natsURL, "pith."+site+".samples", metric, func(node string, ts int64) {
			if _, ok := seen[ts]; ok {
				dup++
			}
			seen[ts] = node
		})
		if dup > 0 {
			t.Fatalf("%d values of the edge node twice in the stream", dup)
		}
		to := from + 3_600_000
		return boxes[old].count(t, metric, from, to) == len(seen) && boxes[nw].count(t, metric, from, to) == len(seen)
	})
	by := map[string]int{}
	for ts, n := range seen {
		by[n]++
		if n == old && ts > stepped+1000 {
			t.Errorf("the old box stored a value of %d ms after the step-down", ts-stepped)
		}
	}
	if by[old] == 0 || by[nw] == 0 || by[old]+by[nw] != len(seen) {
		t.Errorf("the edge node's values in the stream by box: %v; want the old box's before the step-down, the new one's after", by)
	}
	t.Logf("%d values, by box %v; edge node born %d times", len(seen), by, edge.Stats().Births.Load())
}

// hostState is a Sparkplug 3.0 STATE message.
type hostState struct {
	Online    bool  `json:"online"`
	Timestamp int64 `json:"timestamp"`
}

// retainedState reads the retained STATE of topic (zero when none).
func retainedState(t *testing.T, addr, topic string) hostState {
	t.Helper()
	got := make(chan []byte, 1)
	c := mqttClient(t, addr, func(pr paho.PublishReceived) (bool, error) {
		select {
		case got <- pr.Packet.Payload:
		default:
		}
		return true, nil
	})
	defer c.Disconnect(&paho.Disconnect{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	var st hostState
	select {
	case b := <-got:
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("STATE %q: %v", b, err)
		}
	case <-time.After(2 * time.Second):
	}
	return st
}

// publishRetained publishes (nil: clears) a retained message.
func publishRetained(t *testing.T, addr, topic string, payload []byte) {
	c := mqttClient(t, addr, nil)
	defer c.Disconnect(&paho.Disconnect{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Retain: true, Payload: payload}); err != nil {
		t.Error(err)
	}
}

// mqttClient connects a short-lived client handing what it receives to
// onPublish (nil: nothing).
func mqttClient(t *testing.T, addr string, onPublish func(paho.PublishReceived) (bool, error)) *paho.Client {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cc := paho.ClientConfig{Conn: conn}
	if onPublish != nil {
		cc.OnPublishReceived = []func(paho.PublishReceived) (bool, error){onPublish}
	}
	c := paho.NewClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("pith-test-%d", time.Now().UnixNano()), CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	return c
}
