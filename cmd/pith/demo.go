package main

import (
	"context"
	_ "embed"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/pith-historian/pith/internal/acq"
	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/agent"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/plant"
)

// demoConfig is the demo plant; see the comments in demo.toml.
//
//go:embed demo.toml
var demoConfig string

// Demo constants.
const (
	demoModbusAddr = "127.0.0.1:5020"       // the port in demo.toml, replaced when taken
	demoSimTags    = 100                    // registers the simulator writes
	demoSimPeriod  = 500 * time.Millisecond // "changed twice a second"
)

func runDemo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	data := fs.String("data", "", "data directory (default: a fresh temporary one)")
	listen := fs.String("listen", "127.0.0.1:8080", "HTTP listen address")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: pith demo [--data DIR] [--listen ADDR]

Runs a complete simulated plant with no set-up, the D2000 reference test (docs/bench.md):
  - Pith's own Modbus TCP server on 127.0.0.1 (port 5020, or a free one)
    publishes 100 simulated tags, demo.sim.r0..r99: holding register N
    holds 1000 * second-of-minute + N and changes twice a second;
  - station "plc" polls them back every second in one block read of 100
    registers (tags demo.plc.r0..r99);
  - station "fast" polls 10 of them as fast as possible (demo.fast.r0..r9);
  - station "valve" reads a setpoint that POST /api/v1/control writes;
  - everything is archived in the data directory, station statistics
    included (pith.station.<name>.polls_per_s, changes_per_10s, errors,
    rtt_ms, comm).
It prints the HTTP API's address with example requests. Ctrl-C stops it
after draining the archive.

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagErr(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return demo(ctx, *data, *listen, os.Stdout, nil)
}

// demo runs the demo plant until ctx ends. ready, when set, is told the
// HTTP address once requests are served (for tests).
func demo(ctx context.Context, dir, listen string, out io.Writer, ready func(addr string)) error {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "pith-demo-"); err != nil {
			return fmt.Errorf("create demo data directory: %w", err)
		}
	}
	mbAddr, err := demoModbusPort()
	if err != nil {
		return err
	}
	cfg, err := config.Parse([]byte(strings.ReplaceAll(demoConfig, demoModbusAddr, mbAddr)))
	if err != nil {
		return fmt.Errorf("parse demo config: %w", err)
	}
	cfg.Store.Dir = dir
	cfg.HTTP.Listen = listen
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := seedDemoDashboards(dir); err != nil {
		return err
	}
	if err := seedDemoPictures(dir); err != nil {
		return err
	}
	log := agent.NewLogger("info")

	simCtx, stopSim := context.WithCancel(ctx)
	var sim sync.WaitGroup
	err = agent.Run(ctx, agent.Options{Config: cfg, Logger: log, Ready: func(addr string, _ *plant.Plant) {
		// The plant's Modbus server listens before the agent reports ready.
		sim.Add(1)
		go func() {
			defer sim.Done()
			simulate(simCtx, mbAddr, log)
		}()
		printDemo(out, dir, addr, mbAddr)
		if ready != nil {
			ready(addr)
		}
	}})
	stopSim()
	sim.Wait()
	return err
}

// demoModbusPort returns demoModbusAddr when it is free, else a free port
// on 127.0.0.1. Another program may take the port before the plant binds
// it; the plant then fails with a clear "address in use".
func demoModbusPort() (string, error) {
	ln, err := net.Listen("tcp", demoModbusAddr)
	if err != nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return "", fmt.Errorf("find a free port for the demo modbus server: %w", err)
		}
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("release demo modbus port: %w", err)
	}
	return addr, nil
}

// simulate plays the reference SCADA: every half second it writes holding
// register N = 1000 * second-of-minute + N (N < 100) into Pith's Modbus
// server in one FC 16 request, which turns them into the demo.sim tags.
func simulate(ctx context.Context, addr string, log *slog.Logger) {
	opts := modbus.DefaultOptions()
	opts.Logger = log.With("part", "simulator")
	cl, err := modbus.NewClient("tcp://"+addr, opts)
	if err != nil {
		log.Error("start demo simulator", "err", err)
		return
	}
	defer cl.Close()
	regs := make([]uint16, demoSimTags)
	failing := false
	clk := acq.RealClock{}
	next := time.Now().Truncate(demoSimPeriod)
	for {
		next = next.Add(demoSimPeriod)
		if clk.SleepUntil(ctx, next, 0) != nil {
			return
		}
		sec := uint16(next.Second())
		for i := range regs {
			regs[i] = 1000*sec + uint16(i)
		}
		err := cl.WriteMultipleRegisters(ctx, 1, 0, regs)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil && !failing:
			log.Warn("demo simulator write failed", "err", err)
		case err == nil && failing:
			log.Info("demo simulator writing again")
		}
		failing = err != nil
		if now := time.Now(); next.Before(now.Add(-demoSimPeriod)) {
			next = now.Truncate(demoSimPeriod) // skip ticks missed while suspended
		}
	}
}

func printDemo(out io.Writer, dir, addr, mbAddr string) {
	now := time.Now().UnixMilli()
	base := "http://" + addr
	fmt.Fprintf(out, `
Pith demo: a simulated plant is running, archived in %s
  Modbus server (Pith publishes demo.sim.r0..r99): %s, e.g. mbpoll -m tcp -p %s -r 1 -c 10 %s
  stations: plc (100 registers every 1 s), fast (10 registers, period 0), valve

  dashboard:        %s/   (live values, trends, system health)
  process picture:  %s/pictures?id=plant
  latest values:    curl '%s/api/v1/latest'
  one tag:          curl '%s/api/v1/latest?tag=demo.plc.r7'
  station stats:    curl '%s/api/v1/latest?tag=%s&tag=%s&tag=%s&tag=%s'
  tags:             curl '%s/api/v1/tags'
  raw samples:      curl '%s/api/v1/data?tag=demo.plc.r0&from=%d&to=%d&agg=raw&points=20'
  per-minute means: curl '%s/api/v1/data?tag=demo.plc.r0&from=%d&to=%d&points=60&agg=mean'
  control write:    curl -X POST '%s/api/v1/control' -d '{"tag":"demo.valve.position","value":42.5}'
  diagnostics:      curl '%s/metrics'   and   pith freeze 10 20 --url %s
Stop with Ctrl-C.
`, dir, mbAddr, portOf(mbAddr), hostOf(mbAddr),
		base, base, base, base,
		base, acq.StatTag("fast", acq.TagPolls), acq.StatTag("plc", acq.TagChanges), acq.StatTag("fast", acq.TagRTT), acq.StatTag("plc", acq.TagErrors),
		base, base, now, now+3_600_000, base, now, now+3_600_000, base, base, base)
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

func portOf(addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return p
}
