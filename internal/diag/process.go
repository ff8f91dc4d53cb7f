package diag

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// procSample is what the process figures are computed from.
type procSample struct {
	cpu        time.Duration // user + system time since start
	rss        int64         // resident set, bytes
	goroutines int
	heap       int64  // live heap bytes
	numGC      uint32 // completed GC cycles
	maxPause   time.Duration
	ok         bool
}

// procReader reads the process figures, keeping its buffers between calls
// so that a reading does not allocate.
type procReader struct {
	ms      runtime.MemStats
	buf     [128]byte
	lastGC  uint32
	hasLast bool
}

// CPUTime returns the process's user + system CPU time (getrusage). The
// collector reads it for pith.sys.process.cpu_percent; internal/bench
// reads it around a measured window.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rssBytes returns the resident set size from /proc/self/statm (its second
// field, in pages), or 0 where /proc is missing.
func (p *procReader) rssBytes() int64 {
	f, err := os.Open("/proc/self/statm")
	if err != nil {
		return 0
	}
	n, _ := f.Read(p.buf[:])
	f.Close()
	fs := bytes.Fields(p.buf[:n])
	if len(fs) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(string(fs[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// read samples the process. The longest GC pause is taken over the cycles
// completed since the previous read (up to the 256 the runtime keeps).
// runtime.ReadMemStats stops the world for a few microseconds, which is
// why this runs on the slow clock only.
func (p *procReader) read() procSample {
	runtime.ReadMemStats(&p.ms)
	s := procSample{
		cpu:        CPUTime(),
		rss:        p.rssBytes(),
		goroutines: runtime.NumGoroutine(),
		heap:       int64(p.ms.HeapAlloc),
		numGC:      p.ms.NumGC,
		ok:         true,
	}
	from := p.ms.NumGC
	if p.hasLast {
		from = p.lastGC
	}
	if p.ms.NumGC-from > uint32(len(p.ms.PauseNs)) {
		from = p.ms.NumGC - uint32(len(p.ms.PauseNs))
	}
	for g := from; g < p.ms.NumGC; g++ {
		// PauseNs[(N+255)%256] is the pause of cycle N (1-based).
		if d := time.Duration(p.ms.PauseNs[(g+1+255)%256]); d > s.maxPause {
			s.maxPause = d
		}
	}
	p.lastGC, p.hasLast = p.ms.NumGC, true
	return s
}
