package config

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestLimitsDefaultsAndErrors checks the defaults of the HTTP and PromQL
// limits and that a bad value is refused naming its key.
func TestLimitsDefaultsAndErrors(t *testing.T) {
	c, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.HTTP.MaxInflightBytes, int64(128<<20); got != want {
		t.Errorf("http.max_inflight_bytes = %d, want %d", got, want)
	}
	if got, want := c.HTTP.WriteTimeout.Std(), 3*time.Minute; got != want {
		t.Errorf("http.write_timeout = %s, want %s", got, want)
	}
	if got, want := c.PromQL, (PromQL{MaxConcurrentQueries: 2, MaxQueuedQueries: 8, MaxSamples: 5_000_000}); got != want {
		t.Errorf("promql = %+v, want %+v", got, want)
	}
	for _, tt := range []struct {
		toml, key string
	}{
		{"[http]\nmax_inflight_bytes = 1000\n", "http.max_inflight_bytes"},
		{"[http]\nmax_inflight_bytes = -1\n", "http.max_inflight_bytes"},
		{"[http]\nwrite_timeout = \"-1s\"\n", "http.write_timeout"},
		{"[promql]\nmax_concurrent_queries = -1\n", "promql.max_concurrent_queries"},
		{"[promql]\nmax_queued_queries = -2\n", "promql.max_queued_queries"},
		{"[promql]\nmax_samples = -5\n", "promql.max_samples"},
	} {
		_, err := Parse([]byte(tt.toml))
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Key != tt.key {
			t.Errorf("%q: got %v, want an error naming %s", tt.toml, err, tt.key)
		}
	}
	if _, err := Parse([]byte("[http]\nmax_inflight_bytes = 1048576\n[promql]\nmax_queued_queries = 0\n")); err != nil {
		t.Errorf("smallest budget and no queue refused: %v", err)
	}
}

// TestSecureDefaults checks the defaults docs/security.md promises: the
// HTTP server listens on loopback only, and a key in the config must be
// a SHA-256 hash, never the key itself.
func TestSecureDefaults(t *testing.T) {
	c := Default()
	host, _, err := net.SplitHostPort(c.HTTP.Listen)
	if err != nil || net.ParseIP(host) == nil || !net.ParseIP(host).IsLoopback() {
		t.Errorf("default http.listen %q is not a loopback address", c.HTTP.Listen)
	}
	for _, hash := range []string{"my-secret-key", "sha256:short", strings.Repeat("a", 71)} {
		_, err := Parse([]byte("[[http.keys]]\nname = \"k\"\nscope = \"read\"\nhash = \"" + hash + "\"\n"))
		var ke *KeyError
		if !errors.As(err, &ke) || ke.Key != "http.keys[0].hash" {
			t.Errorf("hash %q: got %v, want an error naming http.keys[0].hash", hash, err)
		}
	}
}
