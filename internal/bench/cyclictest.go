package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ModeCyclictest labels figures measured by rt-tests' cyclictest.
const ModeCyclictest LatencyMode = "cyclictest"

// ErrNoCyclictest is returned when cyclictest is not on PATH (Debian:
// apt-get install rt-tests).
var ErrNoCyclictest = errors.New("cyclictest not found (apt-get install rt-tests)")

// RunCyclictest runs cyclictest with one thread at the same period and
// duration as the probe, with its 1 us histogram, and returns its figures
// in the probe's form. It runs at normal priority unless the caller is
// allowed more, as the probe does, so the two compare like for like.
func RunCyclictest(ctx context.Context, o LatencyOptions) (LatencyStats, error) {
	exe, err := exec.LookPath("cyclictest")
	if err != nil {
		return LatencyStats{}, ErrNoCyclictest
	}
	secs := max(int(o.Duration/time.Second), 1)
	cmd := exec.CommandContext(ctx, exe, "-q", "-t1",
		"-i", strconv.Itoa(int(o.Period/time.Microsecond)),
		"-D", strconv.Itoa(secs), "-h", strconv.Itoa(histMaxUs))
	out, err := cmd.Output()
	if err != nil {
		return LatencyStats{}, fmt.Errorf("run cyclictest: %w", err)
	}
	s, err := parseCyclictest(bytes.NewReader(out))
	if err != nil {
		return s, err
	}
	s.Period = float64(o.Period) / float64(time.Microsecond)
	return s, nil
}

// parseCyclictest reads cyclictest's histogram output ("-q -h N"): lines
// "USEC COUNT" per bin, then "# Total:", "# Min Latencies:", "# Avg
// Latencies:", "# Max Latencies:" and "# Histogram Overflows:".
func parseCyclictest(r io.Reader) (LatencyStats, error) {
	h := new(LatencyHist)
	var minUs, avgUs, maxUs, over int64 = -1, -1, -1, 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "#"); ok {
			k, v, ok := strings.Cut(rest, ":")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(strings.Fields(v + " x")[0], 10, 64)
			if err != nil {
				continue
			}
			switch strings.TrimSpace(k) {
			case "Min Latencies":
				minUs = n
			case "Avg Latencies":
				avgUs = n
			case "Max Latencies":
				maxUs = n
			case "Histogram Overflows":
				over = n
			}
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		us, err1 := strconv.Atoi(f[0])
		c, err2 := strconv.ParseUint(f[1], 10, 32)
		if err1 != nil || err2 != nil || us < 0 || us > histMaxUs {
			continue
		}
		h.bins[min(us, histMaxUs)] += uint32(c)
		h.n += c
	}
	if err := sc.Err(); err != nil {
		return LatencyStats{}, fmt.Errorf("read cyclictest output: %w", err)
	}
	if minUs < 0 || avgUs < 0 || maxUs < 0 {
		return LatencyStats{}, errors.New("parse cyclictest output: no Min/Avg/Max latencies (was -h given?)")
	}
	if over > 0 {
		h.bins[histMaxUs] += uint32(over)
		h.n += uint64(over)
	}
	h.min, h.max = time.Duration(minUs)*time.Microsecond, time.Duration(maxUs)*time.Microsecond
	h.sum = time.Duration(avgUs) * time.Microsecond * time.Duration(h.n)
	s := h.Stats()
	s.Mode = ModeCyclictest
	s.Avg = float64(avgUs) // cyclictest's own, not rounded through the sum
	return s, nil
}
