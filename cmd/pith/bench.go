package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/pith-historian/pith/internal/agent"
	"github.com/pith-historian/pith/internal/bench"
)

const benchUsage = `Usage: pith bench [--quick] [--json] [--datasets DIR] [--work DIR]
       pith bench store [flags] DATASET_DIR
       pith bench latency [--period 1ms] [--duration 30s] [--mode nanosleep|gosleep]

Without a benchmark name, runs the six experiments of docs/bench.md
(acquisition, FREEZE and the archive pipeline, the store, HTTP ingest,
scheduling latency) and prints a report with each figure beside the D2000
reference figure (Raspberry Pi), ending with a capacity statement.

Benchmarks:
  store     import the standard datasets over HTTP, measure disk and memory, time Q1-Q6
  latency   cyclictest-style wake-up latency on a locked OS thread (and cyclictest, when installed)
`

func runBench(args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "store":
			return runBenchStore(args[1:])
		case "latency":
			return runBenchLatency(args[1:])
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
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	res, err := bench.RunStore(bench.StoreOptions{
		DatasetDir: fs.Arg(0), Exe: exe, WorkDir: *work, Runs: *runs, Durability: *durability, Out: os.Stderr,
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
