package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/acq"
	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/diag"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/store"
)

// AcqOptions describe one acquisition measurement: stations polling a
// Modbus server through the whole path (station -> tag table -> archive
// queue -> store) for a while. `pith bench` (experiments 1 and 2) and the
// benchmarks in acq_test.go run it.
type AcqOptions struct {
	// Server is the Modbus TCP server polled, host:port; empty starts an
	// in-process Pith server whose registers follow the plant dataset's
	// raw-register pattern (register N = 1000 * second-of-minute + N,
	// changed twice a second; docs/bench.md).
	Server string
	// Stations is the number of stations, each on its own connection.
	Stations int
	// Tags is the number of consecutive uint16 holding registers each
	// station reads (addresses 0..Tags-1; one request up to 125).
	Tags int
	// Period is each station's scan period; 0 polls back to back.
	Period time.Duration
	// Warmup is how long the stations run before the measured window
	// (connecting, first allocations); counters and CPU cover only the
	// window. Default 1 s.
	Warmup time.Duration
	// Duration is the measured window.
	Duration time.Duration
	// Dir is the store's data directory; it should be empty.
	Dir string
	// Busy keeps one goroutine spinning during the run, to measure
	// scheduling with the other core taken.
	Busy bool
	// Log receives the plant's log; nil discards it.
	Log *slog.Logger
}

// AcqResult is what an acquisition measurement measured.
type AcqResult struct {
	Seconds     float64  // wall time the stations ran
	Polls       uint64   // polls completed, all stations
	PollsPerSec float64  // Polls / Seconds
	Errors      uint64   // failed polls
	Overruns    uint64   // polls longer than their period (ticks skipped)
	Missed      uint64   // periodic only: ticks in the run that got no poll, beyond one per station for the run's edges
	CPUSeconds  float64  // user+system CPU of the whole process (server included when in-process)
	CPUPercent  float64  // CPUSeconds / Seconds, in percent of one core
	Archived    uint64   // points written into the store
	Late        acq.Dist // the worst station's scan-start lateness over its last 1024 scans
}

// String formats the result as one line.
func (r AcqResult) String() string {
	return fmt.Sprintf("%.0f polls/s (%d polls in %.1fs), errors %d, overruns %d, missed %d, cpu %.3f%% of a core, archived %d, late p50 %v p99 %v max %v",
		r.PollsPerSec, r.Polls, r.Seconds, r.Errors, r.Overruns, r.Missed, r.CPUPercent, r.Archived,
		r.Late.P50, r.Late.P99, r.Late.Max)
}

// benchServer is the in-process server of an acquisition measurement.
type benchServer struct {
	srv  *modbus.Server
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// registerTick is how often the in-process server's registers change.
const registerTick = 500 * time.Millisecond

// startBenchServer serves n registers on 127.0.0.1 and, for stations > 1,
// on the same port of 127.0.0.2, 127.0.0.3, ... (all loopback on Linux),
// so that each station gets its own connection as separate devices would.
func startBenchServer(n, stations int) (*benchServer, string, error) {
	opts := modbus.DefaultServerOptions()
	opts.Addr = "127.0.0.1:0"
	opts.IdleTimeout = 0
	opts.MaxConns = 1024
	s := &benchServer{srv: modbus.NewServer(opts)}
	addr, err := s.srv.Listen()
	if err != nil {
		return nil, "", err
	}
	port := addr.(*net.TCPAddr).Port
	for k := 2; k <= stations; k++ {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.%d:%d", k, port))
		if err != nil {
			_ = s.srv.Close()
			return nil, "", fmt.Errorf("listen for bench station %d: %w", k, err)
		}
		go func() { _ = s.srv.Serve(ln) }()
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	regs := make([]uint16, n)
	set := func(t time.Time) {
		for i := range regs {
			regs[i] = uint16(1000*t.Second() + i)
		}
		_ = s.srv.Bank().SetRegisters(modbus.HoldingRegisters, 0, regs...)
	}
	set(time.Now())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(registerTick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				set(now)
			}
		}
	}()
	return s, addr.String(), nil
}

func (s *benchServer) close() {
	s.stop()
	s.wg.Wait()
	_ = s.srv.Close()
}

// acqConfig writes the stations as TOML, the way a user would.
func acqConfig(b AcqOptions, addr string, local bool) string {
	var sb strings.Builder
	for i := range b.Stations {
		// A distinct address per station gives each its own connection:
		// stations sharing one URL share one client and its lock. An
		// outside server is polled at one address by every station.
		host, port := addr, ""
		if h, p, err := net.SplitHostPort(addr); err == nil {
			host, port = h, p
			if local && i > 0 {
				host = fmt.Sprintf("127.0.0.%d", i+1)
			}
		}
		fmt.Fprintf(&sb, `
[[modbus.client]]
name    = "bench%d"
url     = "tcp://%s"
period  = %q
timeout = "1s"
tags = [{ name = "bench.s%d.r{i}", register = "holding:0", type = "uint16", count = %d }]
`, i, net.JoinHostPort(host, port), b.Period.String(), i, b.Tags)
	}
	return sb.String()
}

// RunAcq runs one acquisition measurement.
func RunAcq(ctx context.Context, b AcqOptions) (AcqResult, error) {
	if b.Stations <= 0 {
		b.Stations = 1
	}
	if b.Tags <= 0 || b.Tags > 125 {
		return AcqResult{}, fmt.Errorf("run acquisition bench: tags %d out of 1..125", b.Tags)
	}
	addr := b.Server
	if addr == "" {
		s, a, err := startBenchServer(b.Tags, b.Stations)
		if err != nil {
			return AcqResult{}, err
		}
		defer s.close()
		addr = a
	}
	cfg, err := config.Parse([]byte(acqConfig(b, addr, b.Server == "")))
	if err != nil {
		return AcqResult{}, fmt.Errorf("build acquisition bench config: %w", err)
	}
	db, err := store.Open(b.Dir, store.DefaultOptions())
	if err != nil {
		return AcqResult{}, err
	}
	defer db.Close()
	if b.Busy {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := range 100_000 {
					x += i
				}
				runtime.KeepAlive(x)
			}
		}()
		defer func() { close(stop); wg.Wait() }()
	}
	if b.Warmup <= 0 {
		b.Warmup = time.Second
	}
	p, err := plant.Start(ctx, cfg, db, b.Log)
	if err != nil {
		return AcqResult{}, err
	}
	defer p.Stop()
	sleep := func(d time.Duration) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	sleep(b.Warmup)
	before := p.Scheduler().Stats()
	arch0 := p.Archive().Stats().Written
	cpu0 := diag.CPUTime()
	t0 := time.Now()
	sleep(b.Duration)
	stats := p.Scheduler().Stats()
	elapsed := time.Since(t0)
	cpu := diag.CPUTime() - cpu0
	arch1 := p.Archive().Stats().Written

	r := AcqResult{Seconds: elapsed.Seconds(), CPUSeconds: cpu.Seconds()}
	r.CPUPercent = 100 * r.CPUSeconds / r.Seconds
	for i, s := range stats {
		polls := s.Polls - before[i].Polls
		r.Polls += polls
		r.Errors += s.Errors - before[i].Errors
		r.Overruns += s.Overruns - before[i].Overruns
		if b.Period > 0 {
			want := uint64(elapsed / b.Period)
			if polls+1 < want {
				r.Missed += want - polls - 1
			}
		}
		// The worst station's figures stand for the run.
		if s.Late.P99 > r.Late.P99 {
			r.Late = s.Late
		}
	}
	r.PollsPerSec = float64(r.Polls) / r.Seconds
	r.Archived = arch1 - arch0
	return r, ctx.Err()
}
