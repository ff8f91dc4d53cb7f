package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StoreOptions configure RunStore.
type StoreOptions struct {
	DatasetDir string    // holds plant.csv and feed.csv (docs/bench.md)
	Exe        string    // the pith binary to run as the server
	WorkDir    string    // where the data directories go (a temporary one when empty)
	Runs       int       // timed runs per query
	Durability string    // fsync or relaxed
	Profile    Profile   // how the server is confined (the default: not at all)
	Out        io.Writer // progress lines
}

// StoreResult is what `pith bench store` prints.
type StoreResult struct {
	Datasets []DatasetResult `json:"datasets"`
	Queries  []QueryResult   `json:"queries"`
}

// DatasetResult is the import of one dataset into a fresh store.
type DatasetResult struct {
	Name          string  `json:"name"`
	Points        int     `json:"points"`
	ImportSeconds float64 `json:"import_seconds"`
	PointsPerSec  float64 `json:"points_per_s"`
	PeakRSSBytes  int64   `json:"peak_rss_bytes"`
	IdleRSSBytes  int64   `json:"idle_rss_bytes"` // after a restart, before any query
	DiskBytes     int64   `json:"disk_bytes"`     // after a graceful stop
	BytesPerPoint float64 `json:"bytes_per_point"`
	WrittenBytes  int64   `json:"written_bytes"` // by the server process, start to stop
	WriteAmp      float64 `json:"write_amplification"`
}

// QueryResult is one standard query's latency over HTTP (keep-alive).
type QueryResult struct {
	Name     string  `json:"name"`
	MedianMs float64 `json:"median_ms"`
	P90Ms    float64 `json:"p90_ms"`
	FirstMs  float64 `json:"first_ms"` // the first (cold) run after restart
	Correct  bool    `json:"correct"`
	Detail   string  `json:"detail,omitempty"`
}

// server is a `pith serve` child process.
type server struct {
	cmd  *exec.Cmd
	addr string
	dir  string
}

func startServer(exe, dir, durability string, prof Profile) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(dir + ".toml")
	conf := fmt.Sprintf("[log]\nlevel = \"warn\"\n[store]\ndurability = %q\n", durability)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	cmd := prof.command(exe, "serve", "--config", cfg, "--data", dir, "--listen", addr)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	s := &server{cmd: cmd, addr: addr, dir: dir}
	for i := 0; i < 600; i++ {
		// The probe is /-/ready, which answers 200 once the store is open
		// and costs nothing: a probe that listed every tag left the
		// garbage of its answer in the idle RSS measured next (7 MB more
		// 1 s after start for 20,000 tags).
		if r, err := http.Get("http://" + addr + "/-/ready"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	return nil, fmt.Errorf("server on %s did not answer", addr)
}

// procStatus reads a field of /proc/PID/status in bytes.
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), field+":") {
			fs := strings.Fields(sc.Text())
			if len(fs) >= 2 {
				kb, _ := strconv.ParseInt(fs[1], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// stop sends SIGTERM and returns the bytes the process wrote to storage.
func (s *server) stop() (written int64, err error) {
	s.cmd.Process.Signal(syscall.SIGTERM)
	err = s.cmd.Wait()
	if ru, ok := s.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		written = int64(ru.Oublock) * 512
	}
	return written, err
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// importFile posts a dataset in one streamed request.
func importFile(addr, path string) (int, time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	start := time.Now()
	resp, err := http.Post("http://"+addr+"/api/v1/import", "text/csv", f)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	el := time.Since(start)
	if resp.StatusCode != 200 {
		return 0, el, fmt.Errorf("import %s: %s: %s", path, resp.Status, body)
	}
	var r struct{ Points int }
	if err := json.Unmarshal(body, &r); err != nil {
		return 0, el, fmt.Errorf("import %s: %w", path, err)
	}
	return r.Points, el, nil
}

// RunStore imports each dataset into a fresh server, stops it, measures
// the disk, restarts it and times the standard queries.
func RunStore(o StoreOptions) (*StoreResult, error) {
	if o.Runs <= 0 {
		o.Runs = 100
	}
	if o.Durability == "" {
		o.Durability = "fsync"
	}
	work := o.WorkDir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "pith-bench-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(work)
	} else if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "computing reference answers from %s ...\n", o.DatasetDir)
	ref, bms, hours, err := computeReference(o.DatasetDir)
	if err != nil {
		return nil, err
	}
	res := &StoreResult{}
	queries := map[string][]benchQuery{
		"feed":  feedQueries(bms),
		"plant": plantQueries(ref, hours),
	}
	for _, name := range []string{"plant", "feed"} {
		dir := filepath.Join(work, name)
		srv, err := startServer(o.Exe, dir, o.Durability, o.Profile)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(o.Out, "importing %s.csv ...\n", name)
		n, el, err := importFile(srv.addr, filepath.Join(o.DatasetDir, name+".csv"))
		if err != nil {
			srv.stop()
			return nil, err
		}
		d := DatasetResult{Name: name, Points: n, ImportSeconds: el.Seconds(), PointsPerSec: float64(n) / el.Seconds()}
		d.PeakRSSBytes = procStatus(srv.cmd.Process.Pid, "VmHWM")
		if d.WrittenBytes, err = srv.stop(); err != nil {
			return nil, fmt.Errorf("stop server: %w", err)
		}
		d.DiskBytes = dirBytes(dir)
		d.BytesPerPoint = float64(d.DiskBytes) / float64(n)
		if d.DiskBytes > 0 {
			d.WriteAmp = float64(d.WrittenBytes) / float64(d.DiskBytes)
		}
		if srv, err = startServer(o.Exe, dir, o.Durability, o.Profile); err != nil {
			return nil, err
		}
		time.Sleep(time.Second)
		d.IdleRSSBytes = procStatus(srv.cmd.Process.Pid, "VmRSS")
		res.Datasets = append(res.Datasets, d)
		for _, bq := range queries[name] {
			res.Queries = append(res.Queries, timeQuery(srv.addr, bq, o.Runs))
		}
		srv.stop()
	}
	sort.SliceStable(res.Queries, func(i, j int) bool { return res.Queries[i].Name < res.Queries[j].Name })
	return res, nil
}

func timeQuery(addr string, bq benchQuery, runs int) QueryResult {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}}
	r := QueryResult{Name: bq.Name, Correct: true}
	var ds []float64
	for i := 0; i < runs; i++ {
		paths := strings.Split(bq.Path, "\n")
		var bodies [][]byte
		start := time.Now()
		for _, p := range paths {
			resp, err := c.Get("http://" + addr + p)
			if err != nil {
				r.Correct, r.Detail = false, err.Error()
				return r
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				r.Correct, r.Detail = false, fmt.Sprintf("%s: %s", resp.Status, b)
				return r
			}
			bodies = append(bodies, b)
		}
		ms := float64(time.Since(start).Microseconds()) / 1000
		if i == 0 {
			r.FirstMs = ms
			joined := strings.Join(func() []string {
				s := make([]string, len(bodies))
				for k, b := range bodies {
					s[k] = string(b)
				}
				return s
			}(), "\n")
			if err := bq.Check([]byte(joined)); err != nil {
				r.Correct, r.Detail = false, err.Error()
			}
		}
		ds = append(ds, ms)
	}
	sort.Float64s(ds)
	r.MedianMs = ds[len(ds)/2]
	r.P90Ms = ds[len(ds)*9/10]
	return r
}

// dataPoints parses a /api/v1/data answer.
func dataPoints(body []byte) ([][2]*float64, error) {
	var r struct {
		Points [][2]*float64 `json:"points"`
	}
	err := json.Unmarshal(body, &r)
	return r.Points, err
}

func feedQueries(bms [3]*bucketMeans) []benchQuery {
	var out []benchQuery
	for i, b := range bms {
		b := b
		out = append(out, benchQuery{
			Name: fmt.Sprintf("Q%d", i+1),
			Path: fmt.Sprintf("/api/v1/data?tag=power&from=%d&to=%d&points=%d&agg=mean", b.from, b.to, b.n),
			Check: func(body []byte) error {
				pts, err := dataPoints(body)
				if err != nil {
					return err
				}
				wantN, wantSum := b.summary()
				n, sum := 0, 0.0
				for _, p := range pts {
					if p[1] != nil {
						n++
						sum += *p[1]
					}
				}
				if len(pts) != b.n || n != wantN || !near(sum, wantSum) {
					return fmt.Errorf("got %d buckets, %d non-null, sum %v; want %d, %d, %v", len(pts), n, sum, b.n, wantN, wantSum)
				}
				return nil
			},
		})
	}
	return out
}

func plantQueries(ref *reference, h *hourly) []benchQuery {
	// Q4 names the 100 plant tags: the server also holds its own pith.sys tags.
	q4path := "/api/v1/latest?tag=" + strings.Join(ref.plantNames, "&tag=")
	q4 := benchQuery{Name: "Q4", Path: q4path, Check: func(body []byte) error {
		var r struct {
			Values []struct {
				Tag   string  `json:"tag"`
				TS    int64   `json:"ts"`
				Value float64 `json:"value"`
			} `json:"values"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return err
		}
		var sum float64
		var maxTS int64
		for _, v := range r.Values {
			sum += v.Value
			if v.TS > maxTS {
				maxTS = v.TS
			}
		}
		if len(r.Values) != ref.q4N || !near(sum, ref.q4Sum) || maxTS != ref.q4MaxTS {
			return fmt.Errorf("got %d values, sum %v, max ts %d; want %d, %v, %d", len(r.Values), sum, maxTS, ref.q4N, ref.q4Sum, ref.q4MaxTS)
		}
		return nil
	}}
	q5 := benchQuery{Name: "Q5",
		Path: fmt.Sprintf("/api/v1/data?tag=plant.ai00&from=%d&to=%d&points=100000&agg=raw", benchT0+12*benchHour, benchT0+13*benchHour),
		Check: func(body []byte) error {
			pts, err := dataPoints(body)
			if err != nil {
				return err
			}
			var sum float64
			for _, p := range pts {
				if p[1] != nil {
					sum += *p[1]
				}
			}
			if len(pts) != ref.q5N || !near(sum, ref.q5Sum) {
				return fmt.Errorf("got %d samples, sum %v; want %d, %v", len(pts), sum, ref.q5N, ref.q5Sum)
			}
			return nil
		}}
	var paths []string
	for _, agg := range []string{"min", "max", "mean"} {
		paths = append(paths, fmt.Sprintf("/api/v1/data?tag=plant.ai00&from=%d&to=%d&points=24&agg=%s", benchT0, benchT0+24*benchHour, agg))
	}
	q6 := benchQuery{Name: "Q6", Path: strings.Join(paths, "\n"), Check: func(body []byte) error {
		parts := strings.Split(string(body), "\n")
		mn, mx, mean := h.sums()
		for i, want := range []float64{mn, mx, mean} {
			pts, err := dataPoints([]byte(parts[i]))
			if err != nil {
				return err
			}
			var sum float64
			for _, p := range pts {
				if p[1] != nil {
					sum += *p[1]
				}
			}
			if len(pts) != 24 || !near(sum, want) {
				return fmt.Errorf("%s: got %d buckets, sum %v; want 24, %v", []string{"min", "max", "mean"}[i], len(pts), sum, want)
			}
		}
		return nil
	}}
	return []benchQuery{q4, q5, q6}
}

// WriteMarkdown prints the result as the README's table.
func (r *StoreResult) WriteMarkdown(w io.Writer) {
	fmt.Fprintf(w, "| dataset | points | import points/s | bytes/point on disk | peak RSS import | idle RSS after restart | bytes written by the server / on disk |\n|---|---|---|---|---|---|---|\n")
	for _, d := range r.Datasets {
		fmt.Fprintf(w, "| %s | %d | %.2f M | %.3f | %.0f MB | %.0f MB | %.2f |\n", d.Name, d.Points, d.PointsPerSec/1e6,
			d.BytesPerPoint, float64(d.PeakRSSBytes)/1e6, float64(d.IdleRSSBytes)/1e6, d.WriteAmp)
	}
	fmt.Fprintf(w, "\n| query | median ms | p90 ms | first (cold) ms | answer |\n|---|---|---|---|---|\n")
	for _, q := range r.Queries {
		ok := "matches reference"
		if !q.Correct {
			ok = "WRONG: " + q.Detail
		}
		fmt.Fprintf(w, "| %s | %.3f | %.3f | %.3f | %s |\n", q.Name, q.MedianMs, q.P90Ms, q.FirstMs, ok)
	}
}
