package opcua

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
)

// textTag adds a String tag to c.
func textTag(c *config.OPCUAClient, name, node string, mod func(*config.OPCUATagSpec)) {
	ts := config.DefaultOPCUATagSpec()
	ts.Name, ts.Node, ts.Type = name, node, "String"
	ts.SamplingInterval, ts.QueueSize = 0, 100
	if mod != nil {
		mod(&ts)
	}
	c.Tags = append(c.Tags, ts)
}

// TestInteropText reads node-opcua's String variables into text tags:
// every state change is stored once with its source timestamp, a
// two-line state as one line, a 1,500-byte one cut to 1,024 bytes with
// quality uncertain, array elements one tag each, an unchanged value
// (read cyclically, or the constant element) stored once; a link cut
// turns the text tags bad with their last text kept, and they turn good
// again after it.
func TestInteropText(t *testing.T) {
	srv := startNodeServer(t, 1, 10)
	px := newProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.port))
	c := stationConfig(t, "opc.tcp://"+px.addr()+"/pith", 0)
	c.RetryPause = config.Duration(200 * time.Millisecond)
	c.ReadPeriod = config.Duration(100 * time.Millisecond)
	textTag(&c, "s.state", "ns=1;s=state", nil)
	textTag(&c, "s.names.{i}", "ns=1;s=names", func(ts *config.OPCUATagSpec) { ts.Count = 2 })
	textTag(&c, "s.hello", "ns=1;s=text", func(ts *config.OPCUATagSpec) { ts.Mode = config.OPCUAModeRead })
	_, tab, rec := runStation(t, c)
	long := strings.Repeat("x", model.MaxTextLen-3) + "…"
	want := []string{"Idle", "Running", "Alarm: level high Pump 2 tripped", long, "Stopped"}
	seen := func() map[string]model.Quality {
		m := map[string]model.Quality{}
		for _, p := range rec.textsOf("s.state") {
			m[p.Text] = p.Q
		}
		return m
	}
	waitFor(t, 30*time.Second, "every state", func() bool { return len(seen()) >= len(want) })
	got := seen()
	for _, w := range want {
		q, ok := got[w]
		wantQ := model.QualityGood
		if w == long {
			wantQ = model.QualityUncertain
		}
		if !ok || q != wantQ {
			t.Errorf("state %.30q stored %v with quality %v; want %v", w, ok, q, wantQ)
		}
	}
	if len(got) != len(want) {
		t.Errorf("stored states %d, want %d: %v", len(got), len(want), got)
	}
	// Each state lasts 5 ticks: one point per change, on the tick that
	// changed it (source timestamps are multiples of the period).
	pts := rec.textsOf("s.state")
	for i, p := range pts {
		if i > 0 && p.T%tickMs != 0 { // the first is the initial value, set before the ticks
			t.Errorf("state point %d at %d: not a source timestamp", i, p.T)
		}
		if i > 0 && p.Text == pts[i-1].Text && p.Q == pts[i-1].Q {
			t.Errorf("state %q stored twice in a row", p.Text)
		}
	}
	waitFor(t, 10*time.Second, "array element and read text", func() bool {
		return latest(tab, "s.names.1").Text == "fixed" && latest(tab, "s.hello").Text == "hello"
	})
	if n := len(rec.textsOf("s.names.0")); n < 5 {
		t.Errorf("s.names.0 stored %d values, want one per tick", n)
	}
	if n := len(rec.textsOf("s.names.1")); n != 1 {
		t.Errorf("unchanging s.names.1 stored %d times, want 1: %+v", n, rec.textsOf("s.names.1"))
	}
	if n := len(rec.textsOf("s.hello")); n != 1 {
		t.Errorf("read-mode s.hello stored %d times in %d reads' time, want 1", n, 10)
	}
	if v := latest(tab, "s.state"); !v.IsText || !v.Has {
		t.Errorf("s.state in the table: %+v, want a text value", v)
	}

	px.setCut(true)
	waitFor(t, 20*time.Second, "text tags bad", func() bool {
		v := latest(tab, "s.hello")
		return v.Q == model.QualityBad && latest(tab, "s.state").Q == model.QualityBad
	})
	if v := latest(tab, "s.hello"); v.Text != "hello" {
		t.Errorf("s.hello during the cut: %+v, want its last text kept", v)
	}
	px.setCut(false)
	waitFor(t, 60*time.Second, "text tags good again", func() bool {
		return latest(tab, "s.hello").Q == model.QualityGood && latest(tab, "s.state").Q == model.QualityGood
	})
	hs := rec.textsOf("s.hello")
	if len(hs) != 3 || hs[1].Q != model.QualityBad || hs[2].Q != model.QualityGood || hs[1].Text != "hello" {
		t.Errorf("s.hello stored %+v, want good, bad (text kept), good", hs)
	}
}

// TestInteropPercentDeadband asks node-opcua for a percent deadband on an
// AnalogItem whose EURange is 0..1000: 0.45% is 4.5, so of a value
// counting up by one every tick only every fifth change is reported.
func TestInteropPercentDeadband(t *testing.T) {
	srv := startNodeServer(t, 1, 10)
	c := stationConfig(t, srv.endpoint(), 0)
	ts := config.DefaultOPCUATagSpec()
	ts.Name, ts.Node, ts.Type, ts.SamplingInterval, ts.QueueSize = "t.level", "ns=1;s=level", "Double", 0, 100
	ts.ServerDeadband, ts.ServerDeadbandValue = config.OPCUADeadbandPercent, 0.45
	c.Tags = append(c.Tags, ts)
	st, tab, rec := runStation(t, c)
	waitFor(t, 30*time.Second, "values", func() bool { return latest(tab, "t.level").V > 40 })
	st.Stop()
	prev, n := -1.0, 0
	for _, p := range rec.byTag()["t.level"] {
		if p.Q != model.QualityGood {
			continue
		}
		if prev >= 0 && p.V-prev != 5 {
			t.Errorf("after %v came %v, want a step of 5 with a 0.45%% deadband of 0..1000", prev, p.V)
		}
		prev = p.V
		n++
	}
	if n < 5 {
		t.Errorf("only %d values", n)
	}
}

// TestInteropServerTimestamps reads a variable whose source timestamps
// are an hour behind the server's clock: timestamps = "source" archives
// them as they are, timestamps = "server" archives the server's.
func TestInteropServerTimestamps(t *testing.T) {
	srv := startNodeServer(t, 1, 10)
	for _, mode := range []string{config.OPCUATimestampSource, config.OPCUATimestampServer} {
		t.Run(mode, func(t *testing.T) {
			c := stationConfig(t, srv.endpoint(), 0)
			c.Timestamps = mode
			ts := config.DefaultOPCUATagSpec()
			ts.Name, ts.Node, ts.Type, ts.SamplingInterval, ts.QueueSize = "t.skewed", "ns=1;s=skewed", "Double", 0, 100
			c.Tags = append(c.Tags, ts)
			st, tab, rec := runStation(t, c)
			waitFor(t, 30*time.Second, "a value", func() bool { return latest(tab, "t.skewed").Has })
			start := latest(tab, "t.skewed").V
			waitFor(t, 30*time.Second, "values", func() bool { return latest(tab, "t.skewed").V > start+10 })
			st.Stop()
			n := 0
			for _, p := range rec.byTag()["t.skewed"] {
				if p.Q != model.QualityGood {
					continue
				}
				n++
				lag := time.Since(time.UnixMilli(p.T))
				if mode == config.OPCUATimestampSource && (lag < 59*time.Minute || lag > 61*time.Minute) {
					t.Errorf("value %v stamped %v ago, want its source timestamp an hour ago", p.V, lag)
				}
				if mode == config.OPCUATimestampServer && (lag < 0 || lag > time.Minute) {
					t.Errorf("value %v stamped %v ago, want the server's timestamp (now)", p.V, lag)
				}
			}
			if n < 5 {
				t.Errorf("only %d values", n)
			}
		})
	}
}

// TestInteropHostileArrayLength runs a station against node-opcua through
// a proxy that rewrites, on the wire, the length of the server's 4-element
// array variable to -2 in every message: what a faulty server or anyone on
// the path of an unsecured channel can send. With gopcua v0.8.0 as
// released this panics in the secure channel's goroutine and kills the
// test binary; Pith's patched decoder refuses the message: the station
// counts errors, keeps the array's tags away from good, and stays up
// (its counter tag, in messages without the array, keeps coming).
func TestInteropHostileArrayLength(t *testing.T) {
	srv := startNodeServer(t, 1, 10)
	// Variant mask 0x8B (Double array), length 4, first element 1.5.
	genuine := []byte{0x8b, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f}
	hostile := []byte{0x8b, 0xfe, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f}
	px := newRewriter(t, fmt.Sprintf("127.0.0.1:%d", srv.port), genuine, hostile)
	c := stationConfig(t, "opc.tcp://"+px.addr()+"/pith", 1)
	c.RetryPause = config.Duration(200 * time.Millisecond)
	ts := config.DefaultOPCUATagSpec()
	ts.Name, ts.Node, ts.Type, ts.Count, ts.SamplingInterval = "arr.{i}", "ns=1;s=arr", "Double", 4, 0
	c.Tags = append(c.Tags, ts)
	st, tab, _ := runStation(t, c)
	waitFor(t, 30*time.Second, "a rewritten message", func() bool { return px.rewrites() > 0 })
	waitFor(t, 30*time.Second, "the decode error counted", func() bool { return st.cnt.errors.Load() > 0 })
	time.Sleep(2 * time.Second)
	for i := range 4 {
		if v := latest(tab, "arr."+string(rune('0'+i))); v.Q == model.QualityGood {
			t.Errorf("arr.%d = %+v from a malformed message, want no good value", i, v)
		}
	}
	st.cnt.mu.Lock()
	last := st.cnt.lastErr
	st.cnt.mu.Unlock()
	t.Logf("station errors %d, rewrites %d, last error %q, counter %+v", st.cnt.errors.Load(), px.rewrites(), last, latest(tab, "t.v0000"))
}

// rewriter is a TCP proxy that replaces every occurrence of from by to
// (of the same length) in what the server sends.
type rewriter struct {
	ln       net.Listener
	target   string
	from, to []byte
	mu       sync.Mutex
	n        int
}

func newRewriter(t testing.TB, target string, from, to []byte) *rewriter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rewriter{ln: ln, target: target, from: from, to: to}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(up, c); up.Close() }()
			go func() { r.copy(c, up); c.Close() }()
		}
	}()
	return r
}

func (r *rewriter) addr() string { return r.ln.Addr().String() }

func (r *rewriter) rewrites() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// copy forwards src to dst, rewriting. It holds back the last
// len(from)-1 bytes of each read until the next one (or 20 ms of
// silence), so that an occurrence split across reads is found too.
func (r *rewriter) copy(dst net.Conn, src net.Conn) {
	keep := len(r.from) - 1
	var buf []byte
	b := make([]byte, 64<<10)
	for {
		src.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := src.Read(b)
		buf = append(buf, b[:n]...)
		if k := bytes.Count(buf, r.from); k > 0 {
			r.mu.Lock()
			r.n += k
			r.mu.Unlock()
			buf = bytes.ReplaceAll(buf, r.from, r.to)
		}
		timeout := err != nil && errors.Is(err, os.ErrDeadlineExceeded)
		if err != nil && !timeout {
			dst.Write(buf)
			return
		}
		send := len(buf)
		if !timeout {
			send = max(0, len(buf)-keep)
		}
		if _, err := dst.Write(buf[:send]); err != nil {
			return
		}
		buf = append(buf[:0], buf[send:]...)
	}
}
