package bench

import (
	"context"
	"github.com/pith-historian/pith/internal/testpeer"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestLatencyHistMath(t *testing.T) {
	h := new(LatencyHist)
	// 1..100 us, once each, plus one 50 ms outlier beyond the fine range.
	for us := 1; us <= 100; us++ {
		h.Add(time.Duration(us)*time.Microsecond + 300*time.Nanosecond)
	}
	h.Add(50 * time.Millisecond)
	h.Add(-time.Microsecond) // early: counts as 0
	s := h.Stats()
	if s.Samples != 102 || s.Min != 0 || s.Max != 50000 {
		t.Fatalf("samples %d min %v max %v", s.Samples, s.Min, s.Max)
	}
	wantAvg := (5050.0 + 100*0.3 + 50000) / 102
	if d := s.Avg - wantAvg; d > 1e-6 || d < -1e-6 {
		t.Fatalf("avg %v, want %v", s.Avg, wantAvg)
	}
	// Rank 101 of 102 is the 100 us sample, reported as its bin's upper edge.
	if s.P99 != 101 {
		t.Fatalf("p99 %v, want 101", s.P99)
	}
	if got := h.Quantile(1); got != 50*time.Millisecond {
		t.Fatalf("q1 = %v", got)
	}
	if got := h.Quantile(0.5); got != 51*time.Microsecond {
		t.Fatalf("median = %v", got)
	}
	var total uint64
	for _, b := range s.Hist {
		total += b.Count
	}
	if total != s.Samples || s.Hist[len(s.Hist)-1].Count != 1 || s.Hist[0].Count != 10 {
		t.Fatalf("histogram %+v", s.Hist)
	}
}

func TestRunLatencyShort(t *testing.T) {
	for _, mode := range []LatencyMode{ModeNanosleep, ModeGoSleep} {
		s, err := RunLatency(context.Background(), LatencyOptions{Period: time.Millisecond, Duration: 100 * time.Millisecond, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		// Overruns restart the schedule, so a loaded machine takes fewer.
		if s.Samples == 0 || s.Samples > 100 || s.Min < 0 || s.Max < s.P99 || s.P99 < s.Min {
			t.Fatalf("%s: %+v", mode, s)
		}
	}
	if _, err := RunLatency(context.Background(), LatencyOptions{}); err == nil {
		t.Fatal("zero period accepted")
	}
}

const cyclictestOut = `# /dev/cpu_dma_latency set to 0us
# Histogram
000000 000000
000009 000001
000010 000002
000068 000031
000500 000001
# Total: 000000036
# Min Latencies: 00009
# Avg Latencies: 00092
# Max Latencies: 12000
# Histogram Overflows: 00001
# Histogram Overflow at cycle number:
# Thread 0:  35
`

func TestParseCyclictest(t *testing.T) {
	s, err := parseCyclictest(strings.NewReader(cyclictestOut))
	if err != nil {
		t.Fatal(err)
	}
	if s.Samples != 36 || s.Min != 9 || s.Avg != 92 || s.Max != 12000 || s.P99 != 12000 || s.Mode != ModeCyclictest {
		t.Fatalf("%+v", s)
	}
	if _, err := parseCyclictest(strings.NewReader("T: 0 ( 1) P: 0\n")); err == nil {
		t.Fatal("output without latencies accepted")
	}
}

func FuzzParseCyclictest(f *testing.F) {
	f.Add(cyclictestOut)
	f.Fuzz(func(t *testing.T, s string) {
		parseCyclictest(strings.NewReader(s))
	})
}

func TestRunCyclictest(t *testing.T) {
	if _, err := exec.LookPath("cyclictest"); err != nil {
		testpeer.Missing(t, "cyclictest not installed (apt-get install rt-tests)")
	}
	s, err := RunCyclictest(context.Background(), LatencyOptions{Period: time.Millisecond, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if s.Samples == 0 || s.Max < s.Min {
		t.Fatalf("%+v", s)
	}
}

// BenchmarkLatencyHistAdd is the probe's per-wake-up bookkeeping, which
// must stay far below the microseconds it measures.
// Run: go test -run '^$' -bench LatencyHistAdd ./internal/bench/
func BenchmarkLatencyHistAdd(b *testing.B) {
	h := new(LatencyHist)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.Add(time.Duration(i%5000) * time.Microsecond)
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/sample")
}
