//go:build pithprof

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

// This file is built only with `-tags pithprof` (the soak does it when
// PITH_SOAK_PROFILE is set): the released binary has no profiler. With
// PITH_HEAP_PROFILE_DIR set, the process writes a heap profile there every
// PITH_HEAP_PROFILE_EVERY (default 30s), named by its seconds since start,
// after a collection, so that inuse_space is what is live, and beside it
// the runtime's memory classes (runtime/metrics) as metrics-NNNNN.txt:
// where resident memory goes besides live objects (free and unreleased
// heap pages, stacks, the runtime's own structures).
func init() {
	cpuProfile()
	dir, every := profileEnv("heap profiles", "PITH_HEAP_PROFILE_DIR", "PITH_HEAP_PROFILE_EVERY", 30*time.Second,
		"a positive duration", time.ParseDuration)
	if dir == "" {
		return
	}
	// One sample per 64 KiB allocated rather than per 512 KiB: growth of
	// a megabyte over an hour shows by its allocation site.
	runtime.MemProfileRate = 64 << 10
	start := time.Now()
	go func() {
		for range time.Tick(every) {
			runtime.GC()
			name := filepath.Join(dir, fmt.Sprintf("heap-%05d.pb.gz", int(time.Since(start).Seconds())))
			f, err := os.Create(name)
			if err != nil {
				fmt.Fprintf(os.Stderr, "heap profile: %v\n", err)
				continue
			}
			if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
				fmt.Fprintf(os.Stderr, "heap profile: %v\n", err)
			}
			f.Close()
			writeRuntimeMetrics(filepath.Join(dir, fmt.Sprintf("metrics-%05d.txt", int(time.Since(start).Seconds()))))
		}
	}()
}

// writeRuntimeMetrics writes the runtime's memory and GC figures, one
// "name value" line each.
func writeRuntimeMetrics(name string) {
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") || strings.HasPrefix(d.Name, "/gc/heap/goal") ||
			strings.HasPrefix(d.Name, "/gc/heap/live") || strings.HasPrefix(d.Name, "/gc/gomemlimit") {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	var b strings.Builder
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			fmt.Fprintf(&b, "%s %d\n", s.Name, s.Value.Uint64())
		}
	}
	if err := os.WriteFile(name, []byte(b.String()), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "runtime metrics: %v\n", err)
	}
}

// cpuProfile, with PITH_CPU_PROFILE_DIR set, writes a CPU profile of the
// first PITH_CPU_PROFILE_SECONDS (default 60) there as cpu-PID.pb.gz: the
// process's pid names it, so that a `pith bench` and the servers it starts
// each write their own.
func cpuProfile() {
	dir, secs := profileEnv("cpu profile", "PITH_CPU_PROFILE_DIR", "PITH_CPU_PROFILE_SECONDS", 60*time.Second,
		"a positive number", func(s string) (time.Duration, error) {
			n, err := strconv.Atoi(s)
			return time.Duration(n) * time.Second, err
		})
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("cpu-%d.pb.gz", os.Getpid())))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		profileFail("cpu profile: %v", err)
	}
	time.AfterFunc(secs, func() {
		pprof.StopCPUProfile()
		f.Close()
	})
}

// profileEnv reads a profile's directory from dirVar ("" when unset, and
// nothing else is read) and its period from periodVar (def when unset),
// and makes the directory; a bad period or directory ends the process.
func profileEnv(what, dirVar, periodVar string, def time.Duration, want string, parse func(string) (time.Duration, error)) (string, time.Duration) {
	dir := os.Getenv(dirVar)
	if dir == "" {
		return "", 0
	}
	period := def
	if s := os.Getenv(periodVar); s != "" {
		d, err := parse(s)
		if err != nil || d <= 0 {
			profileFail("%s=%q: want %s", periodVar, s, want)
		}
		period = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		profileFail("%s: %v", what, err)
	}
	return dir, period
}

// profileFail reports a profiler's bad setting and ends the process.
func profileFail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}
