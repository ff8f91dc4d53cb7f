package api

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Timeouts of the HTTP server. There is no read or write timeout on whole
// requests: a large import over a slow link may rightly take minutes.
const (
	readHeaderTimeout = 10 * time.Second // slow-loris guard
	idleTimeout       = 2 * time.Minute  // keep-alive connections left idle
	maxHeaderBytes    = 64 << 10         // request line and headers
	// ShutdownGrace is how long in-flight requests may take to finish once
	// the context is cancelled before their connections are closed.
	ShutdownGrace = 30 * time.Second
)

// ListenAndServe listens on addr and serves h until ctx is cancelled, then
// shuts down gracefully: it stops accepting, lets in-flight requests finish
// (up to ShutdownGrace) and returns nil.
func ListenAndServe(ctx context.Context, addr string, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return Serve(ctx, ln, h, log)
}

// Serve is ListenAndServe on an open listener, which it closes, with the
// default limits and no TLS.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	return ServeWith(ctx, ln, h, DefaultServerLimits(), nil, log)
}
