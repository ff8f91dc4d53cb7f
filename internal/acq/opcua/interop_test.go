package opcua

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/tag"
)

// The test server's tick period (10 Hz).
const tickMs = 100

// stationConfig returns a station reading n of the server's counters
// (ns=1;s=v0000..) as tags t.v0000.., every change reported.
func stationConfig(t testing.TB, endpoint string, n int) config.OPCUAClient {
	c := config.DefaultOPCUAClient()
	c.Name = "ua"
	c.Endpoint = endpoint
	c.PublishInterval = config.Duration(200 * time.Millisecond)
	c.RetryPause = config.Duration(time.Second)
	c.Timeout = config.Duration(5 * time.Second)
	for i := range n {
		ts := config.DefaultOPCUATagSpec()
		ts.Name = fmt.Sprintf("t.v%04d", i)
		ts.Node = fmt.Sprintf("ns=1;s=v%04d", i)
		ts.Type = "Double"
		ts.QueueSize = 100
		c.Tags = append(c.Tags, ts)
	}
	return c
}

// validated runs c through config validation, as a file would be.
func validated(t testing.TB, c config.OPCUAClient) config.OPCUAClient {
	t.Helper()
	cfg := config.Default()
	cfg.OPCUA.Clients = []config.OPCUAClient{c}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// runStation starts a station on a fresh table archiving into a recorder.
func runStation(t testing.TB, c config.OPCUAClient) (*Station, *tag.Table, *recorder) {
	t.Helper()
	st, tab, rec := newStation(t, c)
	st.Start(context.Background())
	t.Cleanup(st.Stop)
	return st, tab, rec
}

// newStation builds a station on a fresh table archiving into a recorder,
// without starting it.
func newStation(t testing.TB, c config.OPCUAClient) (*Station, *tag.Table, *recorder) {
	t.Helper()
	rec := &recorder{}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))
	tab := tag.New(log, tag.DefaultOptions(), rec)
	st, err := NewStation(validated(t, c), tab, log)
	if err != nil {
		t.Fatal(err)
	}
	return st, tab, rec
}

// logLevel is debug with OPCUA_DEBUG set, info otherwise.
func logLevel() slog.Level {
	if os.Getenv("OPCUA_DEBUG") != "" {
		return -8
	}
	return slog.LevelInfo
}

// waitFor polls cond every 50 ms until it holds or d passed.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// latest returns the current value of a tag.
func latest(tab *tag.Table, name string) tag.Value {
	v, _ := tab.Latest(name)
	if len(v) == 0 {
		return tag.Value{}
	}
	return v[0]
}

// checkCounters checks the archive of the server's counters: per tag, the
// good values are consecutive ticks with no gap and no repeat, each with
// its source timestamp (epoch + k*period), from first to at least last.
// It returns how many values were checked.
func checkCounters(t testing.TB, rec *recorder, n int, epoch int64, last float64) int {
	t.Helper()
	m := rec.byTag()
	total, bad := 0, 0
	for i := range n {
		name := fmt.Sprintf("t.v%04d", i)
		var prev float64 = -1
		seen := map[int64]bool{}
		// The archive order is not the time order: after a reconnection
		// the current value is read at once and the backlog the server
		// kept arrives after it, archived as late values.
		pts := slices.DeleteFunc(slices.Clone(m[name]), func(p model.Point) bool { return p.Q != model.QualityGood })
		slices.SortStableFunc(pts, func(a, b model.Point) int { return cmp.Compare(a.T, b.T) })
		for _, p := range pts {
			if want := epoch + int64(p.V)*tickMs; p.T != want {
				if bad++; bad < 10 {
					t.Errorf("%s: value %v at %d, want its source time %d", name, p.V, p.T, want)
				}
			}
			if seen[p.T] {
				if bad++; bad < 10 {
					t.Errorf("%s: value %v at %d archived twice", name, p.V, p.T)
				}
			}
			seen[p.T] = true
			if prev >= 0 && p.V != prev+1 {
				if bad++; bad < 10 {
					t.Errorf("%s: after %v came %v: %v change(s) missed", name, prev, p.V, p.V-prev-1)
				}
			}
			if p.V > prev {
				prev = p.V
			}
			total++
		}
		if prev < last {
			if bad++; bad < 10 {
				t.Errorf("%s: last archived value %v, want at least %v", name, prev, last)
			}
		}
	}
	return total
}

// serverTick is the server's tick number now.
func serverTick(epoch int64) float64 {
	return float64((time.Now().UnixMilli() - epoch) / tickMs)
}

// TestInteropNodeOPCUA1000 subscribes to 1,000 variables changing at
// 10 Hz on a node-opcua server with security None and checks that every
// change was archived with its source timestamp.
func TestInteropNodeOPCUA1000(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 200 // the race detector's run: the same checks, lighter
	}
	srv := startNodeServer(t, n, 10)
	c := stationConfig(t, srv.endpoint(), n)
	for i := range c.Tags {
		c.Tags[i].SamplingInterval = 0
	}
	st, tab, rec := runStation(t, c)
	lastTag := fmt.Sprintf("t.v%04d", n-1)
	waitFor(t, 30*time.Second, "first values", func() bool { return latest(tab, lastTag).Has })
	time.Sleep(5 * time.Second)
	last := serverTick(srv.epoch) - 10 // a second of slack for the last publish
	waitFor(t, 10*time.Second, "values of the last second", func() bool { return latest(tab, lastTag).V >= last })
	st.Stop()
	got := checkCounters(t, rec, n, srv.epoch, last)
	s := st.Stats()
	t.Logf("%d values checked; %d notifications, %d overflows, %d errors", got, s.Notifications, s.Overflows, s.Errors)
	if s.Overflows != 0 {
		t.Errorf("%d queue overflows", s.Overflows)
	}
	if got < n*40 {
		t.Errorf("only %d values archived, want about %d", got, n*50)
	}
}

// TestInteropSignAndEncrypt connects with Basic256Sha256 SignAndEncrypt and
// a user name, trusting the server's certificate through the trust
// directory; with an empty trust directory the station refuses the server.
func TestInteropSignAndEncrypt(t *testing.T) {
	srv := startNodeServer(t, 10, 10)
	dir := t.TempDir()
	certPEM, keyPEM, err := NewCertificate(DefaultCertOptions("localhost"))
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(dir, "cert.pem"), certPEM, 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "key.pem"), keyPEM, 0o600))
	trust := filepath.Join(dir, "trusted")
	must(t, os.Mkdir(trust, 0o755))

	c := stationConfig(t, srv.endpoint(), 10)
	c.SecurityPolicy, c.SecurityMode = config.OPCUAPolicyBasic256Sha256, config.OPCUAModeSignAndEncrypt
	c.Auth, c.Username, c.Password = config.OPCUAAuthUsername, "operator", "secret"
	c.Certificate, c.PrivateKey, c.TrustDir = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"), trust

	// Untrusted first: no session, a clear error.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := clientOptions(ctx, validated(t, c)); !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "SHA-1") {
		t.Fatalf("untrusted server: got %v, want ErrUntrusted naming the thumbprint", err)
	}
	// Trust it (as an operator would after checking the thumbprint).
	der, err := ServerCertificate(ctx, srv.endpoint(), config.OPCUAPolicyBasic256Sha256, config.OPCUAModeSignAndEncrypt)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(trust, "server.der"), der, 0o644))

	st, tab, rec := runStation(t, c)
	waitFor(t, 30*time.Second, "values over SignAndEncrypt", func() bool {
		v := latest(tab, "t.v0009")
		return v.Has && v.V >= serverTick(srv.epoch)-20
	})
	time.Sleep(2 * time.Second)
	last := serverTick(srv.epoch) - 10
	waitFor(t, 10*time.Second, "recent values", func() bool { return latest(tab, "t.v0009").V >= last })
	st.Stop()
	checkCounters(t, rec, 10, srv.epoch, last)

	// A wrong password is refused by the server.
	c.Password = "wrong"
	if _, err := connectOnce(validated(t, c)); err == nil {
		t.Error("wrong password accepted")
	}
	// The application certificate as the user's identity, over Sign.
	c.Auth, c.Username, c.Password, c.SecurityMode = config.OPCUAAuthCertificate, "", "", config.OPCUAModeSign
	if _, err := connectOnce(validated(t, c)); err != nil {
		t.Errorf("certificate identity over Sign: %v", err)
	}
}

// TestInteropServerDeadband asks the server to report a counter only when
// it moved by at least 2.5 since the last report: every third value.
func TestInteropServerDeadband(t *testing.T) {
	srv := startNodeServer(t, 1, 10)
	c := stationConfig(t, srv.endpoint(), 1)
	c.Tags[0].SamplingInterval = 0
	c.Tags[0].ServerDeadband, c.Tags[0].ServerDeadbandValue = config.OPCUADeadbandAbsolute, 2.5
	st, tab, rec := runStation(t, c)
	waitFor(t, 30*time.Second, "values", func() bool { return latest(tab, "t.v0000").V > 30 })
	st.Stop()
	var prev float64 = -1
	n := 0
	for _, p := range rec.byTag()["t.v0000"] {
		if p.Q != model.QualityGood {
			continue
		}
		if prev >= 0 && p.V-prev != 3 {
			t.Errorf("after %v came %v, want a step of 3 with an absolute deadband of 2.5", prev, p.V)
		}
		prev = p.V
		n++
	}
	if n < 5 {
		t.Errorf("only %d values", n)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// connectOnce opens and closes one session of c.
func connectOnce(c config.OPCUAClient) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, _, err := dial(ctx, c)
	if err != nil {
		return false, err
	}
	cl.Close(ctx)
	return true, nil
}

// TestInteropWriteAndTypes writes setpoints through the session (the
// server acknowledges, or answers its status), reads an array expanded per
// element, an Uncertain value, and a cyclically read tag.
func TestInteropWriteAndTypes(t *testing.T) {
	srv := startNodeServer(t, 1, 10)
	c := stationConfig(t, srv.endpoint(), 0)
	add := func(name, node, typ string, mod func(*config.OPCUATagSpec)) {
		ts := config.DefaultOPCUATagSpec()
		ts.Name, ts.Node, ts.Type, ts.Writable = name, node, typ, true
		ts.SamplingInterval = 0
		if mod != nil {
			mod(&ts)
		}
		c.Tags = append(c.Tags, ts)
	}
	add("sp.double", "ns=1;s=sp_double", "Double", func(ts *config.OPCUATagSpec) { ts.Scale, ts.Offset = 0.5, 10 })
	add("sp.uint16", "ns=1;s=sp_uint16", "UInt16", nil)
	add("sp.bool", "ns=1;s=sp_bool", "Boolean", nil)
	add("sp.wrongtype", "ns=1;s=sp_bool", "Double", nil)
	add("sp.int32", "ns=1;s=sp_int32", "Int32", func(ts *config.OPCUATagSpec) { ts.Mode = config.OPCUAModeRead })
	add("arr.{i}", "ns=1;s=arr", "Double", func(ts *config.OPCUATagSpec) { ts.Count = 4 })
	add("unc", "ns=1;s=uncertain", "Double", func(ts *config.OPCUATagSpec) { ts.Writable = false })
	c.ReadPeriod = config.Duration(100 * time.Millisecond)
	st, tab, _ := runStation(t, c)
	waitFor(t, 30*time.Second, "array values", func() bool { return latest(tab, "arr.3").Has && latest(tab, "unc").Has })
	for i, want := range []float64{1.5, 2.5, 3.5, 4.5} {
		if v := latest(tab, fmt.Sprintf("arr.%d", i)); v.V != want || v.Q != model.QualityGood {
			t.Errorf("arr.%d = %+v, want %v good", i, v, want)
		}
	}
	if v := latest(tab, "unc"); v.V != 7 || v.Q != model.QualityUncertain {
		t.Errorf("unc = %+v, want 7 uncertain", v)
	}
	if s, ok := st.Status("unc"); !ok || s != "UncertainLastUsableValue (0x40900000)" {
		t.Errorf("raw status of unc = %q, %v", s, ok)
	}
	ctx := context.Background()
	// Raw = (60 - 10) / 0.5 = 100 on the server, read back as 60.
	must(t, st.Write(ctx, "sp.double", 60))
	must(t, st.Write(ctx, "sp.uint16", 65535))
	must(t, st.Write(ctx, "sp.bool", 1))
	must(t, st.Write(ctx, "sp.int32", -42))
	must(t, st.Write(ctx, "arr.2", 9.25))
	waitFor(t, 10*time.Second, "written values read back", func() bool {
		return latest(tab, "sp.double").V == 60 && latest(tab, "sp.uint16").V == 65535 && latest(tab, "sp.bool").V == 1 &&
			latest(tab, "sp.int32").V == -42 && latest(tab, "arr.2").V == 9.25
	})
	if err := st.Write(ctx, "sp.uint16", 65536); !errors.Is(err, ErrValue) {
		t.Errorf("65536 to a UInt16: got %v, want ErrValue", err)
	}
	if err := st.Write(ctx, "sp.bool", 0.5); !errors.Is(err, ErrValue) {
		t.Errorf("0.5 to a Boolean: got %v, want ErrValue", err)
	}
	var se *StatusError
	if err := st.Write(ctx, "sp.wrongtype", 3); !errors.As(err, &se) || !strings.Contains(err.Error(), "BadTypeMismatch") {
		t.Errorf("Double to a Boolean variable: got %v, want the server's BadTypeMismatch", err)
	}
	if err := st.Write(ctx, "unc", 1); !errors.Is(err, ErrNotWritable) {
		t.Errorf("read-only tag: got %v, want ErrNotWritable", err)
	}
}

// TestInteropLinkCut cuts the TCP link for a few seconds: the client
// reconnects, reactivates its session and gets the values the server
// queued meanwhile, so the archive has every change exactly once; the
// tags are bad (and comm 0) during the cut.
func TestInteropLinkCut(t *testing.T) {
	const n = 50
	srv := startNodeServer(t, n, 10)
	px := newProxy(t, fmt.Sprintf("127.0.0.1:%d", srv.port))
	c := stationConfig(t, "opc.tcp://"+px.addr()+"/pith", n)
	for i := range c.Tags {
		c.Tags[i].SamplingInterval = 0
	}
	st, tab, rec := runStation(t, c)
	waitFor(t, 30*time.Second, "first values", func() bool { return latest(tab, "t.v0049").Has })
	time.Sleep(2 * time.Second)
	px.setCut(true)
	waitFor(t, 10*time.Second, "the loss seen", func() bool { return latest(tab, "t.v0000").Q == model.QualityBad })
	if v := latest(tab, "pith.station.ua.comm"); v.V != 0 {
		t.Errorf("comm during the cut = %v, want 0", v.V)
	}
	if s, _ := st.Status("t.v0000"); !strings.HasPrefix(s, "BadServerNotConnected") {
		t.Errorf("raw status during the cut = %q, want the communication failure", s)
	}
	time.Sleep(3 * time.Second)
	px.setCut(false)
	waitFor(t, 30*time.Second, "recovery", func() bool {
		v := latest(tab, "t.v0049")
		return v.Q == model.QualityGood && v.V >= serverTick(srv.epoch)-10
	})
	time.Sleep(2 * time.Second)
	last := serverTick(srv.epoch) - 10
	waitFor(t, 10*time.Second, "recent values", func() bool { return latest(tab, "t.v0049").V >= last })
	st.Stop()
	got := checkCounters(t, rec, n, srv.epoch, last)
	s := st.Stats()
	t.Logf("%d values checked, %d errors, last error %q", got, s.Errors, s.LastError)
	if s.Errors == 0 {
		t.Error("the cut was not counted as an error")
	}
}

// TestInteropServerRestart kills the server and starts it again: the
// session and subscription are gone with it, so the station makes new
// ones and the values flow again, good.
func TestInteropServerRestart(t *testing.T) {
	const n = 20
	srv := startNodeServer(t, n, 10)
	c := stationConfig(t, srv.endpoint(), n)
	_, tab, _ := runStation(t, c)
	waitFor(t, 30*time.Second, "first values", func() bool { return latest(tab, "t.v0019").Has })
	srv.kill()
	waitFor(t, 15*time.Second, "the loss seen", func() bool { return latest(tab, "t.v0019").Q == model.QualityBad })
	srv.start()
	waitFor(t, 60*time.Second, "values from the new server", func() bool {
		v := latest(tab, "t.v0019")
		return v.Q == model.QualityGood && v.T >= srv.epoch && latest(tab, "pith.station.ua.comm").V == 1
	})
}

// TestInteropDiscover browses the server below Objects/Plant and checks
// that the TOML written is a valid configuration (what `pith
// check-config` checks) whose station then reads the variables.
func TestInteropDiscover(t *testing.T) {
	srv := startNodeServer(t, 5, 10)
	c := config.DefaultOPCUAClient()
	c.Name, c.Endpoint = "plc", srv.endpoint()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o := DefaultDiscoverOptions()
	o.Path = "Plant"
	found, err := Discover(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteTOML(&b, c, found); err != nil {
		t.Fatal(err)
	}
	t.Log(b.String())
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		t.Fatalf("discover output refused: %v", err)
	}
	tags, err := cfg.OPCUA.Clients[0].ExpandedTags()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]config.OPCUATag{}
	for _, tg := range tags {
		byName[tg.Name] = tg
	}
	for name, typ := range map[string]config.OPCUAType{"plc.Plant.Values.v0004": config.OPCUADouble, "plc.Plant.Setpoints.sp_uint16": config.OPCUAUInt16,
		"plc.Plant.Setpoints.sp_bool": config.OPCUABoolean, "plc.Plant.Misc.arr.3": config.OPCUADouble,
		"plc.Plant.Misc.text": config.OPCUAString, "plc.Plant.Live.names.1": config.OPCUAString} {
		if got, ok := byName[name]; !ok || got.Type != typ {
			t.Errorf("tag %s: got %+v, want type %v", name, got, typ)
		}
	}
	// Values 5, Setpoints 5, Misc: arr 4, text, uncertain; Live: state,
	// names 2, level, skewed.
	if len(tags) != 5+5+4+1+1+1+2+1+1 {
		t.Errorf("%d tags, want 21", len(tags))
	}
	if !strings.Contains(b.String(), "ns=1;s=label (Plant/Misc/label): text other than String") {
		t.Error("the LocalizedText variable is not listed as left out")
	}
	_, tab, _ := runStation(t, cfg.OPCUA.Clients[0])
	waitFor(t, 30*time.Second, "values of the discovered station", func() bool {
		return latest(tab, "plc.Plant.Values.v0004").V > 0 && latest(tab, "plc.Plant.Misc.arr.3").V == 4.5 &&
			latest(tab, "plc.Plant.Misc.text").Text == "hello"
	})
}

// TestInteropSlowPublish uses a publish interval longer than the request
// timeout, with a value that does not change: the keep-alives must not
// read as a lost connection.
func TestInteropSlowPublish(t *testing.T) {
	srv := startNodeServer(t, 1, 10)
	c := stationConfig(t, srv.endpoint(), 0)
	c.PublishInterval, c.Timeout = config.Duration(3*time.Second), config.Duration(time.Second)
	ts := config.DefaultOPCUATagSpec()
	ts.Name, ts.Node, ts.Type, ts.SamplingInterval = "unc", "ns=1;s=uncertain", "Double", config.Duration(time.Second)
	c.Tags = append(c.Tags, ts)
	st, tab, _ := runStation(t, c)
	waitFor(t, 20*time.Second, "the value", func() bool { return latest(tab, "unc").Has })
	time.Sleep(8 * time.Second)
	if s := st.Stats(); s.Errors != 0 {
		t.Errorf("%d errors (last %q) with a quiet subscription", s.Errors, s.LastError)
	}
}
