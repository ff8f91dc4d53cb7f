//go:build unix

package chunkenc

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime returns the CPU time this process has used. The development
// machine is shared, so wall-clock ns/op is inflated by other processes;
// CPU time per point is the steadier figure for a single-threaded,
// allocation-free benchmark.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter reports CPU ns per point over the timed part of a benchmark.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

func startCPU(b *testing.B) *cpuMeter {
	b.ResetTimer()
	return &cpuMeter{b: b, start: cpuTime()}
}

// report adds the cpu-ns/point metric; points is the number per iteration.
func (m *cpuMeter) report(points int) {
	used := cpuTime() - m.start
	m.b.ReportMetric(float64(used.Nanoseconds())/float64(m.b.N)/float64(points), "cpu-ns/point")
}
