package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ScaleOptions configure RunScale (`pith bench scale`, docs/scaling.md).
type ScaleOptions struct {
	Exe     string    // the pith binary to run as the server
	WorkDir string    // where the data directories go (a temporary one when empty)
	Out     io.Writer // progress lines
	Profile Profile

	TagSizes  []int         // the Tags curve: tag counts, each at 1/min
	TagDays   int           // days of the Tags curve
	Years     []int         // the History curve: one tag at 10 s, for each span
	WideTags  int           // the History curve: this many tags at 1 min for WideYears (0: skipped)
	WideYears int           //
	LiveTags  int           // the Live test: tags at 10 Hz
	LiveFor   time.Duration // the Live test's length (0: skipped)
	Runs      int           // timed runs per query (the median is reported)
	// ImportRepeats is the most imports of one store when they are short
	// (under minImportTime in all): each on a fresh store, the median rate
	// reported. 0 or 1: one import.
	ImportRepeats int
}

// ScaleFull and ScaleQuick are the two forms of `pith bench scale`.
func ScaleFull() ScaleOptions {
	return ScaleOptions{TagSizes: []int{100, 1000, 10000, 100000}, TagDays: 7, Years: []int{1, 3, 10},
		WideTags: 1000, WideYears: 1, LiveTags: 10000, LiveFor: time.Hour, Runs: 50, ImportRepeats: 7}
}

// ScaleQuick is the CI form: the same measurements at small sizes, well
// under a minute.
func ScaleQuick() ScaleOptions {
	return ScaleOptions{TagSizes: []int{100, 1000}, TagDays: 1, Years: []int{1}, LiveTags: 1000,
		LiveFor: 5 * time.Second, Runs: 10, ImportRepeats: 3}
}

// ScaleResult is what `pith bench scale` prints.
type ScaleResult struct {
	Profile string      `json:"profile"`
	LoadAvg string      `json:"load_average"` // /proc/loadavg at the start and the end
	Tags    []ScaleRow  `json:"tags"`
	History []ScaleRow  `json:"history"`
	Live    *LiveResult `json:"live,omitempty"`
	Took    float64     `json:"seconds"`
	plots   map[string][]byte
}

// ScaleRow is one store generated and measured: its import, its size on
// disk and the reads on a restarted server.
type ScaleRow struct {
	Name          string    `json:"name"`
	Tags          int       `json:"tags"`
	StepSeconds   int       `json:"step_s"`
	SpanDays      int       `json:"span_days"`
	Points        int64     `json:"points"`
	PointsPerSec  float64   `json:"import_points_per_s"` // the median of ImportRates
	ImportRates   []float64 `json:"import_rates"`        // points/s of each import (a short one is repeated on a fresh store)
	BytesPerPoint float64   `json:"bytes_per_point"`
	PeakRSSBytes  int64     `json:"peak_rss_bytes"`
	IdleRSSBytes  int64     `json:"idle_rss_bytes"`
	IdleAnonBytes int64     `json:"idle_anon_bytes"` // the anonymous part of IdleRSSBytes (the rest: the binary and mapped run files)
	OpenSeconds   float64   `json:"open_s"`
	Files         int       `json:"files"`
	LatestAllMs   float64   `json:"latest_all_ms"`
	MeanMs        float64   `json:"mean_1000_ms"`      // one tag, 1000 buckets over the whole span
	RawHourMs     float64   `json:"raw_hour_ms"`       // one tag, raw samples of an hour anywhere
	Checked       string    `json:"checked,omitempty"` // what was wrong in an answer
}

// LiveResult is the Live test.
type LiveResult struct {
	Tags        int       `json:"tags"`
	RateHz      float64   `json:"rate_hz"`
	Seconds     float64   `json:"seconds"`
	Offered     float64   `json:"offered_values_per_s"`
	Held        float64   `json:"held_values_per_s"`
	P50Ms       float64   `json:"commit_p50_ms"`
	P99Ms       float64   `json:"commit_p99_ms"`
	MaxMs       float64   `json:"commit_max_ms"`
	CPUPercent  float64   `json:"cpu_percent_of_a_core"`
	RSSBytes    int64     `json:"rss_bytes"`
	PeakRSS     int64     `json:"peak_rss_bytes"`
	DeviceBytes int64     `json:"device_bytes_written"`
	BytesPerPt  float64   `json:"device_bytes_per_point"`
	DiskPerPt   float64   `json:"disk_bytes_per_point"` // the data directory after the run
	Files       int       `json:"files"`
	Errors      int       `json:"errors"`
	Windows     []float64 `json:"values_per_s_by_window"` // acknowledged values/s, 10 windows
}

// RunScale generates each store on a fresh `pith serve`, measures it and
// runs the Live test.
func RunScale(ctx context.Context, o ScaleOptions) (*ScaleResult, error) {
	if o.Runs <= 0 {
		o.Runs = 20
	}
	if o.TagDays <= 0 {
		o.TagDays = 7
	}
	work := o.WorkDir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "pith-scale-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(work)
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	start := time.Now()
	res := &ScaleResult{Profile: o.Profile.String(), LoadAvg: loadAvg(), plots: map[string][]byte{}}
	for _, n := range o.TagSizes {
		row, err := o.measure(ctx, work, fmt.Sprintf("%d tags, 1/min, %d days", n, o.TagDays), n, 60, o.TagDays)
		if err != nil {
			return nil, err
		}
		res.Tags = append(res.Tags, *row)
	}
	for _, y := range o.Years {
		row, err := o.measure(ctx, work, fmt.Sprintf("1 tag, 10 s, %d years", y), 1, 10, 365*y)
		if err != nil {
			return nil, err
		}
		res.History = append(res.History, *row)
	}
	if o.WideTags > 0 && o.WideYears > 0 {
		row, err := o.measure(ctx, work, fmt.Sprintf("%d tags, 1/min, %d year(s)", o.WideTags, o.WideYears), o.WideTags, 60, 365*o.WideYears)
		if err != nil {
			return nil, err
		}
		res.History = append(res.History, *row)
	}
	if o.LiveFor > 0 && o.LiveTags > 0 {
		live, err := o.live(ctx, filepath.Join(work, "live"))
		if err != nil {
			return nil, err
		}
		res.Live = live
	}
	res.Took = time.Since(start).Seconds()
	res.LoadAvg += " -> " + loadAvg()
	res.makePlots()
	return res, nil
}

// scaleT0 is the first time stamp of generated history: 2016-01-01 UTC,
// so ten years end before the present.
const scaleT0 = int64(1451606400000)

// scaleGen generates history: tags tags, one sample every step seconds,
// time-major (as live data arrives), a random walk per tag with two
// decimals (the kind of values a sensor gives).
type scaleGen struct {
	tags, step int
	vals       []float64
	names      [][]byte
	seed       uint64
}

func newScaleGen(tags, step int) *scaleGen {
	g := &scaleGen{tags: tags, step: step, vals: make([]float64, tags), names: make([][]byte, tags), seed: 0x9E3779B97F4A7C15}
	for i := range g.vals {
		g.vals[i] = math.Round(g.rnd()*5000) / 100
		g.names[i] = []byte("scale.t" + strconv.Itoa(i) + ",")
	}
	return g
}

// rnd is uniform in [-1, 1] (xorshift64).
func (g *scaleGen) rnd() float64 {
	g.seed ^= g.seed << 13
	g.seed ^= g.seed >> 7
	g.seed ^= g.seed << 17
	return float64(g.seed%2001)/1000 - 1
}

// write writes the samples of steps [from, to) as CSV rows.
func (g *scaleGen) write(w io.Writer, from, to int64) (int64, error) {
	bw := make([]byte, 0, 1<<20)
	var n int64
	for s := from; s < to; s++ {
		ms := scaleT0 + s*int64(g.step)*1000
		for i := range g.vals {
			g.vals[i] = math.Round((g.vals[i]+g.rnd()*0.5)*100) / 100
			bw = append(bw, g.names[i]...)
			bw = strconv.AppendInt(bw, ms, 10)
			bw = append(bw, ',')
			bw = strconv.AppendFloat(bw, g.vals[i], 'f', -1, 64)
			bw = append(bw, '\n')
			n++
			if len(bw) > 1<<20-128 {
				if _, err := w.Write(bw); err != nil {
					return n, err
				}
				bw = bw[:0]
			}
		}
	}
	_, err := w.Write(bw)
	return n, err
}

// writeScaleCSV writes tags tags every step seconds for days days.
func writeScaleCSV(w io.Writer, tags, step, days int) (int64, error) {
	return newScaleGen(tags, step).write(w, 0, int64(days)*86400/int64(step))
}

// maxImportRows is the most rows one generated import carries: the API
// takes at most 1 GiB a request (about 30 bytes a row here).
const maxImportRows = 20_000_000

// importStream posts what gen writes as one streamed CSV import.
func importStream(addr string, gen func(io.Writer) (int64, error)) (int64, time.Duration, error) {
	pr, pw := io.Pipe()
	var genN int64
	go func() {
		n, err := gen(pw)
		genN = n
		pw.CloseWithError(err)
	}()
	start := time.Now()
	resp, err := http.Post("http://"+addr+"/api/v1/import", "text/csv", pr)
	if err != nil {
		pr.CloseWithError(err)
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	el := time.Since(start)
	if resp.StatusCode != 200 {
		return 0, el, fmt.Errorf("import: %s: %s", resp.Status, body)
	}
	var r struct{ Points int64 }
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, el, fmt.Errorf("import: %w", err)
	}
	if r.Points != genN {
		return r.Points, el, fmt.Errorf("import: %d points stored of %d sent", r.Points, genN)
	}
	return r.Points, el, nil
}

// openServer starts a server and returns it with the time until it
// answered /-/ready.
func openServer(exe, dir string, prof Profile) (*server, float64, error) {
	start := time.Now()
	srv, err := startServer(exe, dir, "fsync", prof)
	if err != nil {
		return nil, 0, err
	}
	for time.Since(start) < 5*time.Minute {
		if r, err := http.Get("http://" + srv.addr + "/-/ready"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return srv, time.Since(start).Seconds(), nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.stop()
	return nil, 0, fmt.Errorf("server on %s not ready", srv.addr)
}

// measure generates one store and measures it.
func (o ScaleOptions) measure(ctx context.Context, work, name string, tags, step, days int) (*ScaleRow, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := filepath.Join(work, fmt.Sprintf("t%d-s%d-d%d", tags, step, days))
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	row := &ScaleRow{Name: name, Tags: tags, StepSeconds: step, SpanDays: days}
	fmt.Fprintf(o.Out, "scale: %s: importing ...\n", name)
	// A short import is repeated on a fresh store and its median kept: a
	// rate over a quarter of a second moves by a third between two runs of
	// the same build, and every other size is judged against it.
	var total time.Duration
	for {
		os.RemoveAll(dir)
		n, el, peak, err := o.importStore(dir, tags, step, days)
		if err != nil {
			return nil, err
		}
		row.Points, row.PeakRSSBytes = n, peak
		row.ImportRates = append(row.ImportRates, float64(n)/el.Seconds())
		if total += el; total >= minImportTime || len(row.ImportRates) >= o.ImportRepeats {
			break
		}
	}
	row.PointsPerSec = median(row.ImportRates)
	n := row.Points
	row.BytesPerPoint = float64(dirBytes(dir)) / float64(n)
	row.Files = countFiles(dir)
	var srv *server
	var err error
	if srv, row.OpenSeconds, err = openServer(o.Exe, dir, o.Profile); err != nil {
		return nil, err
	}
	defer srv.stop()
	time.Sleep(time.Second)
	row.IdleRSSBytes = procStatus(srv.cmd.Process.Pid, "VmRSS")
	row.IdleAnonBytes = procStatus(srv.cmd.Process.Pid, "RssAnon")
	from, to := scaleT0, scaleT0+int64(days)*86400000
	var bad []string
	lq := timeQuery(srv.addr, benchQuery{Name: "latest", Path: "/api/v1/latest", Check: func(b []byte) error {
		var r struct{ Values []json.RawMessage }
		if err := json.Unmarshal(b, &r); err != nil {
			return err
		}
		if len(r.Values) < tags { // and the system tags
			return fmt.Errorf("latest: %d values for %d tags", len(r.Values), tags)
		}
		return nil
	}}, o.Runs)
	row.LatestAllMs = lq.MedianMs
	tagName := "scale.t" + strconv.Itoa(tags/2)
	mq := timeQuery(srv.addr, benchQuery{Name: "mean", Path: fmt.Sprintf("/api/v1/data?tag=%s&from=%d&to=%d&points=1000&agg=mean", tagName, from, to),
		Check: func(b []byte) error {
			pts, err := dataPoints(b)
			if err != nil {
				return err
			}
			if len(pts) != 1000 || pts[0][1] == nil || pts[999][1] == nil {
				return fmt.Errorf("mean: %d buckets, want 1000 with values at both ends", len(pts))
			}
			return nil
		}}, o.Runs)
	row.MeanMs = mq.MedianMs
	row.RawHourMs = rawHours(srv.addr, tagName, from, to, step, o.Runs, &bad)
	for _, q := range []QueryResult{lq, mq} {
		if !q.Correct {
			bad = append(bad, q.Detail)
		}
	}
	row.Checked = strings.Join(bad, "; ")
	fmt.Fprintf(o.Out, "scale: %s: %d points at %.0f/s, %.2f B/point, open %.2f s, latest %.2f ms, mean %.2f ms, raw hour %.2f ms %s\n",
		name, n, row.PointsPerSec, row.BytesPerPoint, row.OpenSeconds, row.LatestAllMs, row.MeanMs, row.RawHourMs, row.Checked)
	return row, nil
}

// importStore imports the generated history into a new server on dir in
// streamed requests of at most maxImportRows rows, back to back, and stops
// it: the points, the time the requests took and the server's peak RSS.
func (o ScaleOptions) importStore(dir string, tags, step, days int) (int64, time.Duration, int64, error) {
	srv, _, err := openServer(o.Exe, dir, o.Profile)
	if err != nil {
		return 0, 0, 0, err
	}
	g := newScaleGen(tags, step)
	steps := int64(days) * 86400 / int64(step)
	per := max(1, maxImportRows/int64(tags))
	var n int64
	var el time.Duration
	for from := int64(0); from < steps; from += per {
		to := min(steps, from+per)
		k, d, err := importStream(srv.addr, func(w io.Writer) (int64, error) { return g.write(w, from, to) })
		if err != nil {
			srv.stop()
			return 0, 0, 0, err
		}
		n, el = n+k, el+d
	}
	peak := procStatus(srv.cmd.Process.Pid, "VmHWM")
	if _, err := srv.stop(); err != nil {
		return 0, 0, 0, fmt.Errorf("stop server: %w", err)
	}
	return n, el, peak, nil
}

// Imports that take less than minImportTime in all are repeated, up to
// ScaleOptions.ImportRepeats.
const minImportTime = 10 * time.Second

// median is the middle of vs (the mean of the two middle ones for an even
// count); vs is not changed.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(vs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// rawHours times raw reads of one hour at spread-out places in [from,
// to) and checks each holds an hour of samples; the median in ms.
func rawHours(addr, tagName string, from, to int64, step, runs int, bad *[]string) float64 {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	hours := (to - from) / 3600000
	want := 3600 / step
	var ds []float64
	for i := range runs {
		h := from + (int64(i)*7919%hours)*3600000
		start := time.Now()
		resp, err := c.Get(fmt.Sprintf("http://%s/api/v1/data?tag=%s&from=%d&to=%d&agg=raw&points=100000", addr, tagName, h, h+3600000))
		if err != nil {
			*bad = append(*bad, err.Error())
			return math.NaN()
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ds = append(ds, float64(time.Since(start).Microseconds())/1000)
		if pts, err := dataPoints(b); err != nil || len(pts) != want {
			*bad = append(*bad, fmt.Sprintf("raw hour at %d: %d samples, want %d (%v)", h, len(pts), want, err))
			return math.NaN()
		}
	}
	sort.Float64s(ds)
	return ds[len(ds)/2]
}

// countFiles counts the regular files under dir.
func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// procTicks is the user and system CPU time of pid in seconds.
func procCPU(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return (u + k) / 100 // USER_HZ
}

// procWriteBytes is write_bytes of /proc/PID/io: what the process made
// the block device write.
func procWriteBytes(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// live posts every tag's current value 10 times a second (one CSV import
// per tick, answered once durable: the push road of a running Pith) for
// LiveFor and measures what the server holds.
func (o ScaleOptions) live(ctx context.Context, dir string) (*LiveResult, error) {
	os.RemoveAll(dir)
	defer os.RemoveAll(dir)
	const hz = 10
	fmt.Fprintf(o.Out, "scale: live: %d tags at %d Hz for %v ...\n", o.LiveTags, hz, o.LiveFor)
	srv, _, err := openServer(o.Exe, dir, o.Profile)
	if err != nil {
		return nil, err
	}
	pid := srv.cmd.Process.Pid
	res := &LiveResult{Tags: o.LiveTags, RateHz: hz, Offered: float64(o.LiveTags * hz)}
	names := make([]string, o.LiveTags)
	for i := range names {
		names[i] = "live.t" + strconv.Itoa(i) + ","
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, DisableCompression: true}}
	url := "http://" + srv.addr + "/api/v1/import"
	var mu sync.Mutex
	var lat []float64
	var acked int64
	windows := make([]int64, 10)
	sem := make(chan struct{}, 8) // requests in flight
	var wg sync.WaitGroup
	cpu0, wr0 := procCPU(pid), procWriteBytes(pid)
	start := time.Now()
	tick := time.NewTicker(time.Second / hz)
	for k := 0; time.Since(start) < o.LiveFor && ctx.Err() == nil; k++ {
		<-tick.C
		now := time.Now()
		var body bytes.Buffer
		body.Grow(o.LiveTags * 32)
		b := body.AvailableBuffer()
		for i, n := range names {
			b = append(b, n...)
			b = strconv.AppendInt(b, now.UnixMilli(), 10)
			b = append(b, ',')
			b = strconv.AppendFloat(b, float64((i+k)%1000)/10, 'f', -1, 64)
			b = append(b, '\n')
		}
		select {
		case sem <- struct{}{}:
		default:
			mu.Lock()
			res.Errors++ // the server is 8 batches behind: this one is not sent
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func(b []byte, sent time.Time) {
			defer func() { <-sem; wg.Done() }()
			resp, err := client.Post(url, "text/csv", bytes.NewReader(b))
			ok := err == nil && resp.StatusCode == 200
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			done := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				res.Errors++
				return
			}
			lat = append(lat, float64(done.Sub(sent).Microseconds())/1000)
			acked += int64(len(names))
			w := int(float64(len(windows)) * done.Sub(start).Seconds() / o.LiveFor.Seconds())
			windows[min(max(w, 0), len(windows)-1)] += int64(len(names))
		}(b, now)
	}
	tick.Stop()
	wg.Wait()
	el := time.Since(start).Seconds()
	res.Seconds = el
	res.CPUPercent = 100 * (procCPU(pid) - cpu0) / el
	res.DeviceBytes = procWriteBytes(pid) - wr0
	res.RSSBytes = procStatus(pid, "VmRSS")
	res.PeakRSS = procStatus(pid, "VmHWM")
	res.Held = float64(acked) / el
	if acked > 0 {
		res.BytesPerPt = float64(res.DeviceBytes) / float64(acked)
	}
	for _, w := range windows {
		res.Windows = append(res.Windows, float64(w)/(o.LiveFor.Seconds()/float64(len(windows))))
	}
	sort.Float64s(lat)
	if len(lat) > 0 {
		res.P50Ms, res.P99Ms, res.MaxMs = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	}
	if _, err := srv.stop(); err != nil {
		return nil, fmt.Errorf("stop server: %w", err)
	}
	res.Files = countFiles(dir)
	if acked > 0 {
		res.DiskPerPt = float64(dirBytes(dir)) / float64(acked)
	}
	fmt.Fprintf(o.Out, "scale: live: held %.0f of %.0f values/s, p99 %.1f ms, cpu %.1f%%, %d files\n", res.Held, res.Offered, res.P99Ms, res.CPUPercent, res.Files)
	return res, nil
}
