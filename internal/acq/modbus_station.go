package acq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/tag"
)

// BlockReader is the part of a Modbus client a station uses; *modbus.Client
// implements it. ReadBlock is safe for concurrent use: the client
// serializes requests on its one connection, each bounded by the client's
// request timeout once it holds the connection.
type BlockReader interface {
	ReadBlock(ctx context.Context, unit uint8, b modbus.Block, dst []byte) ([]byte, error)
}

var _ BlockReader = (*modbus.Client)(nil)

// modbusItem is how one tag is decoded.
type modbusItem struct {
	typ    modbus.Type
	order  modbus.Order
	bit    bool
	scale  float64
	offset float64
}

// ModbusStation polls one unit through a (possibly shared) client with a
// read plan that merges its tags into as few requests as possible.
type ModbusStation struct {
	name  string
	rd    BlockReader
	unit  uint8
	pause time.Duration // between two requests of one poll
	defs  []tag.Def
	items []modbusItem
	plan  *modbus.Plan
	data  [][]byte // response payloads, reused
}

var _ Station = (*ModbusStation)(nil)

// NewModbusStation builds a station from its configuration (validated by
// config) reading through rd.
func NewModbusStation(c config.ModbusClient, rd BlockReader) (*ModbusStation, error) {
	tags, err := c.ExpandedTags()
	if err != nil {
		return nil, fmt.Errorf("build modbus station %q: %w", c.Name, err)
	}
	if c.Unit < 0 || c.Unit > 255 {
		return nil, fmt.Errorf("build modbus station %q: unit %d out of range", c.Name, c.Unit)
	}
	s := &ModbusStation{name: c.Name, rd: rd, unit: uint8(c.Unit), pause: c.Pause.Std()}
	planItems := make([]modbus.Item, len(tags))
	for i, t := range tags {
		it, pi := modbusDecoding(t)
		s.items = append(s.items, it)
		planItems[i] = pi
		s.defs = append(s.defs, tag.Def{
			Name: t.Name, Unit: t.Unit, Description: t.Description,
			Source:  "modbus:" + c.Name,
			Archive: archivePolicy(t.Archive), Deadband: t.Deadband,
		})
	}
	if s.plan, err = modbus.NewPlan(planItems, modbus.DefaultPlanOptions()); err != nil {
		return nil, fmt.Errorf("build modbus station %q: %w", c.Name, err)
	}
	s.data = make([][]byte, len(s.plan.Blocks))
	return s, nil
}

func modbusDecoding(t config.ModbusTag) (modbusItem, modbus.Item) {
	it := modbusItem{typ: t.Type, order: t.Order, bit: t.Area.IsBit(), scale: t.Scale, offset: t.Offset}
	if it.scale == 0 {
		it.scale = 1
	}
	return it, modbus.Item{Area: t.Area, Address: t.Address, Width: t.Type.Registers()}
}

func archivePolicy(a config.Archive) tag.Policy {
	switch a {
	case config.ArchiveAll:
		return tag.ArchiveAll
	case config.ArchiveDeadband:
		return tag.ArchiveDeadband
	}
	return tag.ArchiveChange
}

// Name implements Station.
func (s *ModbusStation) Name() string { return s.name }

// Tags implements Station.
func (s *ModbusStation) Tags() []tag.Def { return s.defs }

// Requests is the number of read requests one poll makes.
func (s *ModbusStation) Requests() int { return len(s.plan.Blocks) }

// Poll implements Station: it reads every block of the plan. An exception
// answer from the device marks only that block's tags bad (the device is
// alive); a gateway exception (no path, target not answering) or any other
// error fails the whole poll.
func (s *ModbusStation) Poll(ctx context.Context, vals []Value) error {
	for i, b := range s.plan.Blocks {
		if i > 0 && s.pause > 0 {
			t := time.NewTimer(s.pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		d, err := s.rd.ReadBlock(ctx, s.unit, b, s.data[i][:0])
		var exc *modbus.ExceptionError
		switch {
		case err == nil:
			s.data[i] = d
		case errors.As(err, &exc) && exc.Code != modbus.ExGatewayPathUnavailable && exc.Code != modbus.ExGatewayTargetFailedRespond:
			s.data[i] = d[:0] // too short: the block's tags decode as bad
		default:
			return fmt.Errorf("read %v %d+%d: %w", b.Area, b.Address, b.Quantity, err)
		}
	}
	for i, it := range s.items {
		vals[i] = s.decode(i, it)
	}
	return nil
}

// decode returns tag i's value, or NaN with quality bad when its block is
// missing or the value is not a finite number.
func (s *ModbusStation) decode(i int, it modbusItem) Value {
	bad := Value{V: math.NaN(), Q: badQuality}
	if it.bit {
		b, ok := s.plan.Bit(i, s.data)
		if !ok {
			return bad
		}
		if b {
			return Value{V: 1}
		}
		return Value{V: 0}
	}
	raw := s.plan.Registers(i, s.data)
	if raw == nil {
		return bad
	}
	v, err := modbus.DecodeFloat64(raw, it.typ, it.order)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return bad
	}
	return Value{V: v*it.scale + it.offset}
}

// ModbusLinks are the clients opened for Modbus stations, one per link.
type ModbusLinks struct {
	clients   []*modbus.Client
	byStation map[string]*modbus.Client
}

// Client returns the client a station reads through, so that control
// writes to the station's device share the link (and its one-request-at-a-
// time serialization) with the polls.
func (l *ModbusLinks) Client(station string) (*modbus.Client, bool) {
	c, ok := l.byStation[station]
	return c, ok
}

// Close closes every client.
func (l *ModbusLinks) Close() error {
	var errs []error
	for _, c := range l.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// AddModbus builds a station per configured Modbus client and adds them to
// the scheduler. Stations on the same link (same TCP address or serial
// device) share one client, so their requests are serialized on the
// connection; the link's request timeout is the longest of its stations'
// timeouts. A station's poll deadline leaves room for one in-flight request
// of every other station on its link, so waiting for a slow neighbour does
// not fail a healthy station. On error the links opened so far are closed
// and the scheduler should not be started.
func (s *Scheduler) AddModbus(cfgs []config.ModbusClient, log *slog.Logger) (*ModbusLinks, error) {
	type link struct {
		client   *modbus.Client
		timeout  time.Duration
		stations int
	}
	links := map[string]*link{}
	keys := make([]string, len(cfgs))
	for i, c := range cfgs {
		ep, err := c.Endpoint()
		if err != nil {
			return nil, fmt.Errorf("add modbus station %q: %w", c.Name, err)
		}
		key := ep.Scheme + "://" + ep.Address + ep.Device
		keys[i] = key
		l := links[key]
		if l == nil {
			l = &link{}
			links[key] = l
		}
		l.timeout = max(l.timeout, c.Timeout.Std())
		l.stations++
	}
	out := &ModbusLinks{byStation: make(map[string]*modbus.Client, len(cfgs))}
	for i, c := range cfgs {
		l := links[keys[i]]
		if l.client == nil {
			opts := modbus.DefaultOptions()
			if l.timeout > 0 {
				opts.Timeout = l.timeout
			}
			opts.Logger = log
			cl, err := modbus.NewClient(c.URL, opts)
			if err != nil {
				out.Close()
				return nil, fmt.Errorf("add modbus station %q: %w", c.Name, err)
			}
			l.client = cl
			out.clients = append(out.clients, cl)
		}
		st, err := NewModbusStation(c, l.client)
		if err != nil {
			out.Close()
			return nil, err
		}
		linkTimeout := l.timeout
		if linkTimeout <= 0 {
			linkTimeout = modbus.DefaultOptions().Timeout
		}
		n := time.Duration(st.Requests())
		o := StationOptions{
			Period:     c.Period.Std(),
			Phase:      c.Phase.Std(),
			Pause:      c.Pause.Std(),
			Timeout:    (n+time.Duration(l.stations))*linkTimeout + n*c.Pause.Std(),
			RetryPause: max(DefaultRetryPause, c.Period.Std()),
			Spin:       -1,
		}
		if err := s.Add(st, o); err != nil {
			out.Close()
			return nil, err
		}
		out.byStation[c.Name] = l.client
	}
	return out, nil
}
