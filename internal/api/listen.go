package api

import (
	"context"
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

// Serve serves h on an open listener, which it closes, with the default
// limits and no TLS, until ctx is cancelled; then it shuts down gracefully:
// it stops accepting, lets in-flight requests finish (up to ShutdownGrace)
// and returns nil.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	return ServeWith(ctx, ln, h, DefaultServerLimits(), nil, log)
}
