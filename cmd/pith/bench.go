package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pith-historian/pith/internal/agent"
	"github.com/pith-historian/pith/internal/bench"
)

const benchUsage = `Usage: pith bench [--quick] [--json] [--datasets DIR] [--work DIR]
       pith bench store [flags] DATASET_DIR
       pith bench latency [--period 1ms] [--duration 30s] [--mode nanosleep|gosleep]
       pith bench scale [--quick] [--profile small] [flags]

Without a benchmark name, runs the six experiments of docs/bench.md
(acquisition, FREEZE and the archive pipeline, the store, HTTP ingest,
scheduling latency) and prints a report with each figure beside the D2000
reference figure (Raspberry Pi), ending with a capacity statement.

Benchmarks:
  store     import the standard datasets over HTTP, measure disk and memory, time Q1-Q6
  latency   cyclictest-style wake-up latency on a locked OS thread (and cyclictest, when installed)
  scale     how cost grows with tags, years of history and a live load (docs/scaling.md)
`

func runBench(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "store":
			return runBenchStore(args[1:])
		case "latency":
			return runBenchLatency(args[1:])
		case "scale":
			return runBenchScale(args[1:])
		case "-h", "--help", "help":
			fmt.Fprint(os.Stderr, benchUsage)
			return nil
		}
	}
	return runBenchAll(args)
}

// writeJSON prints v indented on stdout.
func writeJSON(v any) error {
	e := json.NewEncoder(os.Stdout)
	e.SetIndent("", "  ")
	return e.Encode(v)
}

func runBenchAll(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "a tenth of the datasets and short runs (under a minute)")
	asJSON := fs.Bool("json", false, "print JSON instead of markdown")
	datasets := fs.String("datasets", "", "directory with plant.csv and feed.csv (default: generated)")
	work := fs.String("work", "", "scratch directory (default: a temporary one, removed)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), benchUsage+"\nFlags:\n"); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return fmt.Errorf("unknown benchmark %q", fs.Arg(0))
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := bench.RunAll(ctx, bench.Options{Quick: *quick, DatasetDir: *datasets, Exe: exe, WorkDir: *work,
		Out: os.Stderr, Log: agent.NewLogger("error")})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(rep)
	}
	rep.WriteMarkdown(os.Stdout)
	return nil
}

func runBenchLatency(args []string) error {
	fs := flag.NewFlagSet("bench latency", flag.ContinueOnError)
	period := fs.Duration("period", time.Millisecond, "wake-up period")
	duration := fs.Duration("duration", 30*time.Second, "how long to measure")
	mode := fs.String("mode", "nanosleep", "nanosleep (clock_nanosleep, TIMER_ABSTIME, locked thread) or gosleep (time.Sleep)")
	noCyc := fs.Bool("no-cyclictest", false, "do not run cyclictest alongside")
	asJSON := fs.Bool("json", false, "print JSON")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith bench latency [flags]\n\nWakes every period on a locked OS thread and records how late each wake-up is,\nas cyclictest does; runs cyclictest (Debian rt-tests) alongside when installed.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	o := bench.LatencyOptions{Period: *period, Duration: *duration, Mode: bench.LatencyMode(*mode)}
	var out []bench.LatencyStats
	if *noCyc || o.Mode == bench.ModeGoSleep {
		s, err := bench.RunLatency(ctx, o)
		if err != nil {
			return err
		}
		out = append(out, s)
	} else {
		s, cyc, err := bench.LatencyWithCyclictest(ctx, o)
		if err != nil {
			return err
		}
		out = append(out, s)
		if cyc != nil {
			out = append(out, *cyc)
		} else {
			fmt.Fprintf(os.Stderr, "no comparison: %v\n", bench.ErrNoCyclictest)
		}
	}
	if *asJSON {
		return writeJSON(out)
	}
	for _, s := range out {
		bench.WriteLatency(os.Stdout, s)
	}
	return nil
}

func runBenchStore(args []string) error {
	fs := flag.NewFlagSet("bench store", flag.ContinueOnError)
	runs := fs.Int("runs", 100, "timed runs per query (the median is reported)")
	work := fs.String("work", "", "directory for the data stores (default: a temporary one, removed)")
	durability := fs.String("durability", "fsync", "store durability: fsync or relaxed")
	profile := fs.String("profile", "", "small: the server as on a small board (GOMAXPROCS=1, one CPU, GOMEMLIMIT=1GiB)")
	asJSON := fs.Bool("json", false, "print JSON instead of markdown")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith bench store [flags] DATASET_DIR\n\nDATASET_DIR holds plant.csv and feed.csv from shared/bench/gen_datasets.py.\nEach dataset is imported in one HTTP request into a fresh `pith serve`,\nwhich is stopped (disk size), restarted (idle memory) and queried.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("want DATASET_DIR")
	}
	prof, err := bench.ParseProfile(*profile)
	if err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	res, err := bench.RunStore(bench.StoreOptions{
		DatasetDir: fs.Arg(0), Exe: exe, WorkDir: *work, Runs: *runs, Durability: *durability, Profile: prof, Out: os.Stderr,
	})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(res)
	}
	res.WriteMarkdown(os.Stdout)
	return nil
}

func runBenchScale(args []string) error {
	fs := flag.NewFlagSet("bench scale", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "small sizes and a 5 s live test (the CI form, well under a minute)")
	profile := fs.String("profile", "", "small: the server as on a small board (GOMAXPROCS=1, one CPU, GOMEMLIMIT=1GiB)")
	sizes := fs.String("tags", "", "the Tags curve's tag counts, comma-separated (default 100,1000,10000,100000; quick 100,1000)")
	days := fs.Int("days", 0, "days of the Tags curve's history, each tag at 1/min (default 7; quick 1)")
	years := fs.String("years", "", "the History curve's spans of one tag at 10 s, in years (default 1,3,10; quick 1)")
	wide := fs.Int("wide-tags", -1, "tags at 1/min for a year in the History curve, 0 to skip (default 1000; quick 0)")
	liveTags := fs.Int("live-tags", 0, "tags of the Live test, at 10 Hz (default 10000; quick 1000)")
	liveFor := fs.Duration("live", 0, "length of the Live test, 0 for the default (60m; quick 5s), negative to skip")
	runs := fs.Int("runs", 0, "timed runs per query (default 50; quick 10)")
	work := fs.String("work", "", "directory for the data stores (default: a temporary one, removed)")
	svg := fs.String("svg", "", "directory to write the plots to (scale-tags.svg, scale-history.svg, scale-live.svg)")
	asJSON := fs.Bool("json", false, "print JSON instead of markdown")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith bench scale [flags]\n\nGenerates its own data on a fresh store for each size and measures import,\ndisk, memory, open time and reads (Tags and History curves), then a live\nload through the push road (docs/scaling.md).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return errors.New("bench scale takes no arguments")
	}
	o := bench.ScaleFull()
	if *quick {
		o = bench.ScaleQuick()
	}
	var err error
	if o.Profile, err = bench.ParseProfile(*profile); err != nil {
		return err
	}
	ints := func(s string) ([]int, error) {
		var out []int
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("bad list %q: want positive integers", s)
			}
			out = append(out, n)
		}
		return out, nil
	}
	if *sizes != "" {
		if o.TagSizes, err = ints(*sizes); err != nil {
			return err
		}
	}
	if *days < 0 {
		return fmt.Errorf("bad --days %d: want a positive number of days", *days)
	}
	if *days > 0 {
		o.TagDays = *days
	}
	if *years != "" {
		if o.Years, err = ints(*years); err != nil {
			return err
		}
	}
	if *wide >= 0 {
		o.WideTags = *wide
	}
	if *liveTags > 0 {
		o.LiveTags = *liveTags
	}
	if *liveFor > 0 {
		o.LiveFor = *liveFor
	} else if *liveFor < 0 {
		o.LiveFor = 0
	}
	if *runs > 0 {
		o.Runs = *runs
	}
	if o.Exe, err = os.Executable(); err != nil {
		return err
	}
	o.WorkDir, o.Out = *work, os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The plots' directory is made before the run, and the report printed
	// before the plots are written: a run takes up to hours, and a bad
	// --svg must not lose it.
	if *svg != "" {
		if err := os.MkdirAll(*svg, 0o755); err != nil {
			return fmt.Errorf("--svg: %w", err)
		}
	}
	res, err := bench.RunScale(ctx, o)
	if err != nil {
		return err
	}
	if *asJSON {
		err = writeJSON(res)
	} else {
		res.WriteMarkdown(os.Stdout)
	}
	if *svg != "" {
		names, perr := res.WritePlots(*svg, "")
		if perr != nil {
			return perr
		}
		fmt.Fprintf(os.Stderr, "plots: %s\n", strings.Join(names, ", "))
	}
	if w := res.Wrong(); w != "" {
		return errors.New("bench scale: wrong answers: " + w)
	}
	return err
}
