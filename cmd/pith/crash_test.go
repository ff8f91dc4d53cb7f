package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// pithBin is the pith binary the crash tests build once per test run.
var pithBin struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// buildPith returns the path of a pith binary built from this package
// (once per test process, shared by the tests that kill it); it skips the
// test when the go command is missing.
func buildPith(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not in PATH; it is needed to build pith")
	}
	pithBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "pith-crash-bin-")
		if err != nil {
			pithBin.err = err
			return
		}
		pithBin.path = filepath.Join(dir, "pith")
		build := exec.Command(goBin, "build", "-o", pithBin.path, ".")
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		pithBin.out, pithBin.err = build.CombinedOutput()
	})
	if pithBin.err != nil {
		t.Fatalf("build pith: %v\n%s", pithBin.err, pithBin.out)
	}
	return pithBin.path
}

// TestMain removes the binary buildPith made.
func TestMain(m *testing.M) {
	code := m.Run()
	if pithBin.path != "" {
		os.RemoveAll(filepath.Dir(pithBin.path))
	}
	os.Exit(code)
}

// TestKillDuringImport builds the real pith binary, imports through the
// HTTP API from several clients at once (small requests on the WAL path and
// large ones of 120k rows on the store's bulk path), SIGKILLs the server at
// random moments and restarts it, and checks after every restart that
//
//   - every acknowledged (200) request is stored whole, with its values,
//     and /latest shows its newest sample;
//   - every other request is stored whole or not at all, never in part,
//     and stays as the previous restart found it.
//
// A third of the requests import text values (quoted CSV values of text
// tags), on both paths, and are checked the same way.
//
// Rounds alternate durability "fsync" and "relaxed": a killed process
// (unlike a power cut) must lose no acknowledged write in either mode.
//
// Each request writes its own tags, so each is checkable on its own.
// It takes about half a minute; -short skips it.
//
//	go test -run TestKillDuringImport -v ./cmd/pith
func TestKillDuringImport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pith and kills it repeatedly; skipped with -short")
	}
	bin := buildPith(t)
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data")
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	st := &killState{}
	const kills = 5
	// Rounds alternate the durability mode, and use a small head so that
	// flushes and merges run (and get killed) while importing.
	configs := make([]string, 2)
	for i, mode := range []string{"fsync", "relaxed"} {
		configs[i] = filepath.Join(tmp, mode+".toml")
		cfg := fmt.Sprintf("[store]\ndurability = %q\nhead_max_samples = 50000\n", mode)
		if err := os.WriteFile(configs[i], []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for round := 0; round <= kills; round++ {
		srv := startPith(t, bin, data, configs[round%2], filepath.Join(tmp, fmt.Sprintf("pith-%d.log", round)))
		// Between kills the requests of the last round are checked; at the
		// end every request, so earlier ones must have stayed as they were.
		st.check(t, srv.base, round, round == kills)
		if round == kills {
			srv.stop(t)
			break
		}
		// Import for a random while, then cut the process down.
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				st.importer(ctx, srv.base, w, false)
			}(w)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.importer(ctx, srv.base, 4, true)
		}()
		time.Sleep(time.Duration(1500+rnd.IntN(2500)) * time.Millisecond)
		srv.kill(t)
		cancel()
		wg.Wait()
	}
	var acked, large int
	for _, r := range st.reqs {
		if r.acked {
			acked++
			if r.large {
				large++
			}
		}
	}
	t.Logf("%d requests over %d kills: %d acknowledged (%d large, bulk path)", len(st.reqs), kills, acked, large)
	if large == 0 {
		t.Log("no large request was acknowledged: the bulk path was only exercised unacknowledged")
	}
}

// pithProc is a running pith serve.
type pithProc struct {
	pid   int
	waitc chan error // receives the exit status once
	base  string
	log   string
}

// startPith starts pith serve on a free port and waits until it answers.
func startPith(t *testing.T, bin, data, config, logPath string) *pithProc {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", config, "--data", data, "--listen", addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pith: %v", err)
	}
	logf.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	p := &pithProc{pid: cmd.Process.Pid, waitc: exited, base: "http://" + addr, log: logPath}
	// Recovery replays the WAL; allow it a generous while on a busy box.
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); {
		select {
		case err := <-exited:
			t.Fatalf("pith exited during start: %v\n%s", err, readLog(logPath))
		default:
		}
		resp, err := http.Get(p.base + "/api/v1/tags")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Kill()
	t.Fatalf("pith did not answer within 60 s\n%s", readLog(logPath))
	return nil
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *pithProc) kill(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(p.pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill pith: %v", err)
	}
	<-p.waitc
}

// stop sends SIGTERM and expects a clean exit.
func (p *pithProc) stop(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(p.pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stop pith: %v", err)
	}
	if err := <-p.waitc; err != nil {
		t.Fatalf("pith exited with %v after SIGTERM\n%s", err, readLog(p.log))
	}
}

// killReq is one import request. Its rows are tag k (small) or tags k.0
// .. k.11 (large), timestamps t0 + i s, values k + i/1e4.
type killReq struct {
	id    int
	large bool
	text  bool // the rows are text values (textValue)
	tags  []string
	rows  int // per tag
	acked bool
	state int // after the last restart: 0 unknown, 1 present, 2 absent
}

const (
	killT0        = int64(1_700_000_000_000)
	largeTags     = 12
	largeRowsEach = 10_000
)

func (r *killReq) value(i int) float64 { return float64(r.id) + float64(i)/1e4 }

// textValue is row i's value in a text request.
func (r *killReq) textValue(i int) string { return fmt.Sprintf("r%d «%d», \"q\"", r.id, i) }

// want returns row i's value as the JSON API shows it.
func (r *killReq) want(i int) any {
	if r.text {
		return r.textValue(i)
	}
	return r.value(i)
}

func (r *killReq) body() []byte {
	var b bytes.Buffer
	b.Grow(len(r.tags) * r.rows * 40)
	for i := 0; i < r.rows; i++ {
		for _, tag := range r.tags {
			b.WriteString(tag)
			b.WriteByte(',')
			b.WriteString(strconv.FormatInt(killT0+int64(i)*1000, 10))
			b.WriteByte(',')
			if r.text {
				b.WriteString(`"r` + strconv.Itoa(r.id) + ` «` + strconv.Itoa(i) + `», ""q"""`)
			} else {
				b.WriteString(strconv.FormatFloat(r.value(i), 'g', -1, 64))
			}
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

type killState struct {
	mu      sync.Mutex
	reqs    []*killReq
	checked int // requests before this index were checked after a restart
	next    atomic.Int64
}

func (s *killState) newReq(rnd *rand.Rand, large bool) *killReq {
	r := &killReq{id: int(s.next.Add(1)), large: large, text: rnd.IntN(3) == 0}
	kind := "crash"
	if r.text {
		kind = "crash.text"
	}
	if large {
		r.rows = largeRowsEach
		for j := 0; j < largeTags; j++ {
			r.tags = append(r.tags, fmt.Sprintf("%s.large.%d.%d", kind, r.id, j))
		}
	} else {
		r.rows = 1 + rnd.IntN(500)
		r.tags = []string{fmt.Sprintf("%s.small.%d", kind, r.id)}
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
	return r
}

// importer posts requests until ctx ends or the server is gone.
func (s *killState) importer(ctx context.Context, base string, w int, large bool) {
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
	client := &http.Client{Timeout: 60 * time.Second}
	for ctx.Err() == nil {
		r := s.newReq(rnd, large)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/import", bytes.NewReader(r.body()))
		if err != nil {
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			return // the server is gone: this request is unacknowledged
		}
		var out struct {
			Points int `json:"points"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK && out.Points == r.rows*len(r.tags) {
			s.mu.Lock()
			r.acked = true
			s.mu.Unlock()
		}
	}
}

// check verifies every request against a freshly restarted server.
func (s *killState) check(t *testing.T, base string, round int, all bool) {
	t.Helper()
	latest := fetchLatest(t, base)
	s.mu.Lock()
	reqs := append([]*killReq(nil), s.reqs...)
	if !all {
		reqs = reqs[s.checked:]
	}
	s.checked = len(s.reqs)
	s.mu.Unlock()
	type result struct {
		r       *killReq
		present int // tags stored whole
		err     string
	}
	work := make(chan *killReq)
	results := make(chan result)
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				res := result{r: r}
				for _, tag := range r.tags {
					n, err := checkTag(base, r, tag)
					if err != "" {
						res.err = err
						break
					}
					if n == r.rows {
						res.present++
					} else if n != 0 {
						res.err = fmt.Sprintf("tag %s holds %d of %d rows", tag, n, r.rows)
						break
					}
				}
				results <- res
			}
		}()
	}
	go func() {
		for _, r := range reqs {
			work <- r
		}
		close(work)
		wg.Wait()
		close(results)
	}()
	var failures []string
	for res := range results {
		r := res.r
		switch {
		case res.err != "":
			failures = append(failures, fmt.Sprintf("request %d (acked %v): %s", r.id, r.acked, res.err))
		case res.present == len(r.tags):
			if r.state == 2 {
				failures = append(failures, fmt.Sprintf("request %d was absent after an earlier restart and came back", r.id))
			}
			r.state = 1
			last := r.tags[len(r.tags)-1]
			want := killT0 + int64(r.rows-1)*1000
			if l, ok := latest[last]; !ok || l.TS != want || l.Value != r.want(r.rows-1) {
				failures = append(failures, fmt.Sprintf("request %d: /latest for %s is %+v, want ts %d value %v", r.id, last, l, want, r.want(r.rows-1)))
			}
		case res.present == 0 && r.acked:
			failures = append(failures, fmt.Sprintf("acknowledged request %d (%d rows, large %v) is lost", r.id, r.rows*len(r.tags), r.large))
		case res.present == 0:
			if r.state == 1 {
				failures = append(failures, fmt.Sprintf("request %d was present after an earlier restart and is gone", r.id))
			}
			r.state = 2
		default:
			failures = append(failures, fmt.Sprintf("request %d (acked %v) is half stored: %d of %d tags", r.id, r.acked, res.present, len(r.tags)))
		}
	}
	if len(failures) > 0 {
		if len(failures) > 20 {
			failures = append(failures[:20], fmt.Sprintf("... and %d more", len(failures)-20))
		}
		t.Fatalf("after restart %d:\n%s", round, joinLines(failures))
	}
}

func joinLines(s []string) string {
	var b bytes.Buffer
	for _, l := range s {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// checkTag returns how many of r's rows tag holds, or a description of
// what is wrong (a wrong value, a stray sample).
func checkTag(base string, r *killReq, tag string) (int, string) {
	q := url.Values{"tag": {tag}, "agg": {"raw"}, "from": {strconv.FormatInt(killT0, 10)},
		"to": {strconv.FormatInt(killT0+int64(r.rows)*1000, 10)}, "points": {strconv.Itoa(r.rows + 1)}}
	resp, err := http.Get(base + "/api/v1/data?" + q.Encode())
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return 0, ""
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Sprintf("GET data %s: %s %s", tag, resp.Status, body)
	}
	var out struct {
		Points [][2]any `json:"points"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return 0, fmt.Sprintf("decode data %s: %v", tag, err)
	}
	for i, p := range out.Points {
		ms, ok := p[0].(float64)
		if i >= r.rows || !ok || p[1] == nil {
			return 0, fmt.Sprintf("tag %s: unexpected point %d", tag, i)
		}
		if int64(ms) != killT0+int64(i)*1000 || p[1] != r.want(i) {
			return 0, fmt.Sprintf("tag %s point %d: got [%v %v], want [%d %v]", tag, i, p[0], p[1], killT0+int64(i)*1000, r.want(i))
		}
	}
	return len(out.Points), ""
}

type latestValue struct {
	Tag   string `json:"tag"`
	TS    int64  `json:"ts"`
	Value any    `json:"value"` // float64, or string for a text tag
}

func fetchLatest(t *testing.T, base string) map[string]latestValue {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/latest")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Values []latestValue `json:"values"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("decode /latest: %v", err)
	}
	m := make(map[string]latestValue, len(out.Values))
	for _, v := range out.Values {
		m[v.Tag] = v
	}
	return m
}
