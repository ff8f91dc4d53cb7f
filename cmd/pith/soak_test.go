package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/testpeer"
)

// The soak's load, about 1,000 values/s in total (system and forwarder
// tags come on top).
const (
	soakMBPeriod    = 100 * time.Millisecond // Modbus poll period: 9 tags, 90 values/s
	soakMBWords     = 8                      // uint16 counter registers beside the uint32 one
	soakLPPeriod    = 100 * time.Millisecond // one line protocol post per period...
	soakLPLines     = 6                      // ...of this many lines (timestamps)...
	soakLPFields    = 10                     // ...of this many fields: 600 values/s
	soakMQPeriod    = 20 * time.Millisecond  // one MQTT message per period...
	soakMQKeys      = 5                      // ...of this many values: 250 values/s
	soakEvPeriod    = 500 * time.Millisecond // one event post per period...
	soakEvBatch     = 5                      // ...of this many events
	soakQueryPause  = 250 * time.Millisecond // between two queries
	soakSampleEvery = 10 * time.Second       // between two samples of the process
	soakRawPage     = 100000                 // points per raw read-back request
)

// soakPlan is the schedule of one soak run. A run of an hour or more
// follows the stated plan (reference window minutes 5-7, a reload every
// 5 minutes, a backup every 10); shorter validation runs scale it so that
// each of them still warms up, reloads and backs up.
type soakPlan struct {
	dur         time.Duration
	warm        time.Duration // samples before it are not judged
	ref         time.Duration // the reference window [warm, warm+ref)
	reloadEvery time.Duration
	backupEvery time.Duration
	headMaxAge  time.Duration // store.head_max_age; 0: the binary's default (10 minutes)
}

func newSoakPlan(d time.Duration) soakPlan {
	p := soakPlan{dur: d, warm: 5 * time.Minute, ref: 2 * time.Minute,
		reloadEvery: 5 * time.Minute, backupEvery: 10 * time.Minute}
	if d < 20*time.Minute {
		p.warm, p.ref, p.reloadEvery, p.backupEvery = d/4, d/6, d/4, d/2
		// The head must flush well inside the warm-up of a short run.
		p.headMaxAge = min(time.Minute, (p.warm / 2).Truncate(time.Second))
	}
	return p
}

// soakAllowance is the absolute slack added to the 10% bound, for small
// counts where one more goroutine or file is already several percent.
var soakAllowance = map[string]float64{"rss_bytes": 0, "goroutines": 5, "fds": 5}

// TestSoak runs a real `pith serve` under the whole box's load for
// PITH_SOAK_MINUTES (default 60): a Modbus counter device polled every
// 100 ms, line protocol, MQTT, events and queries, forwarding to
// PostgreSQL and NATS, a reload (SIGHUP) every 5 minutes and a backup
// every 10. Every 10 s it samples the process from outside (RSS,
// goroutines, open files, bytes written, stored points). It asserts that
// memory, goroutines and files stay within 10% of their level after the
// warm-up, that no counter tag has a gap or a repeat, locally and in
// PostgreSQL, and reports bytes written per stored point. The samples go
// to $PITH_SOAK_OUT (default a new temporary directory) as soak.csv and
// soak.svg. Runs of 20 minutes or more run the default config (a
// 10-minute head); shorter ones set store.head_max_age to at most a minute.
// PITH_SOAK_HEAD_MAX_AGE sets another duration, or "default" for the
// binary's own. It runs only with PITH_LONG=1:
//
//	PITH_LONG=1 PITH_SOAK_MINUTES=10 PITH_TEST_PG=postgres://postgres@127.0.0.1:5432/test \
//	  PITH_TEST_NATS=nats://127.0.0.1:4222 PITH_TEST_MQTT=127.0.0.1:1883 \
//	  go test -run '^TestSoak$' -v -timeout 0 ./cmd/pith
func TestSoak(t *testing.T) {
	if os.Getenv("PITH_LONG") != "1" || testing.Short() {
		t.Skip("soak test of a real pith serve under load for PITH_SOAK_MINUTES (default 60): set PITH_LONG=1 to run it")
	}
	pgURL := testpeer.Env(t, "PITH_TEST_PG", "postgres://postgres@127.0.0.1:5432/test")
	natsURL := testpeer.Env(t, "PITH_TEST_NATS", "nats://127.0.0.1:4222")
	mqttAddr := testpeer.Env(t, "PITH_TEST_MQTT", "127.0.0.1:1883")
	if !strings.Contains(mqttAddr, "://") {
		mqttAddr = "tcp://" + mqttAddr
	}
	out := os.Getenv("PITH_SOAK_OUT")
	if out == "" {
		var err error
		if out, err = os.MkdirTemp("", "pith-soak-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	plan := newSoakPlan(soakMinutes(t))
	if v := os.Getenv("PITH_SOAK_HEAD_MAX_AGE"); v == "default" {
		plan.headMaxAge = 0 // the binary's default
	} else if v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("PITH_SOAK_HEAD_MAX_AGE=%q: want a duration or \"default\"", v)
		}
		plan.headMaxAge = d
	}
	bin := buildPith(t)
	prof := soakProfile(t)
	if prof > 0 {
		bin = buildProfiledPith(t, out)
	}
	tmp := t.TempDir()
	s := &soak{t: t, plan: plan, out: out, bin: bin, id: strconv.FormatInt(time.Now().UnixNano()%1e9, 36),
		cfgPath: filepath.Join(tmp, "pith.toml"), data: filepath.Join(tmp, "data"), backupDir: filepath.Join(tmp, "backup"),
		pgURL: pgURL, natsURL: natsURL, mqttURL: mqttAddr, profile: prof}
	s.dev = startCounterDevice(t)
	s.makeKey()
	s.writeConfig(0)
	s.start()
	t.Logf("soak %s: %v, pid %d, output in %s", s.id, plan.dur, s.proc.pid, out)
	defer s.cleanup()
	s.run()
	s.finish()
}

// soak is one soak run: the process, its load and what was measured.
type soak struct {
	t                            *testing.T
	plan                         soakPlan
	id, out, bin, cfgPath, data  string
	backupDir                    string
	pgURL, natsURL, mqttURL, key string
	keyEntry                     string
	profile                      time.Duration // heap profiles every this long (PITH_SOAK_PROFILE); 0: none
	proc                         *pithProc
	dev                          *counterDevice
	client                       *http.Client
	t0                           time.Time
	stopLoad                     chan struct{}
	lp, mq, ev, qr               soakCounts
	mu                           sync.Mutex // guards what follows
	samples                      []soakSample
	reloads, backups             []soakEvent
	backupBytes                  int64
	failures                     []string
	stopped                      bool
}

// soakCounts counts what one load client did.
type soakCounts struct {
	ok, retries, errs atomic.Int64
	maxLatency        atomic.Int64 // ns
}

func (c *soakCounts) latency(d time.Duration) {
	for {
		old := c.maxLatency.Load()
		if int64(d) <= old || c.maxLatency.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// soakEvent is a reload or a backup, for the gap measurement around it.
type soakEvent struct {
	at   time.Time
	took time.Duration
	note string
}

// soakSample is one reading of the process from outside.
type soakSample struct {
	t                  time.Duration // since the start
	rss, rssAnon       int64         // VmRSS, RssAnon (bytes)
	goroutines, fds    int64
	writeBytes, points int64   // /proc/PID/io write_bytes; pith.sys.store.points
	heap, storeBytes   int64   // pith.sys.process.heap_bytes, pith.sys.store.bytes
	load1              float64 // the host's 1-minute load average
}

// soakMinutes is the soak's length: PITH_SOAK_MINUTES, 60 by default.
func soakMinutes(t *testing.T) time.Duration {
	minutes := 60.0
	if s := os.Getenv("PITH_SOAK_MINUTES"); s != "" {
		m, err := strconv.ParseFloat(s, 64)
		if err != nil || m <= 0 {
			t.Fatalf("PITH_SOAK_MINUTES=%q: want a positive number of minutes", s)
		}
		minutes = m
	}
	return time.Duration(minutes * float64(time.Minute))
}

func (s *soak) fail(format string, args ...any) {
	s.mu.Lock()
	s.failures = append(s.failures, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

// makeKey asks `pith key` for an admin key and its config entry.
func (s *soak) makeKey() {
	out, err := exec.Command(s.bin, "key", "--scope", "admin", "soak").Output()
	if err != nil {
		s.t.Fatalf("pith key: %v", err)
	}
	m := regexp.MustCompile(`Bearer (\S+)`).FindSubmatch(out)
	if m == nil {
		s.t.Fatalf("pith key printed no key:\n%s", out)
	}
	s.key, s.keyEntry = string(m[1]), string(out)
}

// writeConfig writes variant 0 or 1 of the config; they differ only in an
// alarm that never fires, which a reload adds and removes without
// touching the acquisition. (A [[calc]] would not do: calcs change only
// with a restart, so a reload would apply nothing.)
func (s *soak) writeConfig(variant int) {
	var b strings.Builder
	fmt.Fprintf(&b, "[site]\nname = %q\n\n[log]\nlevel = \"info\"\n\n", "soak"+s.id)
	if s.plan.headMaxAge > 0 {
		fmt.Fprintf(&b, "[store]\nhead_max_age = %q\n\n", s.plan.headMaxAge.String())
	}
	b.WriteString(s.keyEntry)
	fmt.Fprintf(&b, "\n[events]\nenabled = true\n\n[mqtt]\nenabled = true\nbroker = %q\ntopics = [%q]\nprefix = %q\nclient_id = %q\n\n",
		strings.Replace(s.mqttURL, "tcp://", "mqtt://", 1), "pith-soak-"+s.id+"/#", "pith-soak-"+s.id+"/", "pith-soak-"+s.id)
	fmt.Fprintf(&b, "[[modbus.client]]\nname = \"soakdev\"\nurl = %q\nunit = 1\nperiod = %q\ntimeout = \"1s\"\n", "tcp://"+s.dev.addr, soakMBPeriod.String())
	fmt.Fprintf(&b, "tags = [\n  { name = \"soak.mb.c32\", register = \"holding:0\", type = \"uint32\" },\n"+
		"  { name = \"soak.mb.r{i}\", register = \"holding:2\", type = \"uint16\", count = %d },\n]\n\n", soakMBWords)
	fmt.Fprintf(&b, "[[forward.postgres]]\nname = \"soakpg\"\nurl = %q\ntable = %q\n\n", s.pgURL, s.pgTable())
	fmt.Fprintf(&b, "[[forward.nats]]\nname = \"soaknats\"\nurl = %q\n\n", s.natsURL)
	b.WriteString("[alarms]\nenabled = true\n")
	if variant == 1 {
		b.WriteString("\n[[alarms.alarm]]\nname = \"soak.c32.hi\"\ntype = \"hi\"\ntag = \"soak.mb.c32\"\nlimit = 1e12\n")
	}
	if err := os.WriteFile(s.cfgPath, []byte(b.String()), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

func (s *soak) pgTable() string { return "pith_soak_" + s.id }

// start runs pith serve and waits until it is ready.
func (s *soak) start() {
	t := s.t
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logPath := filepath.Join(s.out, "pith.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(s.bin, "serve", "--config", s.cfgPath, "--data", s.data, "--listen", addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = s.profileEnv()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pith: %v", err)
	}
	logf.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.proc = &pithProc{pid: cmd.Process.Pid, waitc: exited, base: "http://" + addr, log: logPath}
	s.client = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("pith exited during start: %v\n%s", err, readLog(logPath))
		default:
		}
		if resp, err := http.Get(s.proc.base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				s.t0 = time.Now()
				return
			}
		}
	}
	cmd.Process.Kill()
	t.Fatalf("pith was not ready within 60 s\n%s", readLog(logPath))
}

// do sends one request with the key and returns the status and body.
func (s *soak) do(method, path, ctype string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, s.proc.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// run drives the load for the planned duration.
func (s *soak) run() {
	s.stopLoad = make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range []func(){s.lineWriter, s.mqttPublisher, s.eventPoster, s.querier} {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	s.sample()
	sampleT := time.NewTicker(soakSampleEvery)
	defer sampleT.Stop()
	nextReload, nextBackup := s.plan.reloadEvery, s.plan.backupEvery
	variant := 0
	for end := s.t0.Add(s.plan.dur); time.Now().Before(end); {
		select {
		case <-sampleT.C:
			s.sample()
		case err := <-s.proc.waitc:
			s.proc.waitc <- err
			s.t.Fatalf("pith exited during the soak: %v\n%s", err, readLog(s.proc.log))
		case <-time.After(time.Until(end)):
		}
		el := time.Since(s.t0)
		if el >= nextReload && el < s.plan.dur-soakSampleEvery {
			variant = 1 - variant
			s.reload(variant)
			nextReload += s.plan.reloadEvery
		}
		if el >= nextBackup && el < s.plan.dur-soakSampleEvery {
			s.backup()
			nextBackup += s.plan.backupEvery
		}
	}
	close(s.stopLoad)
	wg.Wait()
	s.sample()
}

// lineWriter posts line protocol: each line is the next integer in every
// field, each line a millisecond of its own. A refused post is retried
// as it was until it is acknowledged.
func (s *soak) lineWriter() {
	var n int64
	var lastTS int64
	tick := time.NewTicker(soakLPPeriod)
	defer tick.Stop()
	for {
		select {
		case <-s.stopLoad:
			return
		case <-tick.C:
		}
		var b bytes.Buffer
		for range soakLPLines {
			n++
			lastTS = max(lastTS+1, time.Now().UnixMilli())
			b.WriteString("soaklp ")
			for f := range soakLPFields {
				if f > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "f%d=%di", f, n)
			}
			fmt.Fprintf(&b, " %d\n", lastTS)
		}
		for try := 0; ; try++ {
			t0 := time.Now()
			code, body, err := s.do("POST", "/write?db=soak&precision=ms", "text/plain", b.Bytes())
			s.lp.latency(time.Since(t0))
			if err == nil && code == http.StatusNoContent {
				s.lp.ok.Add(soakLPLines)
				break
			}
			s.lp.retries.Add(1)
			if try == 0 || try%100 == 0 {
				s.t.Logf("line protocol post: %d %s %v (retrying)", code, body, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// mqttPublisher publishes one JSON message per period under the run's own
// topic root: every key the next integer, dated by "time".
func (s *soak) mqttPublisher() {
	u, err := url.Parse(s.mqttURL)
	if err != nil {
		s.fail("parse mqtt url: %v", err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{ServerUrls: []*url.URL{u}, KeepAlive: 30,
		CleanStartOnInitialConnection: true, ClientConfig: paho.ClientConfig{ClientID: "pith-soak-pub-" + s.id}})
	if err != nil {
		s.fail("connect mqtt publisher: %v", err)
		return
	}
	defer cm.Disconnect(context.Background())
	if err := cm.AwaitConnection(ctx); err != nil {
		s.fail("connect mqtt publisher: %v", err)
		return
	}
	topic := "pith-soak-" + s.id + "/soakmq"
	var n, lastTS int64
	tick := time.NewTicker(soakMQPeriod)
	defer tick.Stop()
	for {
		select {
		case <-s.stopLoad:
			return
		case <-tick.C:
		}
		n++
		lastTS = max(lastTS+1, time.Now().UnixMilli())
		var b bytes.Buffer
		b.WriteByte('{')
		for k := range soakMQKeys {
			fmt.Fprintf(&b, `"c%d":%d,`, k, n)
		}
		fmt.Fprintf(&b, `"time":%d.%03d}`, lastTS/1000, lastTS%1000)
		for try := 0; ; try++ {
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			t0 := time.Now()
			_, err := cm.Publish(pctx, &paho.Publish{Topic: topic, QoS: 1, Payload: b.Bytes()})
			pcancel()
			s.mq.latency(time.Since(t0))
			if err == nil {
				s.mq.ok.Add(1)
				break
			}
			s.mq.retries.Add(1)
			if try == 0 {
				s.t.Logf("mqtt publish: %v (retrying)", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// eventPoster posts batches of events with ids of their own.
func (s *soak) eventPoster() {
	var n int64
	tick := time.NewTicker(soakEvPeriod)
	defer tick.Stop()
	for {
		select {
		case <-s.stopLoad:
			return
		case <-tick.C:
		}
		var b bytes.Buffer
		for range soakEvBatch {
			n++
			fmt.Fprintf(&b, `{"id":"soak-%s-%d","name":"soak.tick","source":{"device":"soak"},"num":{"n":%d}}`+"\n", s.id, n, n)
		}
		t0 := time.Now()
		code, body, err := s.do("POST", "/api/v1/events", "application/x-ndjson", b.Bytes())
		s.ev.latency(time.Since(t0))
		var res struct{ Accepted, Duplicates int }
		if err == nil && code == http.StatusOK && json.Unmarshal(body, &res) == nil && res.Accepted == soakEvBatch {
			s.ev.ok.Add(soakEvBatch)
			continue
		}
		s.ev.errs.Add(1)
		s.t.Logf("event post: %d %s %v", code, body, err)
	}
}

// querier runs the dashboard's and Grafana's kinds of query in turn.
func (s *soak) querier() {
	for i := 0; ; i++ {
		select {
		case <-s.stopLoad:
			return
		case <-time.After(soakQueryPause):
		}
		now := time.Now().UnixMilli()
		var path string
		switch i % 4 {
		case 0:
			path = fmt.Sprintf("/api/v1/data?tag=soaklp.f0&agg=mean&points=200&from=%d&to=%d", now-600_000, now)
		case 1:
			path = fmt.Sprintf("/api/v1/data?tag=soak.mb.c32&agg=raw&points=1000&from=%d&to=%d", now-60_000, now)
		case 2:
			path = "/api/v1/latest"
		case 3:
			path = fmt.Sprintf("/api/v1/query_range?query=%s&start=%d&end=%d&step=10",
				url.QueryEscape("avg_over_time(soakmq_c0[1m])"), now/1000-600, now/1000)
		}
		t0 := time.Now()
		code, body, err := s.do("GET", path, "", nil)
		s.qr.latency(time.Since(t0))
		if err == nil && code == http.StatusOK {
			s.qr.ok.Add(1)
			continue
		}
		s.qr.errs.Add(1)
		s.t.Logf("query %s: %d %.200s %v", path, code, body, err)
	}
}

// reload switches the config file to variant and sends SIGHUP, then waits
// for the log to say the reload was applied.
func (s *soak) reload(variant int) {
	before := strings.Count(readFull(s.proc.log), "config reloaded")
	s.writeConfig(variant)
	at := time.Now()
	if err := syscall.Kill(s.proc.pid, syscall.SIGHUP); err != nil {
		s.t.Fatalf("send SIGHUP: %v", err)
	}
	for deadline := at.Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		log := readFull(s.proc.log)
		if strings.Count(log, "config reloaded") > before {
			line := log[strings.LastIndex(log, "config reloaded")+len(`config reloaded" `):]
			line, _, _ = strings.Cut(line, "\n")
			if !strings.Contains(line, "restart_needed=[]") {
				s.fail("reload to variant %d: %s: the change was not applied", variant, line)
			}
			s.mu.Lock()
			s.reloads = append(s.reloads, soakEvent{at: at, took: time.Since(at), note: line})
			s.mu.Unlock()
			return
		}
	}
	s.fail("reload to variant %d at %v: not applied within 30 s", variant, at.Sub(s.t0).Round(time.Second))
}

// backup asks the running server for an incremental backup.
func (s *soak) backup() {
	at := time.Now()
	body, _ := json.Marshal(map[string]string{"dest": s.backupDir})
	code, resp, err := s.do("POST", "/api/v1/admin/backup", "application/json", body)
	var res struct {
		CopiedBytes int64 `json:"copied_bytes"`
		LockHeldNS  int64 `json:"lock_held_ns"`
	}
	if err != nil || code != http.StatusOK || json.Unmarshal(resp, &res) != nil {
		s.fail("backup at %v: %d %s %v", at.Sub(s.t0).Round(time.Second), code, resp, err)
		return
	}
	s.mu.Lock()
	s.backupBytes += res.CopiedBytes
	s.backups = append(s.backups, soakEvent{at: at, took: time.Since(at),
		note: fmt.Sprintf("copied %d B, lock held %v", res.CopiedBytes, time.Duration(res.LockHeldNS))})
	s.mu.Unlock()
}

// sample reads the process from outside: /proc for memory, files and
// bytes written, /metrics for goroutines and stored points.
func (s *soak) sample() {
	pid := s.proc.pid
	sm := soakSample{t: time.Since(s.t0)}
	status := readFull(fmt.Sprintf("/proc/%d/status", pid))
	sm.rss, sm.rssAnon = procField(status, "VmRSS:")*1024, procField(status, "RssAnon:")*1024
	sm.writeBytes = procField(readFull(fmt.Sprintf("/proc/%d/io", pid)), "write_bytes:")
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		sm.fds = int64(len(ents))
	}
	if f := strings.Fields(readFull("/proc/loadavg")); len(f) > 0 {
		sm.load1, _ = strconv.ParseFloat(f[0], 64)
	}
	m := s.metrics()
	sm.goroutines, sm.heap = int64(m["pith_sys_process_goroutines"]), int64(m["pith_sys_process_heap_bytes"])
	sm.points, sm.storeBytes = int64(m["pith_sys_store_points"]), int64(m["pith_sys_store_bytes"])
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	s.mu.Unlock()
}

// metrics reads /metrics into name -> value; a counter is there with and
// without its "_total".
func (s *soak) metrics() map[string]float64 {
	m := map[string]float64{}
	code, body, err := s.do("GET", "/metrics", "", nil)
	if err != nil || code != http.StatusOK {
		s.t.Logf("GET /metrics: %d %v", code, err)
		return m
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		if v, err := strconv.ParseFloat(strings.Fields(val)[0], 64); ok && err == nil {
			m[name] = v
			m[strings.TrimSuffix(name, "_total")] = v
		}
	}
	return m
}

// counterDevice is a Modbus server whose holding registers count polls:
// every read starting at register 0 sees the next counter value, in
// registers 0-1 (uint32) and, plus 1000*i, in register 2+i (uint16).
type counterDevice struct {
	srv   *modbus.Server
	addr  string
	reads atomic.Uint32
}

func startCounterDevice(t *testing.T) *counterDevice {
	t.Helper()
	srv := modbus.NewServer(modbus.ServerOptions{Addr: "127.0.0.1:0", HoldingRegisters: 2 + soakMBWords,
		InputRegisters: -1, Coils: -1, DiscreteInputs: -1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &counterDevice{srv: srv, addr: ln.Addr().String()}
	go srv.Serve(&counterListener{Listener: ln, d: d})
	t.Cleanup(func() { srv.Close() })
	return d
}

// advance moves the counter on before the server answers a read.
func (d *counterDevice) advance() {
	n := d.reads.Add(1)
	regs := []uint16{uint16(n >> 16), uint16(n)}
	for i := range soakMBWords {
		regs = append(regs, uint16(n+1000*uint32(i)))
	}
	d.srv.Bank().SetRegisters(modbus.HoldingRegisters, 0, regs...)
}

// counterListener hands the server connections that see every request.
type counterListener struct {
	net.Listener
	d *counterDevice
}

func (l *counterListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &counterConn{Conn: c, d: l.d}, nil
}

// counterConn gives the server one request frame per Read, advancing the
// counter before each read of register 0, so that requests pipelined in
// one TCP segment still see one value each.
type counterConn struct {
	net.Conn
	d   *counterDevice
	buf []byte
	tmp [512]byte
}

func (c *counterConn) Read(p []byte) (int, error) {
	for {
		n, err := modbus.TCPFrameLen(c.buf)
		if err != nil || (n > 0 && len(c.buf) >= n) {
			if err != nil {
				n = len(c.buf) // not Modbus: let the server refuse it
			} else if _, pdu, err := modbus.ParseTCPFrame(c.buf[:n]); err == nil && len(pdu) >= 5 &&
				pdu[0] == byte(modbus.FuncReadHoldingRegisters) && binary.BigEndian.Uint16(pdu[1:]) == 0 {
				c.d.advance()
			}
			k := copy(p, c.buf[:n])
			c.buf = c.buf[k:]
			return k, nil
		}
		k, err := c.Conn.Read(c.tmp[:])
		c.buf = append(c.buf, c.tmp[:k]...)
		if err != nil {
			return 0, err
		}
	}
}

// soakSeries is what the read-back of one counter tag found.
type soakSeries struct {
	tag                string
	mod                float64 // the counter's modulus; 0: none
	n                  int
	firstTS, lastTS    int64
	first, last        float64
	gaps, missing, rep int   // breaks in the count, values skipped, repeats or steps back
	dupTS              int   // samples at the timestamp of the previous one
	maxDT              int64 // longest interval between samples, ms
	ts                 []int64
	worst              string
}

// readSeries reads a tag's raw samples in [from, to) page by page and
// checks that its values count up by one (modulo mod when not 0).
func (s *soak) readSeries(tag string, from, to int64, mod float64) (*soakSeries, error) {
	r := &soakSeries{tag: tag, mod: mod}
	for from < to {
		q := url.Values{"tag": {tag}, "agg": {"raw"}, "from": {itoa(from)}, "to": {itoa(to)}, "points": {itoa(soakRawPage)}}
		code, body, err := s.do("GET", "/api/v1/data?"+q.Encode(), "", nil)
		if err != nil || code != http.StatusOK {
			return nil, fmt.Errorf("read %s: %d %.200s %v", tag, code, body, err)
		}
		var page struct{ Points [][2]float64 }
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, fmt.Errorf("decode %s: %w", tag, err)
		}
		for _, p := range page.Points {
			r.add(int64(p[0]), p[1])
		}
		if len(page.Points) < soakRawPage {
			break
		}
		from = r.lastTS + 1
	}
	return r, nil
}

// add checks the next sample against the previous one.
func (r *soakSeries) add(ts int64, v float64) {
	if r.n == 0 {
		r.firstTS, r.first = ts, v
	} else {
		d := v - r.last
		if r.mod > 0 {
			d = math.Mod(d+r.mod, r.mod)
		}
		switch {
		case d == 1:
		case d > 1:
			r.gaps++
			r.missing += int(d) - 1
		default:
			r.rep++
		}
		if d != 1 && r.worst == "" {
			r.worst = fmt.Sprintf("%v at %d after %v at %d", v, ts, r.last, r.lastTS)
		}
		if ts == r.lastTS {
			r.dupTS++
		}
		r.maxDT = max(r.maxDT, ts-r.lastTS)
	}
	r.n++
	r.lastTS, r.last = ts, v
	r.ts = append(r.ts, ts)
}

// soakTags lists the counter tags with their modulus (0: none) and the
// number of samples the clients had acknowledged (-1: polled, unknown).
func (s *soak) soakTags() (tags []string, mods map[string]float64, want map[string]int64) {
	mods, want = map[string]float64{}, map[string]int64{}
	add := func(tag string, mod float64, n int64) {
		tags = append(tags, tag)
		mods[tag], want[tag] = mod, n
	}
	add("soak.mb.c32", 0, -1)
	for i := range soakMBWords {
		add(fmt.Sprintf("soak.mb.r%d", i), 65536, -1)
	}
	for f := range soakLPFields {
		add(fmt.Sprintf("soaklp.f%d", f), 0, s.lp.ok.Load())
	}
	for k := range soakMQKeys {
		add(fmt.Sprintf("soakmq.c%d", k), 0, s.mq.ok.Load())
	}
	return tags, mods, want
}
