package api

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSlowloris opens 1,000 connections that each send a request a byte a
// second, to both servers (net/http and the light POST server), while a
// normal client keeps asking: each of its requests must be answered
// within a second, and the trickling connections must be closed once the
// header timeout is up. It runs 3 s in -short and 20 s with PITH_LONG=1.
func TestSlowloris(t *testing.T) {
	const (
		conns        = 1000
		headerTimout = 2 * time.Second
		bound        = time.Second // a normal request's longest answer
	)
	run := 3 * time.Second
	if os.Getenv("PITH_LONG") == "1" {
		run = 20 * time.Second
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback listener: %v", err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	lim := DefaultServerLimits()
	lim.ReadHeaderTimeout = headerTimout
	lim.LightPOST = map[string]http.Handler{"/api/v1/events": ok}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeWith(ctx, ln, ok, lim, nil, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	addr := ln.Addr().String()

	// The attackers: each sends one byte a second of a request that never
	// ends, half of them a POST the light server takes.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var cut atomic.Int64 // connections the server closed
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial attacker %d: %v", i, err)
		}
		req := "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 1000)
		if i%2 == 1 {
			req = "POST /api/v1/events HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nX-Slow: " + strings.Repeat("a", 1000)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for j := 0; ; j++ {
				if _, err := c.Write([]byte{req[j%len(req)]}); err != nil {
					cut.Add(1)
					return
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
	}

	// The normal client: a GET and a light POST in turn, each within bound.
	client := &http.Client{Timeout: 5 * time.Second}
	var worst time.Duration
	n := 0
	for start := time.Now(); time.Since(start) < run; n++ {
		t0 := time.Now()
		var resp *http.Response
		if n%2 == 0 {
			resp, err = client.Get("http://" + addr + "/")
		} else {
			resp, err = client.Post("http://"+addr+"/api/v1/events", "application/json", strings.NewReader("{}"))
		}
		if err != nil {
			t.Fatalf("normal request %d: %v", n, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("normal request %d: %s", n, resp.Status)
		}
		worst = max(worst, time.Since(t0))
		time.Sleep(20 * time.Millisecond)
	}
	if worst > bound {
		t.Errorf("slowest normal request took %s, want at most %s", worst, bound)
	}
	// Past the header timeout every trickling connection is closed.
	deadline := time.Now().Add(headerTimout + 3*time.Second)
	for cut.Load() < conns && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if got := cut.Load(); got < conns {
		t.Errorf("%d of %d trickling connections still open %s after the header timeout", conns-got, conns, headerTimout+3*time.Second)
	}
	t.Logf("%d normal requests, slowest %s, %d trickling connections closed by the server", n, worst, cut.Load())
}
