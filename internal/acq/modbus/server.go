package modbus

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Write describes a client's write request (FC 5, 6, 15 or 16) as the
// server's write hook sees it. Data aliases the request buffer and is only
// valid during the hook call.
type Write struct {
	Unit     uint8
	Area     Area // Coils or HoldingRegisters
	Address  uint16
	Quantity uint16
	Data     []byte // wire payload, see Request.Data
}

// Register returns the i-th written register.
func (w Write) Register(i int) uint16 { return binary.BigEndian.Uint16(w.Data[2*i:]) }

// Coil returns the i-th written coil. FC 5's 0xFF00 (on) and 0x0000 (off)
// read correctly as packed bits too, through their first byte.
func (w Write) Coil(i int) bool { return w.Data[i/8]&(1<<(i%8)) != 0 }

// WriteHook is called for each client write before it reaches the bank,
// from the connection's goroutine (so concurrently for several clients).
// Returning an *ExceptionError refuses the write with its code; any other
// error refuses it with ExServerDeviceFailure. The hook must not block for
// long: the client is waiting.
type WriteHook func(w Write) error

// ServerOptions configures a Server.
type ServerOptions struct {
	// Addr is the TCP address ListenAndServe binds; loopback by default
	// so that nothing is exposed to the plant network without a decision.
	Addr string
	// UnitID is the only unit answered; 0 answers every unit.
	UnitID uint8
	// Table sizes; requests beyond them get ExIllegalDataAddress. Zero
	// means the whole 65536-entry address space, a negative size an empty
	// table.
	HoldingRegisters int
	InputRegisters   int
	Coils            int
	DiscreteInputs   int
	// OnWrite, when set, vets client writes (see WriteHook).
	OnWrite WriteHook
	// MaxConns caps concurrent TCP clients; more are closed at once.
	MaxConns int
	// IdleTimeout closes TCP connections silent for so long; 0 keeps them.
	IdleTimeout time.Duration
	// Logger receives connection events; nil discards them.
	Logger *slog.Logger
}

// DefaultServerOptions returns the server defaults.
func DefaultServerOptions() ServerOptions {
	return ServerOptions{
		Addr:             "127.0.0.1:5020",
		HoldingRegisters: 0x10000,
		InputRegisters:   0x10000,
		Coils:            0x10000,
		DiscreteInputs:   0x10000,
		MaxConns:         64,
		IdleTimeout:      2 * time.Minute,
	}
}

// Server is a Modbus server (slave) publishing a Bank over TCP and RTU.
type Server struct {
	opts ServerOptions
	bank *Bank
	log  *slog.Logger

	mu     sync.Mutex // guards lns, conns and closed
	lns    map[net.Listener]struct{}
	conns  map[io.Closer]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer returns a server with an empty bank sized by opts.
func NewServer(opts ServerOptions) *Server {
	d := DefaultServerOptions()
	if opts.Addr == "" {
		opts.Addr = d.Addr
	}
	if opts.MaxConns <= 0 {
		opts.MaxConns = d.MaxConns
	}
	for _, n := range []*int{&opts.HoldingRegisters, &opts.InputRegisters, &opts.Coils, &opts.DiscreteInputs} {
		if *n == 0 {
			*n = 0x10000
		}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		opts:  opts,
		bank:  NewBank(opts.HoldingRegisters, opts.InputRegisters, opts.Coils, opts.DiscreteInputs),
		log:   log,
		lns:   map[net.Listener]struct{}{},
		conns: map[io.Closer]struct{}{},
	}
}

// Bank returns the server's data tables, for the tag table to fill.
func (s *Server) Bank() *Bank { return s.bank }

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("modbus server closed")

// Listen binds Options.Addr and serves it in the background until Close.
// It returns the bound address (useful with port 0).
func (s *Server) Listen() (net.Addr, error) {
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen modbus %s: %w", s.opts.Addr, err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.Serve(ln)
	}()
	return ln.Addr(), nil
}

// Serve accepts Modbus TCP clients on ln until Close; each connection gets
// its own goroutine.
func (s *Server) Serve(ln net.Listener) error {
	if !s.track(ln, true) {
		_ = ln.Close()
		return ErrServerClosed
	}
	defer s.track(ln, false)
	for {
		conn, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("accept modbus client: %w", err)
		}
		if !s.addConn(conn) {
			_ = conn.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer s.dropConn(conn)
			s.serveTCPConn(conn)
		}()
	}
}

func (s *Server) track(ln net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.lns, ln)
		return true
	}
	if s.closed {
		return false
	}
	s.lns[ln] = struct{}{}
	return true
}

func (s *Server) addConn(c io.Closer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || len(s.conns) >= s.opts.MaxConns {
		if !s.closed {
			s.log.Warn("modbus server refused a client", "max_conns", s.opts.MaxConns)
		}
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *Server) dropConn(c io.Closer) {
	_ = c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Close stops the listeners, closes every connection and waits for their
// goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		_ = ln.Close()
	}
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// serveTCPConn answers one client. Every complete frame in the read buffer
// is answered, and the answers go out in one write, so a client that
// pipelines requests is served in order without a syscall per frame.
func (s *Server) serveTCPConn(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	s.log.Debug("modbus client connected", "remote", conn.RemoteAddr())
	buf := make([]byte, 4*MaxTCPFrame)
	out := make([]byte, 0, 4*MaxTCPFrame)
	start, end := 0, 0
	for {
		if s.opts.IdleTimeout > 0 {
			_ = conn.SetReadDeadline(time.Now().Add(s.opts.IdleTimeout))
		}
		n, err := conn.Read(buf[end:])
		end += n
		if err != nil && n == 0 {
			s.log.Debug("modbus client gone", "remote", conn.RemoteAddr(), "err", err)
			return
		}
		out = out[:0]
		for {
			fl, err := TCPFrameLen(buf[start:end])
			if err != nil {
				s.log.Warn("modbus client sent a bad frame", "remote", conn.RemoteAddr(), "err", err)
				return
			}
			if fl == 0 || end-start < fl {
				break
			}
			h, pdu, _ := ParseTCPFrame(buf[start : start+fl])
			start += fl
			out = s.appendTCPAnswer(out, h, pdu)
		}
		if len(out) > 0 {
			if _, err := conn.Write(out); err != nil {
				return
			}
		}
		if start == end {
			start, end = 0, 0
		} else if len(buf)-end < MaxTCPFrame {
			end = copy(buf, buf[start:end])
			start = 0
		}
	}
}

// appendTCPAnswer appends the answer to one request frame.
func (s *Server) appendTCPAnswer(out []byte, h MBAPHeader, pdu []byte) []byte {
	base := len(out)
	out = binary.BigEndian.AppendUint16(out, h.Transaction)
	out = append(out, 0, 0, 0, 0, h.Unit)
	if s.opts.UnitID != 0 && h.Unit != s.opts.UnitID {
		// A TCP server standing for one unit answers others like a gateway
		// with no such device, so the client fails fast instead of timing out.
		fn := Function(0)
		if len(pdu) > 0 {
			fn = Function(pdu[0] &^ exceptionFlag)
		}
		out = AppendExceptionPDU(out, fn, ExGatewayTargetFailedRespond)
	} else {
		out = s.appendAnswer(out, h.Unit, pdu)
	}
	binary.BigEndian.PutUint16(out[base+4:], uint16(len(out)-base-6))
	return out
}

// appendAnswer executes one request PDU against the bank and appends the
// response PDU.
func (s *Server) appendAnswer(dst []byte, unit uint8, pdu []byte) []byte {
	req, err := ParseRequestPDU(pdu)
	if err != nil {
		var ex *ExceptionError
		if errors.As(err, &ex) {
			return AppendExceptionPDU(dst, ex.Function, ex.Code)
		}
		return AppendExceptionPDU(dst, 0, ExIllegalFunction)
	}
	req.Unit = unit
	switch req.Function {
	case FuncReadCoils, FuncReadDiscreteInputs, FuncReadHoldingRegisters, FuncReadInputRegisters:
		out, ok := s.bank.appendRead(append(dst, byte(req.Function)), &req)
		if !ok {
			return AppendExceptionPDU(dst, req.Function, ExIllegalDataAddress)
		}
		return out
	}
	if !s.bank.inRange(&req) {
		return AppendExceptionPDU(dst, req.Function, ExIllegalDataAddress)
	}
	if s.opts.OnWrite != nil {
		w := Write{Unit: unit, Area: areaOf(req.Function), Address: req.Address, Quantity: req.Quantity, Data: req.Data}
		if err := s.opts.OnWrite(w); err != nil {
			code := ExServerDeviceFailure
			var ex *ExceptionError
			if errors.As(err, &ex) {
				code = ex.Code
			}
			return AppendExceptionPDU(dst, req.Function, code)
		}
	}
	s.bank.applyWrite(&req)
	// Every write response echoes the request's first five PDU bytes:
	// function, address and value or quantity.
	return append(dst, pdu[:5]...)
}

// ServeRTU answers RTU requests read from rw (a serial line or a pty) until
// ctx is done or rw fails. Frames for another unit are ignored; broadcast
// writes (unit 0) are executed without an answer. When rw is an io.Closer,
// cancelling ctx closes it to unblock the read.
func (s *Server) ServeRTU(ctx context.Context, rw io.ReadWriter) error {
	if c, ok := rw.(io.Closer); ok {
		stop := context.AfterFunc(ctx, func() { _ = c.Close() })
		defer stop()
	}
	buf := make([]byte, 4*MaxRTUFrame)
	out := make([]byte, 0, MaxRTUFrame)
	start, end := 0, 0
	for {
		n, err := rw.Read(buf[end:])
		end += n
		if err != nil && n == 0 {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("read rtu request: %w", err)
		}
		for end-start >= 2 {
			b := buf[start:end]
			fl := RTURequestLen(b)
			if fl == 0 || (fl > 0 && len(b) < fl) {
				break
			}
			if fl < 0 || fl > MaxRTUFrame {
				// Unknown function: its end is where a CRC matches. With
				// no match the first byte is noise.
				fl = findCRC(b)
				if fl == 0 {
					// Most unknown requests are short (diagnostics, device
					// identification); past 8 bytes without a CRC match the
					// first byte is taken as noise so that the stream
					// resynchronizes on the next frame.
					if len(b) < 8 {
						break
					}
					start++
					continue
				}
			}
			unit, pdu, err := ParseRTUFrame(b[:fl])
			if err != nil {
				start++
				continue
			}
			start += fl
			if s.opts.UnitID != 0 && unit != 0 && unit != s.opts.UnitID {
				continue
			}
			out = s.appendAnswer(append(out[:0], unit), unit, pdu)
			if unit == 0 {
				continue
			}
			out = binary.LittleEndian.AppendUint16(out, CRC16(out))
			if _, err := rw.Write(out); err != nil {
				return fmt.Errorf("write rtu response: %w", err)
			}
		}
		if start == end {
			start, end = 0, 0
		} else if len(buf)-end < MaxRTUFrame {
			end = copy(buf, buf[start:end])
			start = 0
		}
	}
}

// findCRC returns the length of the shortest prefix of b (at least 4 bytes)
// that ends in its own CRC, or 0.
func findCRC(b []byte) int {
	for n := 4; n <= len(b) && n <= MaxRTUFrame; n++ {
		if CRC16(b[:n-2]) == binary.LittleEndian.Uint16(b[n-2:]) {
			return n
		}
	}
	return 0
}
