package events

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// testOptions are quick options on fsys for tests.
func testOptions(fsys vfs.FS) Options {
	o := DefaultOptions()
	o.FS = fsys
	o.RetryMin = time.Millisecond
	o.RetryMax = 10 * time.Millisecond
	o.DrainTimeout = 2 * time.Second
	return o
}

func post(t *testing.T, h http.Handler, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("POST", "/api/v1/events", strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// sinkEvents reads every event in the sink files under dir, in file name
// order (file names sort by time and sequence within a day).
func sinkEvents(t *testing.T, fsys vfs.FS, dir string) []Event {
	t.Helper()
	var files []string
	var walk func(d string)
	walk = func(d string) {
		names, err := fsys.ReadDir(d)
		if err != nil {
			return
		}
		for _, n := range names {
			p := filepath.Join(d, n)
			if isSinkFile(n) {
				if filepath.Base(d) != ".tmp" {
					files = append(files, p)
				}
				continue
			}
			walk(p)
		}
	}
	walk(filepath.Join(dir, "events"))
	var out []Event
	for _, p := range files {
		f, err := vfs.Open(fsys, p)
		if err != nil {
			t.Fatal(err)
		}
		size, _ := f.Size()
		out = append(out, readSinkFile(t, p, io.NewSectionReader(f, 0, size))...)
		f.Close()
	}
	return out
}

// readSinkFile decodes a sink file of any format and compression.
func readSinkFile(t *testing.T, name string, r io.Reader) []Event {
	t.Helper()
	var zr io.Reader
	if strings.HasSuffix(name, ".zst") {
		z, err := zstd.NewReader(r)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		defer z.Close()
		zr = z
	} else {
		z, err := gzip.NewReader(r)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		zr = z
	}
	var out []Event
	if strings.Contains(name, ".csv.") {
		cr := csv.NewReader(zr)
		cr.Comma = csvSeparator
		for {
			row, err := cr.Read()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
			out = append(out, csvEvent(t, row))
		}
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return out
}

// csvEvent turns a CSV row back into an Event (CSVColumns).
func csvEvent(t *testing.T, row []string) Event {
	t.Helper()
	if len(row) != len(CSVColumns) {
		t.Fatalf("csv row of %d fields, want %d: %q", len(row), len(CSVColumns), row)
	}
	ev := Event{Source: Source{Device: row[0], Client: row[1], Session: row[2]}, Name: row[9], ID: row[23]}
	var err error
	if ev.Time, err = strconv.ParseInt(row[24], 10, 64); err != nil {
		t.Fatalf("csv time %q", row[24])
	}
	if at := time.UnixMilli(ev.Time).UTC().Format(time.DateTime); row[7] != at {
		t.Errorf("csv at %q, want %q", row[7], at)
	}
	if row[25] != "" {
		if err := json.Unmarshal([]byte(row[25]), &ev); err != nil {
			t.Fatalf("csv attrs %q: %v", row[25], err)
		}
	}
	if row[3] != "" {
		if ev.Num == nil {
			ev.Num = map[string]float64{}
		}
		if ev.Num["nr"], err = strconv.ParseFloat(row[3], 64); err != nil {
			t.Fatalf("csv nr %q", row[3])
		}
	}
	for k, i := range csvStrColumn {
		if row[i] != "" {
			if ev.Str == nil {
				ev.Str = map[string]string{}
			}
			ev.Str[k] = row[i]
		}
	}
	return ev
}

func TestPostDeliverDedup(t *testing.T) {
	fsys := vfs.NewFaultFS()
	var mu sync.Mutex
	counts := map[string]uint64{}
	opts := testOptions(fsys)
	opts.OnCounts = func(_ time.Time, c map[string]uint64) {
		mu.Lock()
		defer mu.Unlock()
		for k, v := range c {
			counts[k] += v
		}
	}
	c, err := New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	steps := []struct {
		body string
		code int
		resp string
	}{
		{`{"id":"a","name":"boot","time":1000,"source":{"device":"d1"}}`, 200, `{"accepted":1,"duplicates":0}`},
		{`[{"id":"b","name":"click"},{"id":"c","name":"click"}]`, 200, `{"accepted":2,"duplicates":0}`},
		{"{\"id\":\"a\",\"name\":\"boot\"}\n{\"id\":\"d\",\"name\":\"click\"}\n{\"id\":\"d\",\"name\":\"click\"}", 200, `{"accepted":1,"duplicates":2}`},
		{`[{"id":"e","name":"click"},{"name":""}]`, 400, `{"error":"event 1: field name: is required","event":1}`},
		{`{"id":"a","name":"boot"}`, 200, `{"accepted":0,"duplicates":1}`},
	}
	for i, s := range steps {
		code, body := post(t, h, s.body)
		if code != s.code || strings.TrimSpace(body) != s.resp {
			t.Errorf("step %d: got %d %s, want %d %s", i, code, body, s.code, s.resp)
		}
	}
	// GET over the ring.
	req := httptest.NewRequest("GET", "/api/v1/events?name=click&limit=2", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var list struct{ Events []Event }
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || rec.Code != 200 {
		t.Fatalf("GET: %d %s %v", rec.Code, rec.Body, err)
	}
	if len(list.Events) != 2 || list.Events[0].ID != "d" || list.Events[1].ID != "c" {
		t.Errorf("GET: got %+v, want d then c", list.Events)
	}
	if got := c.Recent(ListQuery{Source: "d1", From: 1000, To: 1001}); len(got) != 1 || got[0].ID != "a" {
		t.Errorf("Recent by source and time: got %+v", got)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range sinkEvents(t, fsys, "/data") {
		ids = append(ids, ev.ID)
	}
	if got, want := strings.Join(ids, ","), "a,b,c,d"; got != want {
		t.Errorf("sink has %s, want %s", got, want)
	}
	st := c.Stats()
	if st.Accepted != 4 || st.Duplicates != 3 || st.Rejected != 1 || st.BacklogRecords != 0 || st.Files != 1 {
		t.Errorf("stats: %+v", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if counts["click"] != 3 || counts["boot"] != 1 {
		t.Errorf("counts: %v", counts)
	}
}

// TestCrashLosesNothingAcknowledged acknowledges events from several
// goroutines while files rotate, cuts the power (only fsynced data
// survives), reopens and drains: every acknowledged id must be in the
// sink files, in WAL order per writer.
func TestCrashLosesNothingAcknowledged(t *testing.T) {
	for round := range 3 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			fsys := vfs.NewFaultFS()
			opts := testOptions(fsys)
			opts.MaxFileBytes = 2000 // many rotations, cursor saves and truncations
			opts.SegmentSize = 4096
			opts.DrainTimeout = 50 * time.Millisecond // the first collector's Close cannot drain on a crashed disk
			c, err := New("/data", opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			h := c.Handler()
			var mu sync.Mutex
			acked := map[string]bool{}
			var wg sync.WaitGroup
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 60 {
						var b strings.Builder
						ids := []string{}
						for j := range 3 {
							id := fmt.Sprintf("w%d-%d-%d", w, i, j)
							ids = append(ids, id)
							fmt.Fprintf(&b, "{\"id\":%q,\"name\":\"tick\",\"num\":{\"i\":%d}}\n", id, i)
						}
						req := httptest.NewRequest("POST", "/api/v1/events", strings.NewReader(b.String()))
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, req)
						if rec.Code == 200 {
							mu.Lock()
							for _, id := range ids {
								acked[id] = true
							}
							mu.Unlock()
						}
					}
				}()
			}
			// Cut the power while writers run.
			time.Sleep(time.Duration(5+round*10) * time.Millisecond)
			after := fsys.Crash(vfs.CrashOptions{})
			wg.Wait()
			mu.Lock()
			want := len(acked)
			mu.Unlock()
			if want == 0 {
				t.Log("no event acknowledged before the cut; the check is empty this round")
			}
			c.Close() // fails on the crashed filesystem; it only stops goroutines

			c2, err := New("/data", testOptions(after), nil)
			if err != nil {
				t.Fatalf("reopen after crash: %v", err)
			}
			if err := c2.Close(); err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, ev := range sinkEvents(t, after, "/data") {
				got[ev.ID] = true
			}
			missing := 0
			for id := range acked {
				if !got[id] {
					missing++
				}
			}
			if missing > 0 {
				t.Fatalf("%d of %d acknowledged events missing from the sink after the crash", missing, want)
			}
			t.Logf("acknowledged %d, all in the sink (%d delivered in total)", want, len(got))
		})
	}
}

func TestOverloadAnswers503(t *testing.T) {
	// The sink cannot open a file until the end, so the queue does not
	// drain during the test: once full it stays full.
	fsys := &stalledFS{FS: vfs.NewFaultFS(), release: make(chan struct{}), stalled: make(chan struct{}, 1)}
	opts := testOptions(fsys)
	opts.MaxQueueBytes = 300
	opts.RotateEvery = time.Hour
	c, err := New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer close(fsys.release) // before Close, which delivers the queue
	h := c.Handler()
	var codes []int
	for i := range 6 {
		req := httptest.NewRequest("POST", "/api/v1/events", strings.NewReader(`{"name":"a","str":{"pad":"`+strings.Repeat("x", 100)+`"}}`))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		codes = append(codes, rec.Code)
		if rec.Code == 503 && rec.Header().Get("Retry-After") != "1" {
			t.Errorf("503 without Retry-After: %v", rec.Header())
		}
		if i == 0 {
			// The sink loop took the first record and waits on the
			// disk: it still counts, but the queue is empty, and an
			// empty queue takes one record whatever its size.
			<-fsys.stalled
		}
	}
	if want := []int{200, 200, 503, 503, 503, 503}; !slices.Equal(codes, want) {
		t.Errorf("codes %v, want %v: 503 once the queue is full, and while it stays full", codes, want)
	}
}

// stalledFS makes the opening of a sink file wait until release is
// closed: the sink loop stops at its first record.
type stalledFS struct {
	vfs.FS
	release chan struct{}
	stalled chan struct{} // told when the sink waits
}

func (f *stalledFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if isSinkFile(name) {
		select {
		case f.stalled <- struct{}{}:
		default:
		}
		<-f.release
	}
	return f.FS.OpenFile(name, flag, perm)
}

func TestSinkRetriesAfterFailure(t *testing.T) {
	fsys := vfs.NewFaultFS()
	c, err := New("/data", testOptions(fsys), nil)
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	if code, body := post(t, h, `{"id":"x","name":"a"}`); code != 200 {
		t.Fatalf("post: %d %s", code, body)
	}
	// Fail the next write: the sink's gzip output or the WAL's; the
	// WAL already synced the record, so the sink's.
	fsys.FailWrite(0, fmt.Errorf("injected: %w", io.ErrShortWrite))
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	evs := sinkEvents(t, fsys, "/data")
	if len(evs) != 1 || evs[0].ID != "x" {
		t.Fatalf("sink has %+v, want x once", evs)
	}
	if c.Stats().SinkErrors == 0 {
		t.Errorf("no sink error counted: %+v", c.Stats())
	}
}

func TestSignature(t *testing.T) {
	secret := []byte("s3cret")
	now := time.Unix(1700000000, 0)
	opts := testOptions(vfs.NewFaultFS())
	opts.Secret = secret
	opts.RequireSignature = true
	opts.Now = func() time.Time { return now }
	c, err := New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := c.Handler()
	body := `[{"name":"a"},{"name":"b"}]`
	tests := []struct {
		name   string
		header string
		body   string
		code   int
		resp   string
	}{
		{"good", Sign(secret, []byte(body), now), body, 200, `{"accepted":2,"duplicates":0}`},
		{"replay", Sign(secret, []byte(body), now), body, 200, `{"accepted":0,"duplicates":2}`},
		{"old but in window", Sign(secret, []byte(body), now.Add(-299*time.Second)), body, 200, `{"accepted":2,"duplicates":0}`},
		{"too old", Sign(secret, []byte(body), now.Add(-301*time.Second)), body, 401, ""},
		{"future", Sign(secret, []byte(body), now.Add(301*time.Second)), body, 401, ""},
		{"other body", Sign(secret, []byte(body), now), `[{"name":"c"}]`, 401, ""},
		{"other secret", Sign([]byte("x"), []byte(body), now), body, 401, ""},
		{"malformed", "t=1,sig=zz", body, 401, ""},
		{"missing", "", body, 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/api/v1/events", strings.NewReader(tt.body))
			if tt.header != "" {
				req.Header.Set(SignatureHeader, tt.header)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.code || tt.resp != "" && strings.TrimSpace(rec.Body.String()) != tt.resp {
				t.Errorf("got %d %s, want %d %s", rec.Code, rec.Body, tt.code, tt.resp)
			}
		})
	}
}

func TestDedupAcrossRestart(t *testing.T) {
	fsys := vfs.NewFaultFS()
	for i, want := range []string{`{"accepted":1,"duplicates":0}`, `{"accepted":0,"duplicates":1}`} {
		c, err := New("/data", testOptions(fsys), nil)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := post(t, c.Handler(), `{"id":"k","name":"a"}`); code != 200 || strings.TrimSpace(body) != want {
			t.Errorf("run %d: got %d %s, want %s", i, code, body, want)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if evs := sinkEvents(t, fsys, "/data"); len(evs) != 1 {
		t.Errorf("sink has %d events, want 1", len(evs))
	}
}

// TestRecentFilters checks GET's filters over the ring of canonical lines
// against the same filters applied to the events posted, including
// lines that hold the filter's text elsewhere (a str attribute named
// "name", a source value as an attribute), which the byte checks under
// the lock let through and the decoded event then refuses.
func TestRecentFilters(t *testing.T) {
	opts := testOptions(vfs.NewFaultFS())
	opts.RecentEvents = 50
	c, err := New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := c.Handler()
	var all []Event // newest first
	for i := range 80 {
		ev := Event{
			ID:     fmt.Sprintf("e%d", i),
			Time:   int64(1000 + i%20),
			Name:   []string{"door", "door.open", "x"}[i%3],
			Source: Source{Device: []string{"d1", "d2", ""}[i%3], Session: []string{"", "s<1>", "d1"}[i%4%3]},
			Str:    map[string]string{"name": "door", "who": "d2"},
			Num:    map[string]float64{"time": 1005},
		}
		if i%5 == 0 {
			ev.Str = nil
		}
		line := AppendJSON(nil, &ev)
		if code, body := post(t, h, string(line)); code != 200 {
			t.Fatalf("post %s: %d %s", line, code, body)
		}
		all = append([]Event{ev}, all...)
	}
	for _, q := range []ListQuery{
		{}, {Limit: 1000}, {Name: "door"}, {Name: "door.open", Limit: 3}, {Name: "nope"},
		{Source: "d1"}, {Source: "d2"}, {Source: "s<1>"}, {From: 1005, To: 1010}, {From: 1019},
		{To: 1001, Name: "x"}, {Source: "d1", Name: "door", From: 1003, Limit: 4},
	} {
		limit := q.Limit
		if limit == 0 {
			limit = defaultListLimit
		}
		var want []string
		for _, ev := range all[:opts.RecentEvents] {
			if (q.From == 0 || ev.Time >= q.From) && (q.To == 0 || ev.Time < q.To) && (q.Name == "" || ev.Name == q.Name) &&
				(q.Source == "" || ev.Source.Device == q.Source || ev.Source.Client == q.Source || ev.Source.Session == q.Source) &&
				len(want) < limit {
				want = append(want, string(AppendJSON(nil, &ev)))
			}
		}
		var got []string
		for _, ev := range c.Recent(q) {
			got = append(got, string(AppendJSON(nil, &ev)))
		}
		if strings.Join(got, "") != strings.Join(want, "") {
			t.Errorf("%+v: got %d events, want %d:\n%s\nwant\n%s", q, len(got), len(want), strings.Join(got, ""), strings.Join(want, ""))
		}
	}
}

// TestRecentAfterRestart: the ring is refilled from the WAL at start.
func TestRecentAfterRestart(t *testing.T) {
	fsys := vfs.NewFaultFS()
	c, err := New("/data", testOptions(fsys), nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, c.Handler(), `[{"id":"a","name":"x","time":5},{"name":"y","str":{"k":"v"}}]`); code != 200 {
		t.Fatalf("post: %d %s", code, body)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c, err = New("/data", testOptions(fsys), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := c.Recent(ListQuery{})
	if len(got) != 2 || got[0].Name != "y" || got[0].Str["k"] != "v" || len(got[0].ID) != 32 || got[1].ID != "a" || got[1].Time != 5 {
		t.Errorf("Recent after restart: %+v", got)
	}
}
