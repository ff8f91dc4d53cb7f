package modbus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
)

// Options configures a Client.
type Options struct {
	// Timeout bounds each request (write plus response); a context
	// deadline that comes sooner wins.
	Timeout time.Duration
	// DialTimeout bounds opening the connection; the request's deadline
	// still wins when it is sooner.
	DialTimeout time.Duration
	// BackoffMin is the wait before the second reconnect attempt after
	// consecutive failures; the first attempt is immediate because a
	// server closing an idle connection is the usual cause.
	BackoffMin time.Duration
	// BackoffMax caps the doubling wait between reconnect attempts.
	BackoffMax time.Duration
	// Logger receives connection state changes; nil discards them.
	Logger *slog.Logger
}

// DefaultOptions returns the client defaults.
func DefaultOptions() Options {
	return Options{
		Timeout:     time.Second,
		DialTimeout: 3 * time.Second,
		BackoffMin:  100 * time.Millisecond,
		BackoffMax:  5 * time.Second,
	}
}

// ErrBackoff is wrapped by the error a request returns without touching the
// network because the client waits before its next reconnect attempt.
var ErrBackoff = errors.New("waiting before reconnect")

// link is the byte stream under a client: a TCP connection or a serial
// line opened non-blocking so that deadlines work on it.
type link interface {
	io.ReadWriteCloser
	SetDeadline(t time.Time) error
}

// inputFlusher is implemented by serial links that can drop unread input,
// so that a late answer to an earlier request is not read as the next one.
type inputFlusher interface {
	FlushInput() error
}

// Stats are a client's counters since it was created.
type Stats struct {
	Requests   uint64 // requests attempted
	Errors     uint64 // requests that failed, exceptions included
	Exceptions uint64 // exception responses
	Timeouts   uint64 // requests that hit their deadline
	Dials      uint64 // connections opened
	Stale      uint64 // TCP responses dropped for a wrong transaction id
	Garbage    uint64 // RTU bytes skipped while looking for a response
}

type counters struct {
	requests, errors, exceptions, timeouts, dials, stale, garbage atomic.Uint64
}

// Client is a Modbus master on one connection. Its methods are safe for
// concurrent use: requests are serialized, one outstanding at a time, so
// several stations (unit ids) can share one TCP gateway or serial line.
type Client struct {
	target target
	opts   Options
	log    *slog.Logger
	stats  counters

	// sem is a lock held for a whole request; a channel rather than a
	// mutex so that waiting for it respects the request's deadline.
	// It guards everything below.
	sem      chan struct{}
	link     link
	txid     uint16
	failures int       // consecutive failed requests or dials
	retryAt  time.Time // no dial before this time
	lastIO   time.Time // end of the last RTU frame, for the inter-frame gap
	wbuf     []byte
	rbuf     []byte
}

// target is a parsed connection URL.
type target struct {
	scheme string // "tcp", "rtuovertcp" or "rtu"
	addr   string // host:port or device path
	serial SerialConfig
}

// SerialConfig describes a serial line.
type SerialConfig struct {
	Baud     int
	DataBits int  // 5..8
	Parity   byte // 'N', 'E' or 'O'
	StopBits int  // 1 or 2
}

// NewClient returns a client for the URL without connecting; the first
// request connects. URLs: tcp://host[:port] (port 502 by default),
// rtuovertcp://host:port and rtu:///dev/ttyUSB0?baud=9600&parity=N&stop=1&data=8.
func NewClient(rawURL string, opts Options) (*Client, error) {
	t, err := parseTarget(rawURL)
	if err != nil {
		return nil, err
	}
	d := DefaultOptions()
	if opts.Timeout <= 0 {
		opts.Timeout = d.Timeout
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = d.DialTimeout
	}
	if opts.BackoffMin <= 0 {
		opts.BackoffMin = d.BackoffMin
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = d.BackoffMax
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Client{
		target: t,
		opts:   opts,
		log:    log.With("modbus", t.scheme+"://"+t.addr),
		sem:    make(chan struct{}, 1),
		wbuf:   make([]byte, 0, MaxTCPFrame+8),
		rbuf:   make([]byte, 4*MaxTCPFrame),
	}, nil
}

// Dial returns a client for the URL (see NewClient) and connects it.
func Dial(ctx context.Context, rawURL string, opts Options) (*Client, error) {
	c, err := NewClient(rawURL, opts)
	if err != nil {
		return nil, err
	}
	c.sem <- struct{}{}
	defer c.release()
	deadline := time.Now().Add(c.opts.DialTimeout)
	if err := c.connect(ctx, deadline); err != nil {
		return nil, err
	}
	return c, nil
}

func parseTarget(rawURL string) (target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return target{}, fmt.Errorf("parse modbus url: %w", err)
	}
	t := target{scheme: u.Scheme}
	switch u.Scheme {
	case "tcp", "rtuovertcp":
		if u.Host == "" {
			return t, fmt.Errorf("parse modbus url %q: missing host", rawURL)
		}
		t.addr = u.Host
		if u.Port() == "" {
			t.addr = net.JoinHostPort(u.Hostname(), "502")
		}
	case "rtu":
		if u.Path == "" {
			return t, fmt.Errorf("parse modbus url %q: missing device path", rawURL)
		}
		t.addr = u.Path
		t.serial = SerialConfig{Baud: 9600, DataBits: 8, Parity: 'N', StopBits: 1}
		q := u.Query()
		for key, vals := range q {
			v := vals[0]
			var n int
			if key != "parity" {
				if n, err = strconv.Atoi(v); err != nil {
					return t, fmt.Errorf("parse modbus url %q: %s=%q is not a number", rawURL, key, v)
				}
			}
			switch key {
			case "baud":
				t.serial.Baud = n
			case "data":
				t.serial.DataBits = n
			case "stop":
				t.serial.StopBits = n
			case "parity":
				if len(v) != 1 || (v[0]|0x20 != 'n' && v[0]|0x20 != 'e' && v[0]|0x20 != 'o') {
					return t, fmt.Errorf("parse modbus url %q: parity %q, want N, E or O", rawURL, v)
				}
				t.serial.Parity = v[0] &^ 0x20
			default:
				return t, fmt.Errorf("parse modbus url %q: unknown parameter %q", rawURL, key)
			}
		}
		if t.serial.DataBits < 5 || t.serial.DataBits > 8 || t.serial.StopBits < 1 || t.serial.StopBits > 2 {
			return t, fmt.Errorf("parse modbus url %q: data bits %d, stop bits %d", rawURL, t.serial.DataBits, t.serial.StopBits)
		}
	default:
		return t, fmt.Errorf("parse modbus url %q: scheme %q, want tcp, rtuovertcp or rtu", rawURL, u.Scheme)
	}
	return t, nil
}

// rtu reports whether the client speaks RTU framing.
func (c *Client) rtu() bool { return c.target.scheme != "tcp" }

// acquire takes the request lock, giving up at the deadline. The
// uncontended path does not allocate.
func (c *Client) acquire(ctx context.Context, deadline time.Time) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for the connection: %w", ctx.Err())
	case <-t.C:
		return fmt.Errorf("wait for the connection: %w", ErrTimeout)
	}
}

func (c *Client) release() { <-c.sem }

// connect opens the link. The caller holds the request lock.
func (c *Client) connect(ctx context.Context, deadline time.Time) error {
	if d := time.Now().Add(c.opts.DialTimeout); d.Before(deadline) {
		deadline = d
	}
	c.stats.dials.Add(1)
	var err error
	if c.target.scheme == "rtu" {
		c.link, err = openSerial(c.target.addr, c.target.serial)
		c.lastIO = time.Now()
	} else {
		dctx, cancel := context.WithDeadline(ctx, deadline)
		var conn net.Conn
		conn, err = (&net.Dialer{}).DialContext(dctx, "tcp", c.target.addr)
		cancel()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				// Requests are small and answered at once: Nagle's algorithm
				// would only add latency.
				_ = tc.SetNoDelay(true)
			}
			c.link = conn
		}
	}
	if err != nil {
		c.link = nil
		c.fail()
		return fmt.Errorf("connect %s: %w", c.target.addr, err)
	}
	c.log.Info("modbus connected")
	return nil
}

// fail records a failure and schedules the next dial: immediately after
// the first failure, then after a doubling wait capped at BackoffMax.
func (c *Client) fail() {
	c.failures++
	wait := time.Duration(0)
	if c.failures > 1 {
		wait = c.opts.BackoffMin << min(c.failures-2, 20)
		if wait > c.opts.BackoffMax || wait <= 0 {
			wait = c.opts.BackoffMax
		}
	}
	c.retryAt = time.Now().Add(wait)
}

func (c *Client) closeLink() {
	if c.link != nil {
		_ = c.link.Close()
		c.link = nil
		c.log.Info("modbus connection closed")
	}
}

// Close closes the connection. A later request reconnects.
func (c *Client) Close() error {
	c.sem <- struct{}{}
	defer c.release()
	c.closeLink()
	return nil
}

// Stats returns a snapshot of the client's counters.
func (c *Client) Stats() Stats {
	return Stats{
		Requests:   c.stats.requests.Load(),
		Errors:     c.stats.errors.Load(),
		Exceptions: c.stats.exceptions.Load(),
		Timeouts:   c.stats.timeouts.Load(),
		Dials:      c.stats.dials.Load(),
		Stale:      c.stats.stale.Load(),
		Garbage:    c.stats.garbage.Load(),
	}
}

// Do sends one request and appends the response payload to dst: register
// bytes (big-endian, as on the wire) or packed bits for reads, the echoed
// address and value or quantity for writes. An exception response returns
// an *ExceptionError and keeps the connection. A timeout or I/O error
// closes the connection; the next request reconnects after the back-off.
// Do never blocks longer than Options.Timeout or the context's deadline,
// whichever is sooner, waiting for another caller's request included.
func (c *Client) Do(ctx context.Context, req *Request, dst []byte) ([]byte, error) {
	if err := req.Validate(); err != nil {
		return dst, err
	}
	if c.target.scheme == "rtu" && req.Unit == 0 && req.Function <= FuncReadInputRegisters {
		return dst, fmt.Errorf("check request: read from broadcast unit 0")
	}
	c.stats.requests.Add(1)
	deadline := time.Now().Add(c.opts.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.acquire(ctx, deadline); err != nil {
		c.stats.errors.Add(1)
		return dst, err
	}
	defer c.release()
	if err := ctx.Err(); err != nil {
		c.stats.errors.Add(1)
		return dst, err
	}
	now := time.Now()
	if c.link == nil {
		if now.Before(c.retryAt) {
			c.stats.errors.Add(1)
			return dst, fmt.Errorf("connect %s: %w for %v", c.target.addr, ErrBackoff, c.retryAt.Sub(now).Round(time.Millisecond))
		}
		if err := c.connect(ctx, deadline); err != nil {
			c.stats.errors.Add(1)
			return dst, err
		}
	}
	l := c.link
	if ctx.Done() != nil {
		// A cancelled context interrupts the blocked read by moving the
		// deadline into the past. Wait for the callback when it already
		// started so that it cannot hit the next request's deadline.
		done := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			_ = l.SetDeadline(time.Unix(1, 0))
			close(done)
		})
		defer func() {
			if !stop() {
				<-done
			}
		}()
	}
	if err := l.SetDeadline(deadline); err != nil {
		c.closeLink()
		c.fail()
		c.stats.errors.Add(1)
		return dst, fmt.Errorf("set deadline: %w", err)
	}
	var payload []byte
	var err error
	if c.rtu() {
		payload, err = c.roundTripRTU(req)
	} else {
		payload, err = c.roundTripTCP(req)
	}
	if err == nil {
		c.failures = 0
		return append(dst, payload...), nil
	}
	c.stats.errors.Add(1)
	var ex *ExceptionError
	if errors.As(err, &ex) {
		c.failures = 0
		c.stats.exceptions.Add(1)
		return dst, err
	}
	timeout := errors.Is(err, ErrTimeout)
	if timeout {
		c.stats.timeouts.Add(1)
	}
	if cerr := ctx.Err(); cerr != nil {
		err = fmt.Errorf("%w (%w)", err, cerr)
	}
	if timeout && c.target.scheme == "rtu" {
		// A silent device does not mean a broken serial line: keep the
		// port open for the other units; the next request flushes input.
		return dst, fmt.Errorf("request unit %d function %d: %w", req.Unit, req.Function, err)
	}
	c.closeLink()
	c.fail()
	return dst, fmt.Errorf("request unit %d function %d: %w", req.Unit, req.Function, err)
}

// ErrTimeout is wrapped by the error of a request that reached its
// deadline without a response.
var ErrTimeout = errors.New("timeout")

// ioErr classifies a read or write error.
func ioErr(op string, err error) error {
	var ne net.Error
	if errors.Is(err, errDeadline) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%s: %w", op, ErrTimeout)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// writeAll writes the frame; a frame is small, so this is one syscall.
func (c *Client) writeAll(b []byte) error {
	for len(b) > 0 {
		n, err := c.link.Write(b)
		if err != nil {
			return ioErr("write request", err)
		}
		b = b[n:]
	}
	return nil
}
