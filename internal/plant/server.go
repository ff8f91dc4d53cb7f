package plant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/tag"
)

// SourceModbusServer is the Source of tags that only exist because a
// writable server register publishes them: their values come from Modbus
// clients writing to Pith.
const SourceModbusServer = "modbus-server"

// warnEvery rate-limits repeated warnings about values a register cannot
// hold, which would otherwise repeat with every change.
const warnEvery = 10 * time.Second

// pubReg is one published value: a tag encoded into registers or a bit.
type pubReg struct {
	id       tag.ID
	name     string
	area     modbus.Area
	addr     uint16
	width    uint16 // registers, or 1 for a bit
	typ      modbus.Type
	order    modbus.Order
	scale    float64
	offset   float64
	writable bool
}

// publisher runs one [[modbus.server]]: it keeps the server's bank equal
// to the published tags' current values, through a Coalesce subscription
// (a slow bank update only ever skips to the newest value), and turns
// client writes to writable registers into tag updates.
type publisher struct {
	log  *slog.Logger
	tab  *tag.Table
	srv  *modbus.Server
	sub  *tag.Subscription
	addr string
	regs []pubReg
	byID map[tag.ID][]int // tag -> indexes into regs
	// writable maps area<<16|address of every register or bit of a
	// writable value to its index in regs.
	writable map[uint32]int
	done     chan struct{}
	cancel   context.CancelFunc  // ends run
	cfg      config.ModbusServer // to tell an unchanged server at reload
	port     *port               // the bound listener, possibly inherited
	inherit  bool                // port belongs to the predecessor until serve
	served   chan struct{}       // closed when Serve returned; nil before serve

	encodeErrs atomic.Uint64
	lastWarn   atomic.Int64 // Unix nanoseconds of the last encode warning
}

func addrKey(a modbus.Area, addr uint16) uint32 { return uint32(a)<<16 | uint32(addr) }

// newPublisher defines the tags the server publishes that nobody defined
// yet, subscribes to them, fills the bank with their current values and
// binds the listen address, or takes over the bound port of inherit (the
// running server of the same address, at a reload). It does not answer
// clients until serve: a reload builds it next to the running one.
func newPublisher(ctx context.Context, sc config.ModbusServer, tab *tag.Table, inherit *port, log *slog.Logger) (*publisher, error) {
	regs, err := sc.ExpandedRegisters()
	if err != nil {
		return nil, err
	}
	p := &publisher{log: log, tab: tab, byID: map[tag.ID][]int{}, writable: map[uint32]int{}, done: make(chan struct{}), cfg: sc}
	for _, r := range regs {
		id, ok := tab.Lookup(r.Tag)
		if !ok {
			d := tag.Def{Name: r.Tag}
			if r.Writable {
				d.Source = SourceModbusServer
				d.Description = "written by Modbus clients at " + sc.Listen
			}
			if id, err = tab.Define(d); err != nil {
				return nil, fmt.Errorf("define published tag: %w", err)
			}
		}
		pr := pubReg{id: id, name: r.Tag, area: r.Area, addr: r.Address, width: r.Type.Registers(),
			typ: r.Type, order: r.Order, scale: r.Scale, offset: r.Offset, writable: r.Writable}
		if pr.area.IsBit() {
			pr.width = 1
		}
		if pr.scale == 0 {
			pr.scale = 1
		}
		i := len(p.regs)
		p.regs = append(p.regs, pr)
		p.byID[id] = append(p.byID[id], i)
		if r.Writable {
			for k := range pr.width {
				p.writable[addrKey(pr.area, pr.addr+k)] = i
			}
		}
	}
	if inherit != nil {
		p.port, p.inherit = inherit, true
	} else if p.port, err = listenPort(sc.Listen); err != nil {
		return nil, err
	}
	opts := modbus.DefaultServerOptions()
	opts.Addr = sc.Listen
	opts.UnitID = uint8(sc.Unit)
	opts.Logger = log
	opts.OnWrite = p.onWrite
	p.srv = modbus.NewServer(opts)
	p.addr = p.port.Addr().String()

	// Subscribe before reading the current values, so that a change made
	// in between is delivered rather than lost.
	p.sub = tab.Subscribe(tag.SubOptions{Name: "modbus-server " + sc.Listen, Mode: tag.Coalesce})
	for i := range p.regs {
		if v, ok := tab.Get(p.regs[i].id); ok && v.Has {
			p.publish(i, v.V)
		}
	}
	ctx, p.cancel = context.WithCancel(ctx)
	go p.run(ctx)
	return p, nil
}

// serve starts answering clients on the publisher's port; the
// predecessor that held the port must have stopped.
func (p *publisher) serve() {
	p.inherit = false
	p.served = make(chan struct{})
	ln := p.port.lease()
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(ln)
	}()
	p.log.Info("modbus server listening", "addr", p.addr, "values", len(p.regs), "writable", len(p.writable))
}

// run applies the table's changes to the bank until ctx ends.
func (p *publisher) run(ctx context.Context) {
	defer close(p.done)
	var buf []tag.Change
	for {
		var err error
		buf, err = p.sub.Next(ctx, buf[:0])
		if err != nil {
			return
		}
		for _, c := range buf {
			if !c.Has || c.IsText {
				continue // a bad quality without a value, or text: keep the registers
			}
			for _, i := range p.byID[c.ID] {
				p.publish(i, c.V)
			}
		}
	}
}

// publish writes one value into the bank with the inverse conversion
// raw = (value-offset)/scale.
func (p *publisher) publish(i int, v float64) {
	r := &p.regs[i]
	var err error
	if r.area.IsBit() {
		err = p.srv.Bank().SetBits(r.area, r.addr, v != 0)
	} else {
		var raw [8]byte
		var b []byte
		raw64 := (v - r.offset) / r.scale
		if r.typ == modbus.Float32 && math.Abs(raw64) > math.MaxFloat32 {
			err = fmt.Errorf("encode %s: %g out of range", r.typ, raw64)
		} else if b, err = modbus.AppendEncoded(raw[:0], raw64, r.typ, r.order); err == nil {
			err = p.srv.Bank().SetRegisterBytes(r.area, r.addr, b)
		}
	}
	if err != nil {
		n := p.encodeErrs.Add(1)
		now := time.Now().UnixNano()
		if last := p.lastWarn.Load(); now-last >= int64(warnEvery) && p.lastWarn.CompareAndSwap(last, now) {
			p.log.Warn("publish tag value", "tag", r.name, "value", v, "register", r.area.String(), "address", r.addr,
				"err", err, "errors_total", n)
		}
	}
}

// onWrite is the server's write hook: a client write to writable values
// becomes a tag update (and so an archived sample); a write touching any
// other address is refused with "illegal data address" and changes
// nothing. A write covering part of a multi-register value combines the
// written registers with the bank's current ones.
func (p *publisher) onWrite(w modbus.Write) error {
	var touched []int
	for k := range w.Quantity {
		i, ok := p.writable[addrKey(w.Area, w.Address+k)]
		if !ok {
			return &modbus.ExceptionError{Code: modbus.ExIllegalDataAddress}
		}
		if len(touched) == 0 || touched[len(touched)-1] != i {
			touched = append(touched, i)
		}
	}
	now := time.Now().UnixMilli()
	batch := make([]tag.Sample, 0, len(touched))
	for _, i := range touched {
		r := &p.regs[i]
		var v float64
		if r.area.IsBit() {
			if w.Coil(int(r.addr - w.Address)) {
				v = 1
			}
		} else {
			cur, err := p.srv.Bank().Registers(r.area, r.addr, int(r.width))
			if err != nil {
				return err
			}
			raw := make([]byte, 0, 2*len(cur))
			for k, old := range cur {
				a := r.addr + uint16(k)
				if a >= w.Address && a < w.Address+w.Quantity {
					old = w.Register(int(a - w.Address))
				}
				raw = append(raw, byte(old>>8), byte(old))
			}
			x, err := modbus.DecodeFloat64(raw, r.typ, r.order)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return &modbus.ExceptionError{Code: modbus.ExIllegalDataValue}
			}
			v = x*r.scale + r.offset
		}
		batch = append(batch, tag.Sample{ID: r.id, T: now, V: v})
	}
	// Debug, not info: a SCADA writing setpoints every cycle would flood
	// the log; the values themselves are archived.
	first := &p.regs[touched[0]]
	p.log.Debug("modbus server write", "unit", w.Unit, "register", w.Area.String(), "address", w.Address,
		"quantity", w.Quantity, "tags", len(batch), "first_tag", first.name, "first_value", batch[0].V)
	p.tab.Update(batch)
	return nil
}

// stop closes the server and ends the bank updates. keepPort leaves the
// bound port open for a successor; a port still inherited (the publisher
// never served) belongs to its predecessor and is never closed here.
func (p *publisher) stop(keepPort bool) error {
	err := p.srv.Close()
	if p.served != nil {
		<-p.served
	}
	p.tab.Unsubscribe(p.sub)
	p.cancel()
	<-p.done
	if errors.Is(err, modbus.ErrServerClosed) {
		err = nil
	}
	if !keepPort && !p.inherit {
		if cerr := p.port.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) {
			err = errors.Join(err, fmt.Errorf("close modbus port %s: %w", p.addr, cerr))
		}
	}
	return err
}

// port is a Modbus server's bound TCP listener. It outlives the server
// answering on it, so that a reload keeping a server's listen address
// hands the port to the new server: clients see their connection closed
// and reconnect, never a refused connection.
type port struct {
	*net.TCPListener
}

func listenPort(addr string) (*port, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen modbus %s: %w", addr, err)
	}
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		ln.Close()
		return nil, fmt.Errorf("listen modbus %s: not a TCP listener", addr)
	}
	return &port{tl}, nil
}

// lease returns the view of the port one server serves: closing it (as
// the server's Close does) ends that server's Accept and leaves the port
// bound.
func (p *port) lease() *lease {
	_ = p.SetDeadline(time.Time{}) // a previous lease's Close set one
	return &lease{port: p}
}

// lease is a port as one server sees it.
type lease struct {
	*port
	closed atomic.Bool
}

var _ net.Listener = (*lease)(nil)

// Accept returns the next client until Close.
func (l *lease) Accept() (net.Conn, error) {
	c, err := l.port.Accept()
	if l.closed.Load() {
		if c != nil {
			// Accepted as the lease ended: the client reconnects to the
			// successor.
			c.Close()
		}
		return nil, net.ErrClosed
	}
	return c, err
}

// Close ends Accept by a deadline in the past; the port stays bound.
func (l *lease) Close() error {
	l.closed.Store(true)
	return l.port.SetDeadline(time.Now())
}
