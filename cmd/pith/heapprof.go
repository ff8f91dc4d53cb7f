//go:build pithprof

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"time"
)

// This file is built only with `-tags pithprof` (the soak does it when
// PITH_SOAK_PROFILE is set): the released binary has no profiler. With
// PITH_HEAP_PROFILE_DIR set, the process writes a heap profile there every
// PITH_HEAP_PROFILE_EVERY (default 30s), named by its seconds since start,
// after a collection, so that inuse_space is what is live.
func init() {
	dir := os.Getenv("PITH_HEAP_PROFILE_DIR")
	if dir == "" {
		return
	}
	every := 30 * time.Second
	if s := os.Getenv("PITH_HEAP_PROFILE_EVERY"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			fmt.Fprintf(os.Stderr, "PITH_HEAP_PROFILE_EVERY=%q: want a positive duration\n", s)
			os.Exit(2)
		}
		every = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "heap profiles: %v\n", err)
		os.Exit(2)
	}
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
		}
	}()
}
