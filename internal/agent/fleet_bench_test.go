package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/testpeer"
)

// The fleet: simulated edge sites publish what an edge's NATS forwarder
// publishes (forward.NATSSink, one connection per site, one message of
// every tag per interval) into a three-node JetStream cluster whose
// servers split the sites into partitions by subject; each central Pith is
// a `pith serve` process of its own consuming one partition. See
// docs/fleet.md.

// fleetOpts shape one fleet run.
type fleetOpts struct {
	sites, tags, centrals int
	interval              time.Duration // between two batches of one site
	warmup, measure       time.Duration
	workers               int    // [central] workers of each central
	pgURL, pgTable        string // when set, each central forwards to this table partitioned by day
}

// fleetResult is what one run measured over its measure window.
type fleetResult struct {
	offered   float64       // values/s the sites were asked to send
	published float64       // values/s acknowledged by the cluster
	stored    float64       // values/s stored (acknowledged) by the centrals together
	each      []float64     // values/s stored by each central
	cores     []float64     // CPU of each central, in cores
	perCore   float64       // stored values/s per core of CPU, over all centrals
	lagP50    time.Duration // median over the window of the oldest unstored message's age (max over centrals)
	lagMax    time.Duration
	pgRows    float64 // rows/s PostgreSQL took from the centrals' forwarders (inserted or updated)
	backlog   int64   // values published but not yet stored, at the end of the window
	sendErrs  int64
	lagMisses int
	load      string // /proc/loadavg at the end of the window
}

// fleet is one running fleet.
type fleet struct {
	t        testing.TB
	o        fleetOpts
	urls     string
	centrals []*centralProc
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	published atomic.Int64 // values acknowledged by the cluster
	sendErrs  atomic.Int64
	lagMisses int            // lag samples dropped: the oldest unstored message could not be read
	batches   []atomic.Int64 // per site: batches acknowledged
	lastTick  []atomic.Int64 // per site: time stamp of the last batch acknowledged
}

// centralProc is one central Pith process.
type centralProc struct {
	partition int
	name      string
	base      string // http://127.0.0.1:port
	cmd       *exec.Cmd
}

// natsServerBin returns the nats-server binary or skips.
func natsServerBin(t testing.TB) string {
	if os.Getenv("PITH_TEST_NATS") == "" {
		testpeer.Missing(t, "PITH_TEST_NATS not set: fleet test skipped with the other NATS tests")
	}
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nats-server"); err != nil {
			testpeer.Missing(t, "nats-server not installed (Debian package nats-server): fleet test skipped")
		}
	}
	return bin
}

// fleetMapping is the servers' config splitting the sites into n
// partitions by the hash of the site token.
func fleetMapping(n int) string {
	return fmt.Sprintf(`mappings = { "pith.*.samples": "pith.{{wildcard(1)}}.samples.{{partition(%d,1)}}" }`, n)
}

// startFleet starts the cluster, the centrals and the sites.
func startFleet(t testing.TB, o fleetOpts) *fleet {
	t.Helper()
	cl := testpeer.StartNATSCluster(t, natsServerBin(t), 3, fleetMapping(o.centrals))
	f := &fleet{t: t, o: o, urls: cl.URLs(), batches: make([]atomic.Int64, o.sites), lastTick: make([]atomic.Int64, o.sites)}
	createReplicatedStream(t, f.urls, "pith.*.samples.*")
	ports := testpeer.FreePorts(t, o.centrals)
	for i := range o.centrals {
		f.centrals = append(f.centrals, startCentralProc(t, f.urls, i, o, ports))
	}
	for _, c := range f.centrals {
		waitHTTP(t, c.base+"/api/v1/sites")
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	for i := range o.sites {
		f.wg.Add(1)
		go f.site(ctx, i)
	}
	t.Cleanup(f.stopSites)
	return f
}

// startCentralProc runs central i of the fleet as a process of its own:
// this test binary running TestFleetCentralProcess.
func startCentralProc(t testing.TB, urls string, i int, o fleetOpts, ports []int) *centralProc {
	c := &centralProc{partition: i, name: fmt.Sprintf("central%d", i), base: fmt.Sprintf("http://127.0.0.1:%d", ports[i])}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestFleetCentralProcess$")
	c.cmd.Env = append(os.Environ(),
		"PITH_FLEET_CENTRAL="+c.name, "PITH_FLEET_NATS="+urls,
		"PITH_FLEET_LISTEN="+strings.TrimPrefix(c.base, "http://"),
		"PITH_FLEET_PARTITION="+strconv.Itoa(i), "PITH_FLEET_PARTITIONS="+strconv.Itoa(o.centrals),
		"PITH_FLEET_WORKERS="+strconv.Itoa(o.workers),
		"PITH_FLEET_PG_URL="+o.pgURL, "PITH_FLEET_PG_TABLE="+o.pgTable)
	out, err := os.Create(t.TempDir() + "/" + c.name + ".log")
	if err != nil {
		t.Fatal(err)
	}
	c.cmd.Stdout, c.cmd.Stderr = out, out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { c.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			c.cmd.Process.Kill()
			<-done
		}
		out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(out.Name())
			t.Logf("%s output:\n%s", c.name, tail(string(b), 3000))
		}
	})
	return c
}

// TestFleetCentralProcess is a central Pith of the fleet tests, run by
// them as a process of its own (so that its CPU can be read from /proc):
// `pith serve` with [central] set from PITH_FLEET_* until SIGTERM.
func TestFleetCentralProcess(t *testing.T) {
	name := os.Getenv("PITH_FLEET_CENTRAL")
	if name == "" {
		t.Skip("the central process of the fleet tests; run by them")
	}
	atoi := func(k string) int {
		n, err := strconv.Atoi(os.Getenv(k))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return n
	}
	listen := os.Getenv("PITH_FLEET_LISTEN")
	cfg := fwdConfig(t, name, t.TempDir())
	cfg.HTTP.Listen = listen
	cfg.Central = config.DefaultCentral()
	cfg.Central.NATS = os.Getenv("PITH_FLEET_NATS")
	cfg.Central.Partitions = atoi("PITH_FLEET_PARTITIONS")
	cfg.Central.Partition = atoi("PITH_FLEET_PARTITION")
	cfg.Central.Workers = atoi("PITH_FLEET_WORKERS")
	cfg.Central.URL = "http://" + listen
	if u := os.Getenv("PITH_FLEET_PG_URL"); u != "" {
		cfg.Forward.Postgres = []config.ForwardPostgres{{Name: "fleetpg", URL: u, Table: os.Getenv("PITH_FLEET_PG_TABLE"), Partition: "day"}}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := serve(ctx, cfg, NewLogger(cfg.Log.Level), func(string, *plant.Plant) {}); err != nil {
		t.Fatal(err)
	}
}

// waitHTTP polls url until it answers 200.
func waitHTTP(t testing.TB, url string) {
	t.Helper()
	eventually(t, 30*time.Second, "central at "+url, func() bool {
		resp, err := httpc.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// fleetSiteName names site i.
func fleetSiteName(i int) string { return fmt.Sprintf("site%04d", i) }

// fleetValue is the value of tag k in batch seq, so that a test can check
// what arrived.
func fleetValue(seq, k int) float64 { return float64(seq*1000 + k) }

// site is simulated edge site i: every interval (each site at its own
// offset in the interval, as a fleet's clocks are) it sends one batch of
// every tag through forward.NATSSink, retrying a failed batch with the
// same entry id as the forwarder does, until ctx is done.
func (f *fleet) site(ctx context.Context, i int) {
	defer f.wg.Done()
	site := fleetSiteName(i)
	sink, err := forward.NewNATSSink(forward.NATSOptions{URL: f.urls, Site: site}, nil)
	if err != nil {
		f.t.Error(err)
		return
	}
	defer sink.Close()
	names := make([]string, f.o.tags)
	for k := range names {
		names[k] = fmt.Sprintf("dev.t%03d", k)
	}
	pts := make([]model.Point, f.o.tags)
	next := time.Now().Truncate(f.o.interval).Add(f.o.interval + f.o.interval*time.Duration(i)/time.Duration(f.o.sites))
	for seq := 0; ; seq++ {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		ts := next.UnixMilli()
		for k := range pts {
			pts[k] = model.Point{Tag: names[k], T: ts, V: fleetValue(seq, k)}
		}
		id := forward.EntryID(site, 1, int64(seq))
		b := forward.Batch{ID: id, Entries: []forward.Entry{{ID: id, Points: pts}}, Points: len(pts)}
		if ctx.Err() != nil {
			return
		}
		// A batch once begun is sent until JetStream acknowledges it, even
		// after ctx is done: a send cut off while it waits for its
		// acknowledgement may still have been stored, and the test counts
		// exactly the batches acknowledged. Retries carry the same id, so
		// the stream keeps one copy.
		for try := 0; ; try++ {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			err := sink.Send(sctx, b)
			cancel()
			if err == nil {
				break
			}
			f.sendErrs.Add(1)
			if try == 20 {
				f.t.Errorf("site %s: batch %d not acknowledged after %d tries: %v", site, seq, try+1, err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		f.published.Add(int64(len(pts)))
		f.batches[i].Add(1)
		f.lastTick[i].Store(ts)
		next = next.Add(f.o.interval)
	}
}

// stopSites stops the sites and waits for them.
func (f *fleet) stopSites() {
	f.cancel()
	f.wg.Wait()
}

// consumerState is one central's consumer as JetStream sees it.
type consumerState struct {
	stored  int64         // messages acknowledged
	backlog int64         // messages not yet acknowledged
	lag     time.Duration // age of the oldest message not yet acknowledged; -1 when unknown
}

// states reads every central's consumer.
func (f *fleet) states(ctx context.Context, js jetstream.JetStream) ([]consumerState, error) {
	out := make([]consumerState, len(f.centrals))
	st, err := js.Stream(ctx, forward.DefaultNATSStream)
	if err != nil {
		return nil, err
	}
	for i := range f.centrals {
		c := config.DefaultCentral()
		c.Partitions, c.Partition = len(f.centrals), i
		cons, err := st.Consumer(ctx, c.EffectiveDurable())
		if err != nil {
			return nil, fmt.Errorf("consumer of central %d: %w", i, err)
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return nil, err
		}
		s := consumerState{stored: int64(info.Delivered.Consumer) - int64(info.NumAckPending), backlog: int64(info.NumPending) + int64(info.NumAckPending)}
		if s.backlog > 0 {
			m, err := st.GetMsg(ctx, info.AckFloor.Stream+1, jetstream.WithGetMsgSubject(c.EffectiveSubjects()[0]))
			s.lag = -1
			if err == nil {
				s.lag = time.Since(m.Time)
			}
		}
		out[i] = s
	}
	return out, nil
}

// cpuTicks returns the user and system CPU of pid, in clock ticks.
func cpuTicks(t testing.TB, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	fs := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(fs[11], 10, 64) // field 14, utime
	k, _ := strconv.ParseInt(fs[12], 10, 64) // field 15, stime
	return u + k
}

// clockTicks is USER_HZ, 100 on every Linux Pith runs on.
const clockTicks = 100

// measure waits the warm-up, then measures the window.
func (f *fleet) measure(ctx context.Context) fleetResult {
	t := f.t
	nc, err := nats.Connect(f.urls)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "every central's consumer", func() bool {
		_, err := f.states(ctx, js)
		return err == nil
	})
	time.Sleep(f.o.warmup)
	sum := func(ss []consumerState) (stored, backlog int64, lag time.Duration) {
		for _, s := range ss {
			stored += s.stored
			backlog += s.backlog
			if s.lag < 0 || lag < 0 {
				lag = -1 // one central's lag unknown: the sample is dropped
			} else {
				lag = max(lag, s.lag)
			}
		}
		return
	}
	read := func() []consumerState {
		ss, err := f.states(ctx, js)
		if err != nil {
			t.Fatal(err)
		}
		return ss
	}
	cpu := func() []int64 {
		var out []int64
		for _, c := range f.centrals {
			out = append(out, cpuTicks(t, c.cmd.Process.Pid))
		}
		return out
	}
	pg0 := f.pgCount(ctx)
	t0, pub0, cpu0 := time.Now(), f.published.Load(), cpu()
	first := read()
	s0, _, _ := sum(first)
	var lags []time.Duration
	for end := t0.Add(f.o.measure); time.Now().Before(end); {
		time.Sleep(time.Second)
		if _, _, lag := sum(read()); lag >= 0 {
			lags = append(lags, lag)
		} else {
			f.lagMisses++
		}
	}
	cpu1 := cpu()
	ss := read()
	pg1 := f.pgCount(ctx)
	dt := time.Since(t0).Seconds()
	s1, backlog, _ := sum(ss)
	r := fleetResult{
		offered:   float64(f.o.sites*f.o.tags) / f.o.interval.Seconds(),
		published: float64(f.published.Load()-pub0) / dt,
		stored:    float64(s1-s0) * float64(f.o.tags) / dt,
		backlog:   backlog * int64(f.o.tags),
		pgRows:    float64(pg1-pg0) / dt,
		sendErrs:  f.sendErrs.Load(),
		lagMisses: f.lagMisses,
	}
	for i := range ss {
		r.each = append(r.each, float64(ss[i].stored-first[i].stored)*float64(f.o.tags)/dt)
	}
	var cores float64
	for i := range cpu1 {
		c := float64(cpu1[i]-cpu0[i]) / clockTicks / dt
		r.cores = append(r.cores, c)
		cores += c
	}
	if cores > 0 {
		r.perCore = r.stored / cores
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	if len(lags) > 0 {
		r.lagP50, r.lagMax = lags[len(lags)/2], lags[len(lags)-1]
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return r
}

// pgCount returns the rows inserted or updated in the partitions of the
// fleet's PostgreSQL table so far, from the server's statistics.
func (f *fleet) pgCount(ctx context.Context) int64 {
	if f.o.pgURL == "" {
		return 0
	}
	c, err := pgx.Connect(ctx, f.o.pgURL)
	if err != nil {
		f.t.Fatal(err)
	}
	defer c.Close(ctx)
	// Statistics reach the shared view at most a second late.
	if _, err := c.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		f.t.Fatal(err)
	}
	var n int64
	if err := c.QueryRow(ctx, "SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0)::bigint FROM pg_stat_user_tables WHERE relid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = $1::regclass)", f.o.pgTable).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// drained waits until every central stored everything published.
func (f *fleet) drained(t testing.TB, d time.Duration) {
	t.Helper()
	nc, err := nats.Connect(f.urls)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, d, "every published batch stored", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		ss, err := f.states(ctx, js)
		if err != nil {
			return false
		}
		var stored, backlog int64
		for _, s := range ss {
			stored += s.stored
			backlog += s.backlog
		}
		var want int64
		for i := range f.batches {
			want += f.batches[i].Load()
		}
		return backlog == 0 && stored >= want
	})
}

func (r fleetResult) String() string {
	cores := make([]string, len(r.cores))
	for i, c := range r.cores {
		cores[i] = strconv.FormatFloat(c, 'f', 2, 64)
	}
	each := make([]string, len(r.each))
	for i, v := range r.each {
		each[i] = strconv.FormatFloat(v, 'f', 0, 64)
	}
	pg := ""
	if r.pgRows > 0 {
		pg = fmt.Sprintf("; PostgreSQL %.0f rows/s", r.pgRows)
	}
	return fmt.Sprintf("offered %.0f values/s, published %.0f, stored %.0f (%s)%s; central CPU %s cores, %.0f values/s per core; lag p50 %s max %s (%d samples unread), backlog %d values; send errors %d; load %s",
		r.offered, r.published, r.stored, strings.Join(each, "+"), pg, strings.Join(cores, "+"), r.perCore, r.lagP50.Round(10*time.Millisecond), r.lagMax.Round(10*time.Millisecond), r.lagMisses, r.backlog, r.sendErrs, r.load)
}

// TestFleetQuick is the fleet benchmark's short form: 20 sites of 100
// tags at 1 s through a three-node JetStream cluster into two central
// Piths, each consuming the partition of the sites the servers map to it.
// Every value arrives at exactly one central, the directory bucket names
// the central of every site, and /api/v1/sites sends a user asking the
// wrong central to the right one.
func TestFleetQuick(t *testing.T) {
	o := fleetOpts{sites: 20, tags: 100, centrals: 2, interval: time.Second, warmup: 2 * time.Second, measure: 3 * time.Second, workers: 2}
	f := startFleet(t, o)
	r := f.measure(context.Background())
	t.Logf("quick fleet: %s", r)
	f.stopSites()
	f.drained(t, 60*time.Second)

	// The directory: every site, held by one central, the same answer at both.
	var dirs [2]struct {
		Central string      `json:"central"`
		Sites   []siteEntry `json:"sites"`
	}
	for i, c := range f.centrals {
		resp, err := httpc.Get(c.base + "/api/v1/sites")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&dirs[i])
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/v1/sites at %s: %d %v", c.name, resp.StatusCode, err)
		}
	}
	if len(dirs[0].Sites) != o.sites {
		t.Fatalf("directory lists %d sites, want %d: %+v", len(dirs[0].Sites), o.sites, dirs[0].Sites)
	}
	holder := map[string]int{}
	perCentral := make([]int, len(f.centrals))
	for k, s := range dirs[0].Sites {
		if o := dirs[1].Sites[k]; o.Site != s.Site || o.Central != s.Central || o.Local == s.Local {
			t.Errorf("the centrals disagree on site %s: %+v and %+v", s.Site, s, o)
		}
		if s.Central != "central0" && s.Central != "central1" || s.Partitions != 2 || s.Central != fmt.Sprintf("central%d", s.Partition) {
			t.Errorf("directory entry %+v", s)
		}
		if s.Local != (s.Central == "central0") {
			t.Errorf("central0 says local=%v for %+v", s.Local, s)
		}
		holder[s.Site] = s.Partition
		perCentral[s.Partition]++
	}
	if perCentral[0] == 0 || perCentral[1] == 0 {
		t.Errorf("sites per central %v: the partitions do not split the sites", perCentral)
	}

	// Every value at its holder, none at the other central.
	for i := range o.sites {
		site := fleetSiteName(i)
		h, ok := holder[site]
		if !ok {
			t.Fatalf("site %s missing from the directory", site)
		}
		want := int(f.batches[i].Load())
		for _, tag := range []string{site + ".dev.t000", site + ".dev.t099"} {
			if got := (&instance{base: f.centrals[h].base}).count(t, tag, 0, math.MaxInt64/2); got != want {
				t.Errorf("%s at its central %d: %d samples, want %d", tag, h, got, want)
			}
			if got := (&instance{base: f.centrals[1-h].base}).count(t, tag, 0, math.MaxInt64/2); got != 0 {
				t.Errorf("%s at the other central: %d samples, want 0", tag, got)
			}
		}
		if v, ok := (&instance{base: f.centrals[h].base}).latest(t, site+".dev.t042"); !ok || v != fleetValue(want-1, 42) {
			t.Errorf("latest of %s.dev.t042 = %v %v, want %v", site, v, ok, fleetValue(want-1, 42))
		}
	}

	// A user asking the wrong central is sent to the right one.
	site := dirs[0].Sites[0].Site
	h := holder[site]
	noFollow := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(f.centrals[1-h].base + "/api/v1/sites/" + site)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := f.centrals[h].base + "/api/v1/sites/" + site; resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != want {
		t.Errorf("site %s at the other central: %d Location %q, want 307 to %q", site, resp.StatusCode, resp.Header.Get("Location"), want)
	}
	resp, err = httpc.Get(f.centrals[1-h].base + "/api/v1/sites/" + site) // followed
	if err != nil {
		t.Fatal(err)
	}
	var e siteEntry
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !e.Local || e.Site != site {
		t.Errorf("redirect followed: %d %+v", resp.StatusCode, e)
	}
	// The dashboard's link: the same path at the holder, wherever asked.
	for _, at := range []int{h, 1 - h} {
		resp, err = noFollow.Get(f.centrals[at].base + "/api/v1/sites/" + site + "?to=" + url.QueryEscape("/?tag="+site+".dev.t000"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := f.centrals[h].base + "/?tag=" + site + ".dev.t000"
		if at == h {
			want = "/?tag=" + site + ".dev.t000"
		}
		if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != want {
			t.Errorf("?to= asked at central %d: %d Location %q, want 307 to %q", at, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	for _, bad := range []string{"//evil.example/", "https://evil.example/", "x"} {
		resp, err = noFollow.Get(f.centrals[0].base + "/api/v1/sites/" + site + "?to=" + url.QueryEscape(bad))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("?to=%s: %d, want 400", bad, resp.StatusCode)
		}
	}
	resp, err = httpc.Get(f.centrals[0].base + "/api/v1/sites/nosuchsite")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown site: %d, want 404", resp.StatusCode)
	}
}

// BenchmarkFleet is the fleet benchmark: PITH_FLEET_SITES sites (default
// 1,000) of 100 tags at 1 s into a three-node JetStream cluster, consumed
// by 1, 2 and 3 central Piths, each a process with its own store (fsync
// durability) consuming its partition of the sites. It reports the values
// stored per second, the lag and the values stored per core of central
// CPU. PITH_FLEET_CENTRALS runs one count only, PITH_FLEET_WORKERS sets
// [central] workers (default 2), PITH_FLEET_MEASURE the window (60s).
// Outside CI; run it with (figures in docs/fleet.md):
//
//	PITH_TEST_NATS=nats://127.0.0.1:4222 go test -run '^$' -bench Fleet -benchtime 1x -timeout 30m ./internal/agent/
func BenchmarkFleet(b *testing.B) {
	sites := 1000
	if s := os.Getenv("PITH_FLEET_SITES"); s != "" {
		sites, _ = strconv.Atoi(s)
	}
	measure := 60 * time.Second
	if s := os.Getenv("PITH_FLEET_MEASURE"); s != "" {
		measure, _ = time.ParseDuration(s)
	}
	workers := config.DefaultCentralWorkers
	if s := os.Getenv("PITH_FLEET_WORKERS"); s != "" {
		workers, _ = strconv.Atoi(s)
	}
	counts := []int{1, 2, 3}
	if s := os.Getenv("PITH_FLEET_CENTRALS"); s != "" {
		n, _ := strconv.Atoi(s)
		counts = []int{n}
	}
	for _, n := range counts {
		b.Run("centrals="+strconv.Itoa(n), func(b *testing.B) {
			o := fleetOpts{sites: sites, tags: 100, centrals: n, interval: time.Second, warmup: 15 * time.Second, measure: measure, workers: workers}
			f := startFleet(b, o)
			r := f.measure(context.Background())
			b.Logf("%d sites x %d tags, %d central(s): %s", o.sites, o.tags, n, r)
			b.ReportMetric(r.stored, "stored/s")
			b.ReportMetric(r.published, "published/s")
			b.ReportMetric(r.perCore, "values/s/core")
			b.ReportMetric(r.lagP50.Seconds(), "lag_p50_s")
			b.ReportMetric(r.lagMax.Seconds(), "lag_max_s")
		})
	}
}

// BenchmarkFleetPostgres is the fleet of BenchmarkFleet with three
// central Piths, each forwarding what it stores (the whole fleet between
// them) to one PostgreSQL table partitioned by day (pg_partman when
// installed): PostgreSQL's ingest in rows/s beside the rate stored.
//
//	PITH_TEST_NATS=nats://127.0.0.1:4222 PITH_TEST_PG=postgres://postgres@127.0.0.1:5432/test go test -run '^$' -bench FleetPostgres -benchtime 1x -timeout 30m ./internal/agent/
func BenchmarkFleetPostgres(b *testing.B) {
	pg := os.Getenv("PITH_TEST_PG")
	if pg == "" {
		testpeer.Missing(b, "PITH_TEST_PG not set: fleet-to-PostgreSQL benchmark skipped")
	}
	sites := 1000
	if s := os.Getenv("PITH_FLEET_SITES"); s != "" {
		sites, _ = strconv.Atoi(s)
	}
	measure := 60 * time.Second
	if s := os.Getenv("PITH_FLEET_MEASURE"); s != "" {
		measure, _ = time.ParseDuration(s)
	}
	table := fmt.Sprintf("fleet_bench_%d", time.Now().UnixNano())
	b.Cleanup(func() {
		ctx := context.Background()
		c, err := pgx.Connect(ctx, pg)
		if err != nil {
			return
		}
		defer c.Close(ctx)
		c.Exec(ctx, "DROP TABLE IF EXISTS "+table+" CASCADE")
		c.Exec(ctx, "DELETE FROM partman.part_config WHERE parent_table = 'public."+table+"'")
		c.Exec(ctx, "DROP TABLE IF EXISTS partman.template_public_"+table)
	})
	o := fleetOpts{sites: sites, tags: 100, centrals: 3, interval: time.Second, warmup: 15 * time.Second, measure: measure, workers: config.DefaultCentralWorkers, pgURL: pg, pgTable: table}
	f := startFleet(b, o)
	r := f.measure(context.Background())
	b.Logf("%d sites x %d tags, 3 centrals forwarding to PostgreSQL: %s", o.sites, o.tags, r)
	b.ReportMetric(r.stored, "stored/s")
	b.ReportMetric(r.pgRows, "pg_rows/s")
	b.ReportMetric(r.lagP50.Seconds(), "lag_p50_s")
}
