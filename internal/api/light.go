package api

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
)

// The light server answers the POSTs of a few paths (the event collector's,
// which take tens of thousands of tiny requests a second) on plain-HTTP
// keep-alive connections without net/http's per-request machinery: it
// parses the request line and headers in place, builds the *http.Request
// the handler expects and writes the buffered answer in one write. The
// handler is the same one net/http serves (authentication, rate limits,
// request counting and all), so the two answer alike.
//
// It is an optimisation, never a second dialect: every request it is not
// sure of (another method or path, a query, chunked bodies, Expect,
// Upgrade, obsolete line folding, bare LF line ends, headers larger than
// its buffer, a missing Host or Content-Length, a duplicate
// Content-Length...) makes it hand the connection, with every byte it has
// read and not consumed, to net/http, which serves it from then on.

// lightBufSize is the read buffer of a light connection; a request line
// and headers larger than this go to net/http.
const lightBufSize = 4096

// maxLightDiscard is how much of a body the handler left unread is
// skipped to keep the connection; more closes it (as net/http does).
const maxLightDiscard = 256 << 10

// lightListener accepts connections for an http.Server: it serves the
// light requests of each itself and passes the connection to the server
// (through Accept) at the first request it does not take.
type lightListener struct {
	net.Listener
	lim ServerLimits // lim.LightPOST says what is served here
	log *slog.Logger

	handoff chan net.Conn // connections for net/http
	done    chan struct{} // closed by Close
	closed  atomic.Bool
	failed  chan struct{} // closed when the raw listener failed; err says why
	err     error
	once    sync.Once

	mu    sync.Mutex
	conns map[*lightConn]struct{} // connections the light server holds
	wg    sync.WaitGroup          // their goroutines
}

// newLightListener starts accepting from ln.
func newLightListener(ln net.Listener, lim ServerLimits, log *slog.Logger) *lightListener {
	l := &lightListener{
		Listener: ln, lim: lim, log: log,
		handoff: make(chan net.Conn),
		done:    make(chan struct{}),
		failed:  make(chan struct{}),
		conns:   map[*lightConn]struct{}{},
	}
	go l.acceptLoop()
	return l
}

func (l *lightListener) acceptLoop() {
	var backoff time.Duration
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if l.closed.Load() {
				l.err = net.ErrClosed
				close(l.failed)
				return
			}
			// Out of file descriptors and the like: wait and retry, as
			// net/http does.
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				l.log.Warn("http accept failed; retrying", "err", err, "in", backoff)
				time.Sleep(backoff)
				continue
			}
			l.err = err
			close(l.failed)
			return
		}
		backoff = 0
		lc := &lightConn{l: l, c: c, br: bufio.NewReaderSize(c, lightBufSize), remote: c.RemoteAddr().String()}
		l.mu.Lock()
		if l.closed.Load() {
			// Accepted as Close ran: wait may be waiting already, so
			// the connection is not counted (nor served).
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.conns[lc] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go lc.serve()
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// Accept returns the next connection for net/http.
func (l *lightListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.handoff:
		return c, nil
	case <-l.failed:
		return nil, l.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and wakes the idle light connections, which then
// close; those in a request finish it first (wait waits for them).
func (l *lightListener) Close() error {
	var err error
	l.once.Do(func() {
		l.closed.Store(true)
		close(l.done)
		err = l.Listener.Close()
		l.mu.Lock()
		for lc := range l.conns {
			if lc.idle.Load() {
				lc.c.SetReadDeadline(time.Unix(1, 0))
			}
		}
		l.mu.Unlock()
	})
	return err
}

// wait waits until every light connection ended, or ctx ends (then it
// closes them).
func (l *lightListener) wait(ctx context.Context) error {
	ch := make(chan struct{})
	go func() { l.wg.Wait(); close(ch) }()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		for lc := range l.conns {
			lc.c.Close()
		}
		l.mu.Unlock()
		return ctx.Err()
	}
}

// lightConn is one connection served by the light server.
type lightConn struct {
	l      *lightListener
	c      net.Conn
	br     *bufio.Reader
	remote string
	idle   atomic.Bool   // waiting for the next request
	last   time.Time     // when the last request began
	tmpl   *http.Request // what every request starts from

	// The request and its parts, reused from request to request: the
	// handlers keep none of them after they return.
	req  http.Request
	url  url.URL
	hdr  http.Header
	vals []string
	body lightBody

	// Reused from request to request.
	w   lightResponse
	out []byte
}

// serve answers requests until the connection ends or a request is for
// net/http.
func (lc *lightConn) serve() {
	defer lc.l.wg.Done()
	handedOff := false
	defer func() {
		lc.l.mu.Lock()
		delete(lc.l.conns, lc)
		lc.l.mu.Unlock()
		if !handedOff {
			if lc.body.n > 0 {
				lc.linger()
			}
			lc.c.Close()
		}
	}()
	// No cancellation: the light paths' handlers are short (an fsync at
	// most), and a context that is never done costs waiters no select.
	ctx := context.WithValue(context.Background(), http.LocalAddrContextKey, lc.c.LocalAddr())
	// Each request is a copy of this one, which carries the context.
	lc.tmpl = (&http.Request{Method: http.MethodPost, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		RemoteAddr: lc.remote}).WithContext(ctx)
	lim := lc.l.lim
	first := true
	for {
		// Wait for the next request: the first within the header
		// timeout, later ones within the idle timeout.
		wait := lim.IdleTimeout
		if first {
			wait = lim.ReadHeaderTimeout
		}
		// The deadline is set before the idle mark: Close sets a past
		// deadline on idle connections, which must not be overwritten.
		if wait > 0 {
			// From the start of the last request: the clock is read
			// once per request.
			if first {
				lc.last = time.Now()
			}
			lc.c.SetReadDeadline(lc.last.Add(wait))
		}
		lc.idle.Store(true)
		if lc.l.closed.Load() {
			return
		}
		// As net/http: a connection that ends with fewer than four
		// bytes after a request is closed without an answer, and up to
		// four CR or LF after a POST (old clients' habit) are skipped.
		need := 4
		if first {
			need = 1
		}
		peek, err := lc.br.Peek(need)
		if err != nil {
			return
		}
		if !first {
			n := 0
			for n < len(peek) && (peek[n] == '\r' || peek[n] == '\n') {
				n++
			}
			lc.br.Discard(n)
		}
		lc.idle.Store(false)
		start := time.Now()
		lc.last = start
		h, req, hdrLen, closeAfter := lc.parse(start, first)
		first = false
		if h == nil {
			// Not ours (or a broken request, which net/http answers).
			handedOff = lc.handOff()
			return
		}
		lc.br.Discard(hdrLen)
		if lim.ReadTimeout > 0 && int64(lc.br.Buffered()) < req.ContentLength {
			lc.c.SetReadDeadline(start.Add(lim.ReadTimeout))
		}
		body := &lc.body
		*body = lightBody{br: lc.br, n: req.ContentLength}
		req.Body = body
		keep := lc.answer(h, req, closeAfter)
		if !keep {
			return
		}
		// Skip what the handler did not read, within reason.
		if body.n > 0 {
			if body.n > maxLightDiscard {
				return
			}
			if _, err := lc.br.Discard(int(body.n)); err != nil {
				return
			}
			body.n = 0
		}
	}
}

// lingerMax is how long a connection closed with part of a body unread
// stays half-open, reading and dropping what the client still sends:
// closing at once would make the kernel answer the client's next body
// bytes with a reset, which can destroy the answer (a 413 or 503) before
// the client reads it. net/http waits 500 ms; a client sending a large
// body on a busy machine needs longer.
const lingerMax = 5 * time.Second

// linger sends FIN, then drops what the client sends until it closes or
// lingerMax is up.
func (lc *lightConn) linger() {
	if cw, ok := lc.c.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		lc.c.SetReadDeadline(time.Now().Add(lingerMax))
		io.Copy(io.Discard, lc.c)
	}
}

// handOff gives the connection to net/http, with the bytes read so far
// in front of the rest.
func (lc *lightConn) handOff() bool {
	lc.c.SetReadDeadline(time.Time{})
	select {
	case lc.l.handoff <- &prefixConn{Conn: lc.c, r: lc.br}:
		return true
	case <-lc.l.done:
		return false
	}
}

// prefixConn reads what a light connection buffered before the rest.
type prefixConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// light returns the LightPOST path equal to target and its handler, or a
// nil handler when the request is not served light.
func (l *lightListener) light(method, target []byte) (string, http.Handler) {
	if string(method) != http.MethodPost {
		return "", nil
	}
	for p, h := range l.lim.LightPOST {
		if p == string(target) {
			return p, h
		}
	}
	return "", nil
}

// parse reads the request line and headers from the buffer, reading
// more as needed within the header timeout, and returns the request and
// its handler, or a nil handler when the request is not one the light
// server takes. Nothing is consumed either way.
func (lc *lightConn) parse(start time.Time, first bool) (h http.Handler, req *http.Request, hdrLen int, closeAfter bool) {
	const no = 0
	var buf []byte
	deadlineSet := first
	for {
		buf, _ = lc.br.Peek(lc.br.Buffered())
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			hdrLen = i + 4
			break
		}
		if bytes.Contains(buf, []byte("\n\n")) || len(buf) >= lightBufSize {
			return nil, nil, no, false // bare LF line ends or large headers
		}
		if !deadlineSet && lc.l.lim.ReadHeaderTimeout > 0 {
			lc.c.SetReadDeadline(start.Add(lc.l.lim.ReadHeaderTimeout))
			deadlineSet = true
		}
		if _, err := lc.br.Peek(len(buf) + 1); err != nil {
			// A timeout or a client gone mid-headers: net/http would
			// answer a timeout with nothing either.
			return nil, nil, no, false
		}
	}
	head := buf[:hdrLen-2]
	eol := bytes.Index(head, []byte("\r\n"))
	line := head[:eol]
	sp1 := bytes.IndexByte(line, ' ')
	if sp1 < 0 {
		return nil, nil, no, false
	}
	sp2 := bytes.IndexByte(line[sp1+1:], ' ')
	if sp2 < 0 {
		return nil, nil, no, false
	}
	method, target, proto := line[:sp1], line[sp1+1:sp1+1+sp2], line[sp1+2+sp2:]
	path, h := lc.l.light(method, target)
	if h == nil || string(proto) != "HTTP/1.1" {
		return nil, nil, no, false
	}
	// One string holds every header value, and one slice their
	// []string, so a request costs a few allocations, not two per
	// header.
	fields := head[eol+2:]
	all := string(fields)
	n := bytes.Count(fields, []byte("\r\n"))
	if cap(lc.vals) < n {
		lc.vals = make([]string, n)
	}
	vals := lc.vals[:n]
	clear(vals)
	if lc.hdr == nil {
		lc.hdr = make(http.Header, n)
	}
	hdr := lc.hdr
	clear(hdr)
	var host string
	contentLength := int64(-1)
	hosts := 0
	for i, off := 0, 0; off < len(fields); i++ {
		j := bytes.Index(fields[off:], []byte("\r\n"))
		l := fields[off : off+j]
		lstart := off
		off += j + 2
		colon := bytes.IndexByte(l, ':')
		if colon <= 0 || !httpguts.ValidHeaderFieldName(all[lstart:lstart+colon]) {
			return nil, nil, no, false // folding, or a name net/http refuses
		}
		vs, ve := colon+1, len(l)
		for vs < ve && (l[vs] == ' ' || l[vs] == '\t') {
			vs++
		}
		for ve > vs && (l[ve-1] == ' ' || l[ve-1] == '\t') {
			ve--
		}
		value := l[vs:ve]
		if !httpguts.ValidHeaderFieldValue(all[lstart+vs : lstart+ve]) {
			return nil, nil, no, false
		}
		// A substring of all: textproto keeps a canonical name as it is
		// and interns the common ones.
		key := textproto.CanonicalMIMEHeaderKey(all[lstart : lstart+colon])
		switch key {
		case "Content-Length":
			n, err := strconv.ParseInt(string(value), 10, 64)
			if contentLength >= 0 || err != nil || n < 0 || value[0] == '+' {
				return nil, nil, no, false
			}
			contentLength = n
		case "Transfer-Encoding", "Expect", "Upgrade", "Content-Encoding", "Pragma":
			return nil, nil, no, false
		case "Host":
			hosts++
			host = all[lstart+vs : lstart+ve]
			if !httpguts.ValidHostHeader(host) {
				return nil, nil, no, false
			}
			continue // net/http keeps it in Request.Host only
		case "Connection":
			for tok := range strings.SplitSeq(string(value), ",") {
				switch strings.ToLower(strings.TrimSpace(tok)) {
				case "close":
					closeAfter = true
				case "keep-alive", "":
				default:
					return nil, nil, no, false
				}
			}
		}
		vals[i] = all[lstart+vs : lstart+ve]
		if old, ok := hdr[key]; ok {
			hdr[key] = append(old, vals[i])
		} else {
			hdr[key] = vals[i : i+1 : i+1]
		}
	}
	if hosts != 1 || contentLength < 0 {
		return nil, nil, no, false
	}
	req = &lc.req
	*req = *lc.tmpl
	lc.url = url.URL{Path: path}
	req.URL, req.RequestURI = &lc.url, path
	req.Header, req.ContentLength, req.Host, req.Close = hdr, contentLength, host, closeAfter
	return h, req, hdrLen, closeAfter
}

// answer runs the handler on req and writes its answer. It returns
// whether the connection may serve another request.
func (lc *lightConn) answer(h http.Handler, req *http.Request, closeAfter bool) (keep bool) {
	w := &lc.w
	w.reset()
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				lc.l.log.Error("http: panic serving request", "remote", lc.remote, "path", req.URL.Path,
					"panic", v, "stack", string(debug.Stack()))
			}
			keep = false
		}
	}()
	h.ServeHTTP(w, req)
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if b := req.Body.(*lightBody); b.n > maxLightDiscard || lc.l.closed.Load() {
		closeAfter = true // as net/http: too much left to skip, or shutting down
	} else if b.n > 0 && !b.sawEOF && !closeAfter {
		// As net/http, the rest of the body is skipped before the
		// answer: a body that cannot be read to its end (the client
		// sent less than its Content-Length) closes the connection.
		if _, err := b.br.Discard(int(b.n)); err != nil {
			closeAfter = true
		}
		b.n = 0
	}
	lc.out = w.appendTo(lc.out[:0], lc.last, closeAfter)
	if lc.l.lim.WriteTimeout > 0 {
		lc.c.SetWriteDeadline(time.Now().Add(lc.l.lim.WriteTimeout))
	}
	if _, err := lc.c.Write(lc.out); err != nil {
		return false
	}
	return !closeAfter
}

// lightBody is a request body of known length read from the connection.
type lightBody struct {
	br     *bufio.Reader
	n      int64 // bytes left
	sawEOF bool  // the connection ended before them: later reads say io.EOF
}

func (b *lightBody) Read(p []byte) (int, error) {
	if b.n <= 0 || b.sawEOF {
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.br.Read(p)
	b.n -= int64(n)
	if err == io.EOF && b.n > 0 {
		b.sawEOF = true
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *lightBody) Close() error { return nil }

// lightResponse buffers a handler's answer. The light paths answer in a
// few bytes, so the whole answer is held and sent in one write.
type lightResponse struct {
	hdr   http.Header
	code  int
	wrote bool
	body  []byte
}

func (w *lightResponse) reset() {
	if w.hdr == nil {
		w.hdr = make(http.Header, 4)
	}
	clear(w.hdr)
	w.code, w.wrote, w.body = 0, false, w.body[:0]
}

func (w *lightResponse) Header() http.Header { return w.hdr }

func (w *lightResponse) WriteHeader(code int) {
	if w.wrote || code < 200 {
		return // informational answers are not sent
	}
	w.code, w.wrote = code, true
}

func (w *lightResponse) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if !bodyAllowed(w.code) {
		return 0, http.ErrBodyNotAllowed
	}
	w.body = append(w.body, p...)
	return len(p), nil
}

func bodyAllowed(code int) bool {
	return code != http.StatusNoContent && code != http.StatusNotModified
}

// appendTo appends the status line, headers (Date: now) and body.
func (w *lightResponse) appendTo(b []byte, now time.Time, closeAfter bool) []byte {
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(w.code), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(w.code)...)
	b = append(b, "\r\n"...)
	// The keys are canonical: the map is used directly.
	delete(w.hdr, "Content-Length")
	delete(w.hdr, "Connection")
	delete(w.hdr, "Transfer-Encoding")
	if bodyAllowed(w.code) {
		if len(w.body) > 0 && len(w.hdr["Content-Type"]) == 0 {
			w.hdr.Set("Content-Type", http.DetectContentType(w.body))
		}
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(w.body)), 10)
		b = append(b, "\r\n"...)
	}
	if _, ok := w.hdr["Date"]; !ok {
		b = append(b, "Date: "...)
		b = appendDate(b, now)
		b = append(b, "\r\n"...)
	}
	if closeAfter {
		b = append(b, "Connection: close\r\n"...)
	}
	for k, vs := range w.hdr {
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			if strings.ContainsAny(v, "\r\n") {
				v = strings.NewReplacer("\r", " ", "\n", " ").Replace(v)
			}
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "\r\n"...)
	return append(b, w.body...)
}

// dateCache holds the Date header of the current second.
var dateCache atomic.Pointer[cachedDate]

type cachedDate struct {
	sec int64
	s   []byte
}

func appendDate(b []byte, now time.Time) []byte {
	d := dateCache.Load()
	if d == nil || d.sec != now.Unix() {
		d = &cachedDate{sec: now.Unix(), s: now.UTC().AppendFormat(nil, http.TimeFormat)}
		dateCache.Store(d)
	}
	return append(b, d.s...)
}
