package agent

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"testing"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/plant"
)

// serve runs a Pith with cfg until ctx ends, as `pith serve` does; a
// config loader in ctx (withConfigLoader) makes reloads work. ready, when
// set, is told the HTTP address once every part started.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, ready func(addr string, p *plant.Plant)) error {
	load, _ := ctx.Value(configLoaderKey{}).(func() (*config.Config, error))
	return Run(ctx, Options{Config: cfg, Load: load, Logger: log, Ready: ready})
}

type configLoaderKey struct{}

// withConfigLoader gives serve how to read the config again.
func withConfigLoader(ctx context.Context, load func() (*config.Config, error)) context.Context {
	return context.WithValue(ctx, configLoaderKey{}, load)
}

// testServer is a Pith running in-process for a test.
type testServer struct {
	URL   string // http://host:port
	Plant *plant.Plant
	stop  func() error
}

// startServe runs serve with cfg under ctx and returns once it serves;
// the test fails when it does not come up. The server stops at Stop or at
// the end of the test, which then fails if serve returned an error.
func startServe(t testing.TB, ctx context.Context, cfg *config.Config) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	type up struct {
		addr string
		p    *plant.Plant
	}
	upc := make(chan up, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, cfg, NewLogger("warn"), func(addr string, p *plant.Plant) { upc <- up{addr, p} })
	}()
	s := &testServer{}
	select {
	case u := <-upc:
		s.URL, s.Plant = "http://"+u.addr, u.p
	case err := <-done:
		cancel()
		t.Fatalf("serve: %v", err)
	}
	var once sync.Once
	var err error
	s.stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

// Stop stops the server and returns serve's error.
func (s *testServer) Stop() error { return s.stop() }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
