package main

// The soak's pith process: the profiled build and its environment, and
// the readers of its /proc files.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// soakProfile returns the period of the heap profiles asked for by
// PITH_SOAK_PROFILE (a duration such as "30s"; empty: none). With it the
// soak runs a pith built with -tags pithprof (heapprof.go), which writes a
// heap profile to $PITH_SOAK_OUT/profiles every period; read them with
// `go tool pprof -sample_index=inuse_space -top BIN FILE` or diff two with
// `-diff_base`.
func soakProfile(t *testing.T) time.Duration {
	v := os.Getenv("PITH_SOAK_PROFILE")
	if v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("PITH_SOAK_PROFILE=%q: want a positive duration", v)
	}
	return d
}

// buildProfiledPith builds pith with the heap profiler into out, where it
// stays beside the profiles (pprof needs the binary that wrote them).
func buildProfiledPith(t *testing.T, out string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not in PATH; it is needed to build pith")
	}
	bin := filepath.Join(out, "pith-prof")
	build := exec.Command(goBin, "build", "-tags", "pithprof", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build pith with the profiler: %v\n%s", err, b)
	}
	return bin
}

// profileEnv is the environment of a profiled pith serve.
func (s *soak) profileEnv() []string {
	if s.profile == 0 {
		return nil
	}
	return append(os.Environ(), "PITH_HEAP_PROFILE_DIR="+filepath.Join(s.out, "profiles"),
		"PITH_HEAP_PROFILE_EVERY="+s.profile.String())
}

// readFull returns the text of a file, or "" when it cannot be read.
func readFull(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// procField returns the number after key in a /proc text file.
func procField(text, key string) int64 {
	for line := range strings.Lines(text) {
		if rest, ok := strings.CutPrefix(line, key); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return -1
}
