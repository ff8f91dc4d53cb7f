package sparkplug

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/testpeer"
)

// brokerURL returns the Mosquitto of PITH_TEST_MQTT as a URL, or ends the
// test (testpeer).
func brokerURL(t *testing.T) string {
	t.Helper()
	addr := testpeer.Env(t, "PITH_TEST_MQTT", "127.0.0.1:1883")
	if u, err := parseHostPort(addr); err == nil {
		return "mqtt://" + u
	}
	return addr
}

func parseHostPort(s string) (string, error) {
	for _, p := range []string{"mqtt://", "tcp://"} {
		if len(s) > len(p) && s[:len(p)] == p {
			s = s[len(p):]
		}
	}
	_, _, err := net.SplitHostPort(s)
	return s, err
}

// tahuDir is where the node scripts and their package-lock.json live;
// `npm ci` there installs Eclipse Tahu's client (.ci/run does).
const tahuDir = "testdata/tahu"

// tahu is a node script of testdata/tahu driven through stdin and stdout.
type tahu struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	events chan map[string]any
}

// startTahu runs `node SCRIPT args...`, or ends the test when node or
// the npm packages are missing.
func startTahu(t *testing.T, script string, args ...string) *tahu {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testpeer.Missing(t, "node not installed (apt-get install nodejs npm): Eclipse Tahu interop test skipped")
	}
	if _, err := os.Stat(filepath.Join(tahuDir, "node_modules", "sparkplug-client")); err != nil {
		testpeer.Missing(t, "npm packages missing (cd internal/sparkplug/%s && npm ci): Eclipse Tahu interop test skipped", tahuDir)
	}
	cmd := exec.Command(node, append([]string{script}, args...)...)
	cmd.Dir = tahuDir
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &tahu{t: t, cmd: cmd, in: in, events: make(chan map[string]any, 1000)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Logf("%s: %s", script, sc.Text())
				continue
			}
			p.events <- ev
		}
		close(p.events)
	}()
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return p
}

// send writes one command.
func (p *tahu) send(cmd map[string]any) {
	p.t.Helper()
	b, _ := json.Marshal(cmd)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		p.t.Fatalf("send %s: %v", b, err)
	}
}

// await returns the next event named ev (others are passed to skip, or
// dropped), failing after timeout.
func (p *tahu) await(ev string, timeout time.Duration) map[string]any {
	p.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e, ok := <-p.events:
			if !ok {
				p.t.Fatalf("script ended while waiting for %q", ev)
			}
			if e["ev"] == "error" {
				p.t.Fatalf("script error: %v", e)
			}
			if e["ev"] == ev {
				return e
			}
		case <-deadline:
			p.t.Fatalf("no %q event within %s", ev, timeout)
		}
	}
}

// memSink is an ingest.Sink keeping every point written.
type memSink struct {
	mu  sync.Mutex
	pts []model.Point
}

func (s *memSink) Write(_ context.Context, pts []model.Point) error {
	s.mu.Lock()
	s.pts = append(s.pts, pts...)
	s.mu.Unlock()
	return nil
}

// latest returns the newest point of tag (by time, the last written on ties).
func (s *memSink) latest(tag string) (model.Point, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var best model.Point
	ok := false
	for _, p := range s.pts {
		if p.Tag == tag && (!ok || p.T >= best.T) {
			best, ok = p, true
		}
	}
	return best, ok
}

// find returns the last point of tag with value v.
func (s *memSink) find(tag string, v float64) (model.Point, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.pts) - 1; i >= 0; i-- {
		if p := s.pts[i]; p.Tag == tag && p.V == v {
			return p, true
		}
	}
	return model.Point{}, false
}

// eventually polls cond until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitValue waits until tag's newest point has value v and quality q.
func (s *memSink) waitValue(t *testing.T, tag string, v float64, q model.Quality) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%s = %v %s", tag, v, q), func() bool {
		p, ok := s.latest(tag)
		return ok && p.V == v && p.Q == q
	})
}

// retained reads the retained message of topic ("" when none).
func retained(t *testing.T, broker, topic string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", broker[len("mqtt://"):], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	c := paho.NewClient(paho.ClientConfig{Conn: conn, OnPublishReceived: []func(paho.PublishReceived) (bool, error){
		func(pr paho.PublishReceived) (bool, error) {
			select {
			case got <- string(pr.Packet.Payload):
			default:
			}
			return true, nil
		}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("pith-test-%d", time.Now().UnixNano()), CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(&paho.Disconnect{})
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: topic, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		return s
	case <-time.After(time.Second):
		return ""
	}
}

// publishRaw publishes one QoS 1 message from a short-lived client.
func publishRaw(t *testing.T, broker, topic string, payload []byte) {
	t.Helper()
	publishMsg(t, broker, &paho.Publish{Topic: topic, QoS: 1, Payload: payload})
}

// publishRetained publishes one retained QoS 1 message.
func publishRetained(t *testing.T, broker, topic string, payload []byte) {
	t.Helper()
	publishMsg(t, broker, &paho.Publish{Topic: topic, QoS: 1, Retain: true, Payload: payload})
}

func publishMsg(t *testing.T, broker string, msg *paho.Publish) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", broker[len("mqtt://"):], 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("pith-test-%d", time.Now().UnixNano()), CleanStart: true}); err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(&paho.Disconnect{})
	if _, err := c.Publish(ctx, msg); err != nil {
		t.Fatal(err)
	}
}

// clearRetained removes the retained message of topic.
func clearRetained(t *testing.T, broker, topic string) {
	conn, err := net.DialTimeout("tcp", broker[len("mqtt://"):], 5*time.Second)
	if err != nil {
		return
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("pith-test-%d", time.Now().UnixNano()), CleanStart: true}); err != nil {
		return
	}
	_, _ = c.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Retain: true})
	_ = c.Disconnect(&paho.Disconnect{})
}

// uniqueID names a group or node so that tests sharing a broker do not meet.
func uniqueID(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), time.Now().UnixNano()%1e9)
}
