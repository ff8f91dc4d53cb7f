package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/diag"
)

// freezePath is the admin endpoint `pith freeze` calls.
const freezePath = "/api/v1/admin/freeze"

func runFreeze(args []string) error {
	fs := flag.NewFlagSet("freeze", flag.ContinueOnError)
	url := fs.String("url", "http://127.0.0.1:8080", "base URL of the running Pith")
	var srv serverFlags
	srv.register(fs, "admin")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith freeze SECONDS WATCH_SECONDS [--url URL] [--key KEY]\n\n"+
			"Pauses archive writes of a running Pith for SECONDS (acquisition continues and\n"+
			"queues), printing the queue depth every second, then prints the drain second\n"+
			"by second until the backlog is written or WATCH_SECONDS pass, and a summary.\n"+
			"It calls POST %s, which needs a key with admin scope when the server has keys.\n\n", freezePath)
		fs.PrintDefaults()
	}
	// Flags may come before or after the two numbers.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return flagErr(err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) != 2 {
		fs.Usage()
		return errors.New("want SECONDS and WATCH_SECONDS")
	}
	var req diag.FreezeRequest
	var err error
	if req.Seconds, err = strconv.ParseFloat(pos[0], 64); err != nil || req.Seconds <= 0 {
		return fmt.Errorf("parse SECONDS %q: want a positive number", pos[0])
	}
	if req.WatchSeconds, err = strconv.ParseFloat(pos[1], 64); err != nil || req.WatchSeconds < 0 {
		return fmt.Errorf("parse WATCH_SECONDS %q: want a number >= 0", pos[1])
	}
	return srv.client().freeze(context.Background(), strings.TrimRight(*url, "/")+freezePath, req, os.Stdout)
}

// freeze posts the request and prints the streamed progress.
func (c *apiClient) freeze(ctx context.Context, url string, req diag.FreezeRequest, out io.Writer) error {
	resp, err := c.postJSON(ctx, "freeze", url, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	fmt.Fprintf(out, "%-7s %7s %12s %12s %12s\n", "phase", "t (s)", "pending", "in/s", "written/s")
	for sc.Scan() {
		var probe struct{ Phase string }
		if err := json.Unmarshal(sc.Bytes(), &probe); err != nil {
			return fmt.Errorf("decode freeze progress %q: %w", sc.Text(), err)
		}
		if probe.Phase == "summary" {
			var s diag.FreezeSummary
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				return fmt.Errorf("decode freeze summary: %w", err)
			}
			printFreezeSummary(out, s)
			return nil
		}
		var ev diag.FreezeEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return fmt.Errorf("decode freeze progress: %w", err)
		}
		fmt.Fprintf(out, "%-7s %7.1f %12d %12.0f %12.0f\n", ev.Phase, ev.Seconds, ev.Pending, ev.InPerSec, ev.OutPerSec)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read freeze progress: %w", err)
	}
	return errors.New("read freeze progress: the server ended without a summary")
}

func printFreezeSummary(out io.Writer, s diag.FreezeSummary) {
	fmt.Fprintf(out, "\nfrozen %.1f s; accumulated %d values\n", s.FrozenFor, s.Accumulated)
	if s.Drained {
		fmt.Fprintf(out, "drained in %.2f s: %.0f values/s; peak write rate %.0f values/s\n", s.DrainSeconds, s.DrainPerSec, s.PeakPerSec)
	} else {
		fmt.Fprintf(out, "not drained after %.1f s of watching (peak write rate %.0f values/s); the queue keeps writing\n", s.DrainSeconds, s.PeakPerSec)
	}
	lost := "nothing lost"
	if s.Dropped > 0 {
		lost = fmt.Sprintf("%d values LOST (queue full)", s.Dropped)
	}
	fmt.Fprintf(out, "values queued %d, written %d during the command; %s\n", s.Enqueued, s.Written, lost)
}
