package ingest

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"github.com/pith-historian/pith/internal/testpeer"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// mqttBroker returns the broker address from PITH_TEST_MQTT or skips.
func mqttBroker(t testing.TB) string {
	addr := os.Getenv("PITH_TEST_MQTT")
	if addr == "" {
		testpeer.Missing(t, "PITH_TEST_MQTT not set (e.g. 127.0.0.1:1883 with mosquitto running): MQTT tests skipped")
	}
	if _, hostPort, ok := strings.Cut(addr, "://"); ok {
		addr = hostPort // tcp://host:port works too
	}
	return addr
}

// rawPublisher speaks just enough MQTT 3.1.1 to publish at QoS 1 as fast
// as the broker takes it, pipelining: a Go client library would measure
// itself rather than Pith.
type rawPublisher struct {
	conn  net.Conn
	w     *bufio.Writer
	id    uint16
	acked atomic.Int64
	done  chan struct{}
}

func appendRemLen(b []byte, n int) []byte {
	for {
		d := byte(n % 128)
		n /= 128
		if n > 0 {
			d |= 0x80
		}
		b = append(b, d)
		if n == 0 {
			return b
		}
	}
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func dialPublisher(t testing.TB, addr, clientID string) *rawPublisher {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	var vh []byte
	vh = appendStr(vh, "MQTT")
	vh = append(vh, 4, 0x02, 0, 60) // level 4, clean session, keep-alive 60 s
	vh = appendStr(vh, clientID)
	pkt := appendRemLen([]byte{0x10}, len(vh))
	if _, err := conn.Write(append(pkt, vh...)); err != nil {
		t.Fatal(err)
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(conn, ack); err != nil || ack[0] != 0x20 || ack[3] != 0 {
		t.Fatalf("connack %x: %v", ack, err)
	}
	p := &rawPublisher{conn: conn, w: bufio.NewWriterSize(conn, 64<<10), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		r := bufio.NewReader(conn)
		buf := make([]byte, 4)
		for {
			if _, err := io.ReadFull(r, buf); err != nil {
				return
			}
			if buf[0] == 0x40 {
				p.acked.Add(1)
			}
		}
	}()
	return p
}

func (p *rawPublisher) publish(topic string, payload []byte) error {
	p.id++
	if p.id == 0 {
		p.id = 1
	}
	hdr := appendRemLen([]byte{0x32}, 2+len(topic)+2+len(payload))
	hdr = appendStr(hdr, topic)
	hdr = binary.BigEndian.AppendUint16(hdr, p.id)
	p.w.Write(hdr)
	_, err := p.w.Write(payload)
	return err
}

func (p *rawPublisher) close() {
	p.w.Flush()
	p.conn.Write([]byte{0xe0, 0})
	p.conn.Close()
	<-p.done
}

// startMQTT runs an MQTT input subscribed under a fresh prefix.
func startMQTT(t testing.TB, addr string, sink Sink, tune ...func(*MQTTOptions)) (*MQTT, string, func()) {
	prefix := fmt.Sprintf("pithtest%d/", time.Now().UnixNano())
	opts := DefaultMQTTOptions()
	opts.Broker = "mqtt://" + addr
	opts.Topics = []string{prefix + "#"}
	opts.Prefix = prefix
	opts.ClientID = "pith-" + prefix[:len(prefix)-1]
	opts.SessionExpiry = time.Minute
	opts.ReconnectDelay = 200 * time.Millisecond
	for _, f := range tune {
		f(&opts)
	}
	m, err := NewMQTT(sink, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	// Wait for the subscription: the first Connects happens before it, so
	// poll a probe message until it is stored.
	return m, prefix, func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// waitFor polls cond for up to a minute; it is a hang guard, not a timing
// assertion.
func waitFor(t testing.TB, what string, cond func() bool) {
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestMQTTEmoncmsConvention(t *testing.T) {
	addr := mqttBroker(t)
	sink := &memSink{}
	m, prefix, stop := startMQTT(t, addr, sink)
	defer stop()
	pub := dialPublisher(t, addr, "pub-"+prefix[:len(prefix)-1])
	defer pub.close()
	// Probe until subscribed.
	waitFor(t, "subscription", func() bool {
		pub.publish(prefix+"probe/x", []byte("1"))
		pub.w.Flush()
		time.Sleep(50 * time.Millisecond)
		return m.Stats().Points.Load() > 0
	})
	sink.take()
	before := m.Stats().Bad.Load()
	pub.publish(prefix+"emontx/power1", []byte(" 230.5\n"))
	pub.publish(prefix+"emontx", []byte(`{"power2": 12, "temp": "21.5", "time": 1700000000.25}`))
	pub.publish(prefix+"emontx/bad", []byte("abc"))
	pub.publish(prefix+"emon pi/vrms", []byte("240"))
	pub.w.Flush()
	var got []model.Point
	waitFor(t, "4 points", func() bool {
		got = append(got, sink.take()...)
		return len(got) >= 4
	})
	want := map[string]float64{"emontx.power1": 230.5, "emontx.power2": 12, "emontx.temp": 21.5, "emon_pi.vrms": 240}
	for _, p := range got {
		if v, ok := want[p.Tag]; !ok || v != p.V {
			t.Errorf("unexpected point %+v", p)
		}
		if (p.Tag == "emontx.power2" || p.Tag == "emontx.temp") && p.T != 1_700_000_000_250 {
			t.Errorf("%s at %d, want the payload's time", p.Tag, p.T)
		}
	}
	waitFor(t, "bad message counted", func() bool { return m.Stats().Bad.Load() == before+1 })
}

// TestMQTTThroughput publishes PITH_MQTT_MESSAGES (default 200000) QoS 1
// messages and logs how many per second reach a real store; it asserts
// only that all of them do:
//
//	PITH_TEST_MQTT=127.0.0.1:1883 go test -run MQTTThroughput -v ./internal/ingest/
func TestMQTTThroughput(t *testing.T) {
	addr := mqttBroker(t)
	// The machine's broker keeps mosquitto's defaults: 20 messages in
	// flight and a 1000-message queue, which drops QoS 1 messages of a
	// subscriber that falls behind; stay well inside it.
	mqttThroughput(t, addr, 20_000, 200, func(o *MQTTOptions) {
		if os.Getenv("PITH_MQTT_ACK_ON_RECEIPT") != "" {
			o.AckOnReceipt = true
		}
	})
}

// TestMQTTThroughputTunedBroker measures the same path against a private
// mosquitto configured as a broker feeding a historian should be: 1000
// messages in flight per client (the default 20 makes every store write,
// and so every fsync, carry only 20 messages) and a deep queue.
func TestMQTTThroughputTunedBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("a throughput figure: not in -short runs (the ARM runs under qemu-user are -short)")
	}
	addr := startTunedMosquitto(t)
	mqttThroughput(t, addr, 200_000, 20_000, func(o *MQTTOptions) { o.AckWindow = 1000 })
}

// startTunedMosquitto runs mosquitto on a free loopback port for the test.
func startTunedMosquitto(t *testing.T) string {
	bin, err := exec.LookPath("mosquitto")
	if err != nil {
		testpeer.Missing(t, "mosquitto not installed (apt-get install mosquitto): tuned-broker test skipped")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	cfg := "listener " + port + " 127.0.0.1\nallow_anonymous true\npersistence false\n" +
		"max_inflight_messages 1000\nmax_queued_messages 200000\n"
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-c", conf)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("mosquitto did not listen on %s", addr)
	return ""
}

// mqttThroughput publishes QoS 1 messages as fast as the broker takes
// them, at most ahead messages beyond what Pith stored, and reports msg/s
// into the store.
func mqttThroughput(t *testing.T, addr string, n int, ahead int64, tune func(*MQTTOptions)) {
	if s := os.Getenv("PITH_MQTT_MESSAGES"); s != "" {
		fmt.Sscan(s, &n)
	}
	db, err := store.Open(t.TempDir(), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m, prefix, stop := startMQTT(t, addr, db, tune)
	defer stop()
	pub := dialPublisher(t, addr, "pub-"+prefix[:len(prefix)-1])
	defer pub.close()
	waitFor(t, "subscription", func() bool {
		pub.publish(prefix+"probe/x", []byte("1"))
		pub.w.Flush()
		time.Sleep(50 * time.Millisecond)
		return m.Stats().Points.Load() > 0
	})
	base := m.Stats().Points.Load()
	topics := make([]string, 100)
	for i := range topics {
		topics[i] = fmt.Sprintf("%splant/ai%02d", prefix, i)
	}
	payload := make([]byte, 0, 16)
	start := time.Now()
	for i := 0; i < n; i++ {
		// Stay at most 400 messages ahead of the store: beyond its queue
		// limit (1000 by default) mosquitto drops messages for a slow
		// subscriber, which would measure the broker, not Pith.
		for i%200 == 0 && int64(i)-(m.Stats().Messages.Load()-base) > ahead {
			pub.w.Flush()
			time.Sleep(100 * time.Microsecond)
		}
		payload = fmt.Appendf(payload[:0], "%d.%02d", 10+i%90, i%100)
		if err := pub.publish(topics[i%100], payload); err != nil {
			t.Fatal(err)
		}
	}
	pub.w.Flush()
	waitFor(t, "all messages stored", func() bool {
		got := m.Stats().Points.Load() - base
		if got < int64(n) && time.Since(start) > 50*time.Second {
			t.Errorf("after 50 s: %d of %d stored, %d received, %d acked by the broker to the publisher", got, n, m.Stats().Messages.Load(), pub.acked.Load())
			return true
		}
		return got >= int64(n)
	})
	dt := time.Since(start)
	st := m.Stats()
	t.Logf("%d QoS 1 messages from mosquitto into the store in %.2f s = %.0f msg/s (%d batches, %d bad)",
		n, dt.Seconds(), float64(n)/dt.Seconds(), st.Batches.Load(), st.Bad.Load())
}
