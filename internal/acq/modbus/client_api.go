package modbus

import (
	"context"
	"encoding/binary"
)

// ReadRegisters reads qty registers of a register area and appends their
// bytes (big-endian, as on the wire) to dst; decode them with
// DecodeFloat64. It does not allocate when dst has room.
func (c *Client) ReadRegisters(ctx context.Context, unit uint8, area Area, addr, qty uint16, dst []byte) ([]byte, error) {
	req := Request{Unit: unit, Function: area.ReadFunction(), Address: addr, Quantity: qty}
	return c.Do(ctx, &req, dst)
}

// ReadBlock reads one block of a Plan and appends its payload to dst.
func (c *Client) ReadBlock(ctx context.Context, unit uint8, b Block, dst []byte) ([]byte, error) {
	req := b.Request(unit)
	return c.Do(ctx, &req, dst)
}

// ReadHoldingRegisters reads qty holding registers (FC 3).
func (c *Client) ReadHoldingRegisters(ctx context.Context, unit uint8, addr, qty uint16) ([]uint16, error) {
	return c.readWords(ctx, unit, HoldingRegisters, addr, qty)
}

// ReadInputRegisters reads qty input registers (FC 4).
func (c *Client) ReadInputRegisters(ctx context.Context, unit uint8, addr, qty uint16) ([]uint16, error) {
	return c.readWords(ctx, unit, InputRegisters, addr, qty)
}

func (c *Client) readWords(ctx context.Context, unit uint8, area Area, addr, qty uint16) ([]uint16, error) {
	raw, err := c.ReadRegisters(ctx, unit, area, addr, qty, make([]byte, 0, 2*int(qty)))
	if err != nil {
		return nil, err
	}
	out := make([]uint16, len(raw)/2)
	for i := range out {
		out[i] = binary.BigEndian.Uint16(raw[2*i:])
	}
	return out, nil
}

// ReadCoils reads qty coils (FC 1).
func (c *Client) ReadCoils(ctx context.Context, unit uint8, addr, qty uint16) ([]bool, error) {
	return c.readBools(ctx, unit, Coils, addr, qty)
}

// ReadDiscreteInputs reads qty discrete inputs (FC 2).
func (c *Client) ReadDiscreteInputs(ctx context.Context, unit uint8, addr, qty uint16) ([]bool, error) {
	return c.readBools(ctx, unit, DiscreteInputs, addr, qty)
}

func (c *Client) readBools(ctx context.Context, unit uint8, area Area, addr, qty uint16) ([]bool, error) {
	req := Request{Unit: unit, Function: area.ReadFunction(), Address: addr, Quantity: qty}
	raw, err := c.Do(ctx, &req, nil)
	if err != nil {
		return nil, err
	}
	return UnpackBits(raw, int(qty)), nil
}

// WriteSingleCoil writes one coil (FC 5).
func (c *Client) WriteSingleCoil(ctx context.Context, unit uint8, addr uint16, v bool) error {
	data := []byte{0, 0}
	if v {
		data[0] = 0xFF
	}
	req := Request{Unit: unit, Function: FuncWriteSingleCoil, Address: addr, Quantity: 1, Data: data}
	_, err := c.Do(ctx, &req, nil)
	return err
}

// WriteSingleRegister writes one holding register (FC 6).
func (c *Client) WriteSingleRegister(ctx context.Context, unit uint8, addr, v uint16) error {
	req := Request{Unit: unit, Function: FuncWriteSingleRegister, Address: addr, Quantity: 1,
		Data: binary.BigEndian.AppendUint16(nil, v)}
	_, err := c.Do(ctx, &req, nil)
	return err
}

// WriteMultipleCoils writes consecutive coils (FC 15).
func (c *Client) WriteMultipleCoils(ctx context.Context, unit uint8, addr uint16, vs []bool) error {
	req := Request{Unit: unit, Function: FuncWriteMultipleCoils, Address: addr,
		Quantity: uint16(len(vs)), Data: PackBits(nil, vs)}
	_, err := c.Do(ctx, &req, nil)
	return err
}

// WriteMultipleRegisters writes consecutive holding registers (FC 16).
func (c *Client) WriteMultipleRegisters(ctx context.Context, unit uint8, addr uint16, vs []uint16) error {
	data := make([]byte, 0, 2*len(vs))
	for _, v := range vs {
		data = binary.BigEndian.AppendUint16(data, v)
	}
	return c.WriteRegisterBytes(ctx, unit, addr, data)
}

// WriteRegisterBytes writes register bytes, such as AppendEncoded's output,
// with FC 16 (FC 6 would not do: many devices refuse to update half of a
// 32-bit value).
func (c *Client) WriteRegisterBytes(ctx context.Context, unit uint8, addr uint16, raw []byte) error {
	req := Request{Unit: unit, Function: FuncWriteMultipleRegisters, Address: addr,
		Quantity: uint16(len(raw) / 2), Data: raw}
	if len(raw)%2 != 0 {
		req.Quantity = 0 // Validate refuses it with a clear message.
	}
	_, err := c.Do(ctx, &req, nil)
	return err
}

// PackBits appends bits packed least significant bit first, as Modbus
// carries coils.
func PackBits(dst []byte, bits []bool) []byte {
	for i := 0; i < len(bits); i += 8 {
		var b byte
		for j := 0; j < 8 && i+j < len(bits); j++ {
			if bits[i+j] {
				b |= 1 << j
			}
		}
		dst = append(dst, b)
	}
	return dst
}

// UnpackBits returns the first n bits of packed.
func UnpackBits(packed []byte, n int) []bool {
	n = min(n, 8*len(packed))
	out := make([]bool, n)
	for i := range out {
		out[i] = packed[i/8]&(1<<(i%8)) != 0
	}
	return out
}
