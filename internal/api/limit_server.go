package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ServerLimits are the connection limits of the HTTP server. Start from
// DefaultServerLimits.
type ServerLimits struct {
	ReadHeaderTimeout time.Duration // request line and headers must arrive within this (slow-loris guard)
	ReadTimeout       time.Duration // the whole request, body included; 0 means none
	WriteTimeout      time.Duration // from the end of the headers to the end of the answer; 0 means none (see NoWriteDeadline)
	IdleTimeout       time.Duration // a keep-alive connection left idle is closed after this
	MaxHeaderBytes    int           // request line and headers; more gets 431
	// LightPOST maps paths whose POSTs, on plain-HTTP connections, the
	// light server of light.go answers instead of net/http (less work per
	// request) to their handler, which must answer as the server's handler
	// would (the same chain, short of the routing) and keep nothing of the
	// request after it returns (the light server reuses it); nil serves
	// everything with net/http.
	LightPOST map[string]http.Handler
}

// DefaultServerLimits returns the limits Pith serves with. ReadTimeout is
// generous because one import may carry a whole year of data over a slow
// link; it still ends a client that trickles a body forever.
func DefaultServerLimits() ServerLimits {
	return ServerLimits{
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       15 * time.Minute,
		WriteTimeout:      3 * time.Minute, // a PromQL query's 2 minutes, then sending its answer; live streams lift it
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// ServeWith is Serve with explicit limits and, when tlsCfg is not nil,
// TLS (see TLSConfig). It serves h on ln until ctx is cancelled, then
// shuts down gracefully within ShutdownGrace, and closes ln.
func ServeWith(ctx context.Context, ln net.Listener, h http.Handler, lim ServerLimits, tlsCfg *tls.Config, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	def := DefaultServerLimits()
	if lim.ReadHeaderTimeout <= 0 {
		lim.ReadHeaderTimeout = def.ReadHeaderTimeout
	}
	if lim.IdleTimeout <= 0 {
		lim.IdleTimeout = def.IdleTimeout
	}
	if lim.MaxHeaderBytes <= 0 {
		lim.MaxHeaderBytes = def.MaxHeaderBytes
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		ReadTimeout:       lim.ReadTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		TLSConfig:         tlsCfg,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// Request contexts do not derive from ctx: cancelling ctx must let
		// in-flight imports commit rather than abort them.
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
		ln = tls.NewListener(ln, tlsCfg)
	}
	var light *lightListener
	if tlsCfg == nil && len(lim.LightPOST) > 0 {
		light = newLightListener(ln, lim, log)
		ln = light
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("http server listening", "addr", ln.Addr().String(), "scheme", scheme)
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s on %s: %w", scheme, ln.Addr(), err)
	case <-ctx.Done():
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if light != nil {
		// Shutdown closed the listener, which woke the idle light
		// connections; the busy ones finish their request.
		err = errors.Join(err, light.wait(sctx))
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		log.Warn("http server stopped with error", "err", serr)
	}
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("shut down http server: %w", err)
	}
	log.Info("http server stopped", "addr", ln.Addr().String(), "took", time.Since(start))
	return nil
}
