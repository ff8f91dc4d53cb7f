package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// benchWriters is the archive writer count of the pipeline experiments:
// concurrent writers share one WAL fsync (group commit), and with the
// queue's default of 2 the path is bound by fsync latency, not CPU (about
// 0.3 M values/s at 0.1 core here, against 1.5 M at 0.45 core with 4).
// D2000 also used 4 write threads.
const benchWriters = 4

// Options configure RunAll, the whole `pith bench`.
type Options struct {
	Quick      bool   // a tenth of the datasets and short runs: under a minute
	DatasetDir string // plant.csv and feed.csv; empty generates them (a tenth with Quick)
	Exe        string // the pith binary, run as the server of the store part
	WorkDir    string // scratch directory (a temporary one when empty)
	Out        io.Writer
	Log        *slog.Logger
}

// Figure is one line of the report: a measured value beside its reference
// figure (docs/bench.md).
type Figure struct {
	Experiment string  `json:"experiment"`
	What       string  `json:"what"`
	Value      float64 `json:"value"`
	Unit       string  `json:"unit"`
	Reference  string  `json:"reference"` // the D2000 reference figure (or a peer's, or the target)
	Note       string  `json:"note,omitempty"`
}

// Capacity is the report's conclusion.
type Capacity struct {
	// Sustainable is half the slowest stage's measured rate (50% headroom).
	Sustainable float64 `json:"sustainable_values_per_s"`
	Bottleneck  string  `json:"first_bottleneck"`
	Statement   string  `json:"statement"`
}

// Report is the result of RunAll.
type Report struct {
	Host     string            `json:"host"`
	CPUs     int               `json:"cpus"`
	Quick    bool              `json:"quick"`
	Seconds  float64           `json:"seconds"`
	Figures  []Figure          `json:"figures"`
	Acq100   *AcqResult        `json:"acq_100_tags_1s,omitempty"`
	AcqFast  *AcqResult        `json:"acq_10_tags_fast,omitempty"`
	Freeze   *PipelineResult   `json:"freeze,omitempty"`
	Pipeline *PipelineResult   `json:"pipeline,omitempty"`
	Store    *StoreResult      `json:"store,omitempty"`
	HTTP     *HTTPIngestResult `json:"http_ingest,omitempty"`
	Latency  []LatencyStats    `json:"latency,omitempty"`
	Capacity Capacity          `json:"capacity"`
	Gaps     []string          `json:"gaps,omitempty"` // experiments that could not run, and why
}

func (r *Report) add(exp, what string, v float64, unit, ref, note string) {
	r.Figures = append(r.Figures, Figure{Experiment: exp, What: what, Value: v, Unit: unit, Reference: ref, Note: note})
}

func (r *Report) gap(exp string, err error) {
	r.Gaps = append(r.Gaps, fmt.Sprintf("%s: %v", exp, err))
}

// scale picks the quick or the full value.
func scale[T any](quick bool, q, full T) T {
	if quick {
		return q
	}
	return full
}

// RunAll runs the experiments of docs/bench.md one after the other. A failing
// experiment is reported as a gap and the others still run.
func RunAll(ctx context.Context, o Options) (*Report, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	work := o.WorkDir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "pith-bench-"); err != nil {
			return nil, fmt.Errorf("create bench directory: %w", err)
		}
		defer os.RemoveAll(work)
	}
	host, _ := os.Hostname()
	rep := &Report{Host: host, CPUs: runtime.NumCPU(), Quick: o.Quick}
	start := time.Now()
	q := o.Quick
	step := func(name string) { fmt.Fprintf(o.Out, "[%5.1fs] %s ...\n", time.Since(start).Seconds(), name) }

	// 1 and 2: acquisition over loopback Modbus, through the archive.
	step("1. 100 tags over loopback Modbus every second")
	if r, err := RunAcq(ctx, AcqOptions{Stations: 1, Tags: 100, Period: time.Second,
		Duration: scale(q, 5*time.Second, 60*time.Second), Dir: filepath.Join(work, "acq100"), Log: o.Log}); err != nil {
		rep.gap("acquisition 100 tags", err)
	} else {
		rep.Acq100 = &r
		rep.add("1", "CPU for 100 tags polled every 1 s and archived", r.CPUPercent, "% of a core", "D2000 on a Pi 3: not published as a figure", "target <= 0.5%")
	}
	step("2. 10 tags as fast as possible")
	if r, err := RunAcq(ctx, AcqOptions{Stations: 1, Tags: 10, Period: 0,
		Duration: scale(q, 3*time.Second, 10*time.Second), Dir: filepath.Join(work, "acqfast"), Log: o.Log}); err != nil {
		rep.gap("acquisition fast", err)
	} else {
		rep.AcqFast = &r
		rep.add("2", "Modbus polls/s, 10 registers, loopback, archived", r.PollsPerSec, "polls/s", "~130 polls/s (D2000, Pi 3)", "")
	}

	// 3: FREEZE at 100k values/s, then the sustained pipeline rate.
	freezeFor := scale(q, 5*time.Second, 60*time.Second)
	step(fmt.Sprintf("3. FREEZE %v at 100,000 values/s, then drain", freezeFor))
	if r, err := RunPipeline(ctx, PipelineOptions{Dir: filepath.Join(work, "freeze"), Tags: 1000, Rate: 100_000, Writers: benchWriters,
		Duration: time.Second, Freeze: freezeFor, Watch: 60 * time.Second, Verify: true, Out: o.Out, Log: o.Log}); err != nil {
		rep.gap("freeze", err)
	} else {
		rep.Freeze = r
		f := r.Freeze
		lost := fmt.Sprintf("accumulated %d; dropped %d; read back %d of %d", f.Accumulated, f.Dropped, r.ReadBack, r.Produced)
		rep.add("3", "FREEZE backlog drained", f.DrainPerSec, "values/s", "1,650/s drained (D2000, Pi 3); target >= 1,000,000/s", lost)
		rep.add("3", "peak archive write rate during the drain", f.PeakPerSec, "values/s", "2,500 writes/s peak, 4 threads (D2000, Pi 3)", "")
	}
	step("3b. sustained pipeline rate, producer -> tag table -> queue -> store, GOMAXPROCS=1")
	if r, err := RunPipeline(ctx, PipelineOptions{Dir: filepath.Join(work, "pipeline"), Tags: 1000,
		Duration: scale(q, 4*time.Second, 20*time.Second), MaxProcs: 1, Writers: benchWriters, Verify: true, Log: o.Log}); err != nil {
		rep.gap("pipeline", err)
	} else {
		rep.Pipeline = r
		rep.add("3", "sustained pipeline rate, GOMAXPROCS=1, 4 archive writers", r.PerSec, "values/s", "target >= 1,000,000/s with one core free",
			fmt.Sprintf("CPU %.2f cores; verified %v; commit %s", r.CPUCores, r.Verified, r.Commit))
	}

	// 4: the store on the standard datasets, through a child `pith serve`.
	step("4. store: import and Q1-Q6")
	if err := runStorePart(rep, o, work); err != nil {
		rep.gap("store", err)
	}

	// 5: HTTP ingest from concurrent clients.
	step("5. HTTP ingest, 4 concurrent clients")
	if r, err := RunHTTPIngest(ctx, HTTPIngestOptions{Dir: filepath.Join(work, "http"),
		Duration: scale(q, 3*time.Second, 10*time.Second), Log: o.Log}); err != nil {
		rep.gap("http ingest", err)
	} else {
		rep.HTTP = r
		rep.add("5", "HTTP import (CSV, 10k rows/request, durable), 4 clients", r.PointsPerSec, "values/s",
			"Hamustro on a Pi 3: ~1M events/min (16,700/s)", fmt.Sprintf("%.0f requests/s; line protocol not served yet", r.RequestsPerS))
	}

	// 6: scheduling latency.
	for _, p := range []time.Duration{time.Millisecond, 20 * time.Millisecond} {
		step(fmt.Sprintf("6. scheduling latency at %v", p))
		lo := LatencyOptions{Period: p, Duration: scale(q, 3*time.Second, 30*time.Second)}
		stats, cyc, err := LatencyWithCyclictest(ctx, lo)
		if err != nil {
			rep.gap("latency", err)
			continue
		}
		rep.Latency = append(rep.Latency, stats)
		rep.add("6", fmt.Sprintf("wake-up latency at %v, clock_nanosleep, avg / p99 / max", p), stats.P99, "us p99",
			"EPICS on a Pi, RT kernel: avg 8 us, max 50 us", fmt.Sprintf("avg %.0f, max %.0f us", stats.Avg, stats.Max))
		if cyc != nil {
			rep.Latency = append(rep.Latency, *cyc)
			rep.add("6", fmt.Sprintf("cyclictest at %v, same run", p), cyc.P99, "us p99", "", fmt.Sprintf("avg %.0f, max %.0f us", cyc.Avg, cyc.Max))
		} else {
			rep.Gaps = append(rep.Gaps, "cyclictest comparison: "+ErrNoCyclictest.Error())
		}
	}
	rep.Capacity = capacity(rep)
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// LatencyWithCyclictest runs the probe and, when installed, cyclictest
// alongside it with the same period and duration; cyc is nil without it.
func LatencyWithCyclictest(ctx context.Context, o LatencyOptions) (probe LatencyStats, cyc *LatencyStats, err error) {
	var cerr error
	var cs LatencyStats
	done := make(chan struct{})
	go func() { defer close(done); cs, cerr = RunCyclictest(ctx, o) }()
	probe, err = RunLatency(ctx, o)
	<-done
	if err != nil {
		return probe, nil, err
	}
	if cerr == nil {
		cyc = &cs
	}
	return probe, cyc, nil
}

func runStorePart(rep *Report, o Options, work string) error {
	ds := o.DatasetDir
	if ds == "" {
		ds = filepath.Join(work, "datasets")
		frac := scale(o.Quick, 0.1, 1.0)
		fmt.Fprintf(o.Out, "  generating datasets (%.0f%% of the standard size) in %s\n", 100*frac, ds)
		if err := GenerateDatasets(ds, frac); err != nil {
			return err
		}
	}
	if o.Exe == "" {
		return fmt.Errorf("no pith binary to run as the server")
	}
	r, err := RunStore(StoreOptions{DatasetDir: ds, Exe: o.Exe, WorkDir: filepath.Join(work, "store"),
		Runs: scale(o.Quick, 5, 100), Out: o.Out})
	if err != nil {
		return err
	}
	rep.Store = r
	for _, d := range r.Datasets {
		rep.add("4", "import "+d.Name+" over HTTP (one request)", d.PointsPerSec, "values/s", "emoncms PHPFina 1.47 M/s (x86)",
			fmt.Sprintf("%.2f B/point on disk", d.BytesPerPoint))
	}
	for _, qr := range r.Queries {
		ref := ""
		if qr.Name == "Q3" {
			ref = "emoncms timestore on a Pi: 45 ms (1000 points)"
		}
		note := "matches reference"
		if !qr.Correct {
			note = "WRONG: " + qr.Detail
		}
		rep.add("4", qr.Name+" median", qr.MedianMs, "ms", ref, note)
	}
	return nil
}

// capacity takes the slowest measured write path as the first bottleneck
// and keeps 50% headroom below it.
func capacity(r *Report) Capacity {
	type stage struct {
		name string
		rate float64
	}
	var st []stage
	if r.Pipeline != nil {
		st = append(st, stage{"the archive pipeline (tag table -> queue -> store) on one core", r.Pipeline.PerSec})
	}
	if r.Freeze != nil && r.Freeze.Freeze != nil && r.Freeze.Freeze.Drained {
		st = append(st, stage{"the archive drain after FREEZE", r.Freeze.Freeze.DrainPerSec})
	}
	if r.HTTP != nil {
		st = append(st, stage{"HTTP ingest (CSV import)", r.HTTP.PointsPerSec})
	}
	if r.AcqFast != nil && r.AcqFast.PollsPerSec > 0 {
		// One Modbus connection reads up to 125 registers per request.
		st = append(st, stage{"Modbus acquisition (one connection, 125 registers per request)", r.AcqFast.PollsPerSec * 125})
	}
	if len(st) == 0 {
		return Capacity{Statement: "no write path was measured"}
	}
	low := st[0]
	for _, s := range st[1:] {
		if s.rate < low.rate {
			low = s
		}
	}
	c := Capacity{Sustainable: low.rate / 2, Bottleneck: low.name}
	c.Statement = fmt.Sprintf("This machine sustains about %s values/s with 50%% headroom; the first bottleneck is %s (%s values/s measured).",
		human(c.Sustainable), low.name, human(low.rate))
	return c
}

// human prints a rate with a k or M suffix.
func human(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f M", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f k", v/1e3)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// WriteMarkdown prints the report.
func (r *Report) WriteMarkdown(w io.Writer) {
	mode := "full"
	if r.Quick {
		mode = "quick (a tenth of the datasets, short runs)"
	}
	fmt.Fprintf(w, "# pith bench on %s (%d CPUs), %s, %.0f s\n\n", r.Host, r.CPUs, mode, r.Seconds)
	fmt.Fprintf(w, "| # | what | this machine | reference (D2000, Raspberry Pi) / target | notes |\n|---|---|---|---|---|\n")
	for _, f := range r.Figures {
		fmt.Fprintf(w, "| %s | %s | %s %s | %s | %s |\n", f.Experiment, f.What, num(f.Value), f.Unit, f.Reference, f.Note)
	}
	if len(r.Latency) > 0 {
		fmt.Fprintf(w, "\n## Scheduling latency\n\n```\n")
		for _, s := range r.Latency {
			WriteLatency(w, s)
		}
		fmt.Fprintf(w, "```\n")
	}
	if r.Store != nil {
		fmt.Fprintf(w, "\n## Store\n\n")
		r.Store.WriteMarkdown(w)
	}
	if len(r.Gaps) > 0 {
		fmt.Fprintf(w, "\n## Not measured\n\n")
		for _, g := range r.Gaps {
			fmt.Fprintf(w, "- %s\n", g)
		}
	}
	fmt.Fprintf(w, "\n## Capacity\n\n%s\n", r.Capacity.Statement)
}

func num(v float64) string {
	switch {
	case v >= 1e4:
		return human(v)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
