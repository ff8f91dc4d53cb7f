package plant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/pith-historian/pith/internal/acq"
	"github.com/pith-historian/pith/internal/acq/modbus"
	"github.com/pith-historian/pith/internal/acq/opcua"
	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// DeviceWriter is the part of a Modbus client a control write uses;
// *modbus.Client implements it. Its methods are safe for concurrent use:
// the client serializes them with the station's polls on the one
// connection.
type DeviceWriter interface {
	WriteSingleCoil(ctx context.Context, unit uint8, addr uint16, v bool) error
	WriteSingleRegister(ctx context.Context, unit uint8, addr, v uint16) error
	WriteRegisterBytes(ctx context.Context, unit uint8, addr uint16, raw []byte) error
}

var _ DeviceWriter = (*modbus.Client)(nil)

// controlPath is how one tag is written to its device.
type controlPath struct {
	station string
	dev     DeviceWriter // nil for a read-only area
	unit    uint8
	area    modbus.Area
	addr    uint16
	typ     modbus.Type
	order   modbus.Order
	scale   float64
	offset  float64
}

// controller implements api.Controller for the plant's Modbus stations and
// for the tags only writable servers hold.
type controller struct {
	log   *slog.Logger
	tab   *tag.Table
	paths map[string]controlPath
	// local are tags that only exist as writable server registers: Pith
	// itself is their device, so a control write sets them in the table.
	local map[string]tag.ID
	// ua are the OPC UA stations by tag name, for tags they read.
	ua map[string]*opcua.Station
}

var _ api.Controller = (*controller)(nil)

func newController(mb config.Modbus, tab *tag.Table, links *acq.ModbusLinks, ua []*opcua.Station, log *slog.Logger) (*controller, error) {
	c := &controller{log: log, tab: tab, paths: map[string]controlPath{}, local: map[string]tag.ID{}, ua: map[string]*opcua.Station{}}
	for _, st := range ua {
		for _, name := range st.TagNames() {
			c.ua[name] = st
		}
	}
	for _, sc := range mb.Clients {
		tags, err := sc.ExpandedTags()
		if err != nil {
			return nil, fmt.Errorf("build control paths of station %q: %w", sc.Name, err)
		}
		cl, _ := links.Client(sc.Name)
		for _, t := range tags {
			cp := controlPath{station: sc.Name, unit: uint8(sc.Unit), area: t.Area, addr: t.Address,
				typ: t.Type, order: t.Order, scale: t.Scale, offset: t.Offset}
			if cp.scale == 0 {
				cp.scale = 1
			}
			if t.Area.Writable() && cl != nil {
				cp.dev = cl
			}
			c.paths[t.Name] = cp
		}
	}
	for _, sc := range mb.Servers {
		regs, err := sc.ExpandedRegisters()
		if err != nil {
			return nil, fmt.Errorf("build control paths of modbus server %s: %w", sc.Listen, err)
		}
		for _, r := range regs {
			if _, polled := c.paths[r.Tag]; polled || !r.Writable {
				continue
			}
			if id, ok := tab.Lookup(r.Tag); ok {
				c.local[r.Tag] = id
			}
		}
	}
	return c, nil
}

// Control writes value to the device behind tag and returns once the
// device acknowledged. A tag read by a Modbus station is written through
// that station's link: FC 5 for a coil, FC 6 for a one-register value,
// FC 16 for wider ones, encoded like the station decodes (inverse scale and
// offset, the tag's type and byte order). A tag only held by writable
// Modbus server registers is set in the tag table. Every attempt is logged
// with who, what and the result.
func (c *controller) Control(ctx context.Context, name string, value float64, who string) error {
	start := time.Now()
	err := c.control(ctx, name, value)
	attrs := []any{"who", who, "tag", name, "value", value, "took", time.Since(start).Round(time.Microsecond)}
	if cp, ok := c.paths[name]; ok {
		attrs = append(attrs, "station", cp.station, "register", cp.area.String(), "address", cp.addr)
	}
	if st, ok := c.ua[name]; ok {
		attrs = append(attrs, "station", st.Name())
	}
	if err != nil {
		c.log.Info("control write refused", append(attrs, "err", err)...)
		return err
	}
	c.log.Info("control write done", attrs...)
	return nil
}

func (c *controller) control(ctx context.Context, name string, value float64) error {
	if math.IsNaN(value) || math.IsInf(value, 0) {
		return fmt.Errorf("write tag %q: %w: %v is not finite", name, api.ErrControlValue, value)
	}
	if st, ok := c.ua[name]; ok {
		return c.controlOPCUA(ctx, st, name, value)
	}
	cp, ok := c.paths[name]
	if !ok {
		if id, local := c.local[name]; local {
			c.tab.Update([]tag.Sample{{ID: id, T: time.Now().UnixMilli(), V: value}})
			return nil
		}
		if _, known := c.tab.Lookup(name); !known {
			return fmt.Errorf("write tag %q: %w", name, store.ErrUnknownTag)
		}
		return fmt.Errorf("write tag %q: %w: no station reads it and no writable server register holds it", name, api.ErrNoControlPath)
	}
	if cp.dev == nil {
		return fmt.Errorf("write tag %q: %w: %s registers of station %q are read-only", name, api.ErrNoControlPath, cp.area, cp.station)
	}
	if cp.area == modbus.Coils {
		if value != 0 && value != 1 {
			return fmt.Errorf("write tag %q: %w: a coil takes 0 or 1, not %v", name, api.ErrControlValue, value)
		}
		if err := cp.dev.WriteSingleCoil(ctx, cp.unit, cp.addr, value == 1); err != nil {
			return fmt.Errorf("write coil %d of station %q: %w", cp.addr, cp.station, err)
		}
		return nil
	}
	raw, err := encodeControl(value, cp)
	if err != nil {
		return fmt.Errorf("write tag %q: %w: %w", name, api.ErrControlValue, err)
	}
	if len(raw) == 2 {
		err = cp.dev.WriteSingleRegister(ctx, cp.unit, cp.addr, uint16(raw[0])<<8|uint16(raw[1]))
	} else {
		err = cp.dev.WriteRegisterBytes(ctx, cp.unit, cp.addr, raw)
	}
	if err != nil {
		return fmt.Errorf("write holding register %d of station %q: %w", cp.addr, cp.station, err)
	}
	return nil
}

// encodeControl converts an engineering value to the register bytes the
// station would decode back to it: raw = (value-offset)/scale in the tag's
// type and byte order. Integer types round; values their type cannot hold
// are refused rather than clipped, since a clipped setpoint is a
// different command.
func encodeControl(value float64, cp controlPath) ([]byte, error) {
	raw := (value - cp.offset) / cp.scale
	if math.IsNaN(raw) || math.IsInf(raw, 0) {
		return nil, fmt.Errorf("%v converts to %v", value, raw)
	}
	if cp.typ == modbus.Float32 && math.Abs(raw) > math.MaxFloat32 {
		return nil, fmt.Errorf("encode %s: %g out of range", cp.typ, raw)
	}
	b, err := modbus.AppendEncoded(make([]byte, 0, 8), raw, cp.typ, cp.order)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// controlOPCUA writes a tag read by an OPC UA station through the
// station's session; the server's status code is in the error when it is
// not Good.
func (c *controller) controlOPCUA(ctx context.Context, st *opcua.Station, name string, value float64) error {
	if !st.Writable(name) {
		return fmt.Errorf("write tag %q: %w: station %q reads it, and its config does not mark it writable", name, api.ErrNoControlPath, st.Name())
	}
	err := st.Write(ctx, name, value)
	switch {
	case errors.Is(err, opcua.ErrValue):
		return fmt.Errorf("%w: %w", api.ErrControlValue, err)
	case errors.Is(err, opcua.ErrNotConnected):
		return unavailableError{err}
	}
	return err
}

// unavailableError is a write that could not be tried because the device
// is not reachable now: the API answers 503, so the caller retries later.
type unavailableError struct{ error }

func (e unavailableError) Unwrap() error   { return e.error }
func (e unavailableError) HTTPStatus() int { return 503 }
