package agent

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/testpeer"
)

// TestRedundancyMQTT: only the active box of a pair subscribes to MQTT,
// with the pair's client id, so each message is stored once (the stream
// holds it once, from the box that was active); values published while no
// box is connected (the active box stopped, the other not yet taken over)
// are kept by the broker's session and stored by the box that takes over.
func TestRedundancyMQTT(t *testing.T) {
	natsURL := testpeer.Env(t, "PITH_TEST_NATS", "nats://127.0.0.1:4222")
	mqttURL := os.Getenv("PITH_TEST_MQTT")
	if mqttURL == "" {
		testpeer.Missing(t, "PITH_TEST_MQTT not set (e.g. tcp://127.0.0.1:1883): redundancy MQTT test skipped")
	}
	if !strings.Contains(mqttURL, "://") {
		mqttURL = "tcp://" + mqttURL
	}
	u, err := url.Parse(mqttURL)
	if err != nil {
		t.Fatal(err)
	}
	site := fmt.Sprintf("redundancymqtt%d", time.Now().UnixNano()%1_000_000_000)
	t.Cleanup(func() { dropRedundancy(natsURL, site, "pith-redundancy-"+site+"-a", "pith-redundancy-"+site+"-b") })
	prefix := "pithtest/" + site + "/"
	cfgs := map[string]*config.Config{}
	var ins []*instance
	for _, node := range []string{"a", "b"} {
		cfg := fwdConfig(t, site, t.TempDir())
		cfg.Redundancy = config.Redundancy{Group: site, Node: node, NATS: natsURL, LeaseTTL: config.Duration(2 * time.Second)}
		cfg.MQTT = config.MQTT{Enabled: true, Broker: "mqtt://" + u.Host, Topics: []string{prefix + "#"}, Prefix: prefix}
		cfgs[node] = cfg
		ins = append(ins, startInstance(t, cfg))
	}
	a := activeOf(t, ins)
	nodes := []string{"a", "b"}
	act, sb, actNode, sbNode := ins[a], ins[1-a], nodes[a], nodes[1-a]
	// Each value dated by its message (Unix seconds), 10 ms apart.
	from := time.Now().UnixMilli() - 60_000
	pub := func(i int) {
		publishOnce(t, u.Host, prefix+"m", fmt.Appendf(nil, `{"v": %d, "time": %.3f}`, i, float64(from+int64(i)*10)/1000))
	}
	// Wait for the active box's subscription: a first value comes in.
	for end := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, ok := act.latest(t, "w"); ok {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the active box stored no MQTT value 15 s after it took over")
		}
		publishOnce(t, u.Host, prefix+"w", []byte("1"))
	}
	for i := 0; i <= 5; i++ {
		pub(i)
	}
	for end := time.Now().Add(15 * time.Second); act.count(t, "m.v", from, from+51) != 6; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the active box stored %d of the 6 values published", act.count(t, "m.v", from, from+51))
		}
	}
	// Its acknowledgements reach the broker (sent every few ms).
	time.Sleep(500 * time.Millisecond)
	// The active box stops (releasing its lease); five values come while
	// no box is subscribed or the other takes over.
	act.stop(t)
	for i := 6; i <= 10; i++ {
		pub(i)
	}
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if n := sb.count(t, "m.v", from, from+101); roleOf(t, sb) == 1 && n == 11 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("20 s after the active box stopped: the other box's role %v, %d of the 11 values", roleOf(t, sb), sb.count(t, "m.v", from, from+101))
		}
	}
	// The stopped box comes back (as the standby) and publishes what it
	// had not: still each value once in the stream.
	ins = append(ins, startInstance(t, cfgs[actNode]))
	time.Sleep(3 * time.Second)
	by := streamPointsBy(t, natsURL, "pith."+site+".samples", "m.v")
	if by[actNode] != 6 || by[sbNode] != 5 {
		t.Fatalf("m.v in the stream by box %v: want each value once, the first six from %s, the last five from %s", by, actNode, sbNode)
	}
}
