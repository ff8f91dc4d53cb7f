package modbus

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// Bank holds a server's four data tables. Its methods are safe for
// concurrent use: the tag table sets values while clients read them. A read
// or write request sees one consistent snapshot of the registers it spans,
// so a 32-bit value is never torn between two updates.
type Bank struct {
	mu       sync.RWMutex // guards the four tables
	holding  []uint16
	input    []uint16
	coils    []bool
	discrete []bool
}

// NewBank returns a bank with the given table sizes (addresses 0..size-1).
func NewBank(holding, input, coils, discrete int) *Bank {
	clamp := func(n int) int { return max(0, min(n, 0x10000)) }
	return &Bank{
		holding:  make([]uint16, clamp(holding)),
		input:    make([]uint16, clamp(input)),
		coils:    make([]bool, clamp(coils)),
		discrete: make([]bool, clamp(discrete)),
	}
}

func (b *Bank) words(a Area) []uint16 {
	if a == InputRegisters {
		return b.input
	}
	return b.holding
}

func (b *Bank) bits(a Area) []bool {
	if a == DiscreteInputs {
		return b.discrete
	}
	return b.coils
}

func checkRange(a Area, addr uint16, n, size int) error {
	if int(addr)+n > size {
		return fmt.Errorf("access %s %d..%d: table has %d entries", a, addr, int(addr)+n-1, size)
	}
	return nil
}

// SetRegisters sets consecutive registers of a register area.
func (b *Bank) SetRegisters(a Area, addr uint16, vals ...uint16) error {
	if a.IsBit() {
		return fmt.Errorf("set registers: %s is a bit area", a)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.words(a)
	if err := checkRange(a, addr, len(vals), len(t)); err != nil {
		return err
	}
	copy(t[addr:], vals)
	return nil
}

// SetRegisterBytes sets registers from big-endian bytes such as
// AppendEncoded's output.
func (b *Bank) SetRegisterBytes(a Area, addr uint16, raw []byte) error {
	if a.IsBit() || len(raw)%2 != 0 {
		return fmt.Errorf("set register bytes: %d bytes into %s", len(raw), a)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.words(a)
	if err := checkRange(a, addr, len(raw)/2, len(t)); err != nil {
		return err
	}
	for i := 0; i < len(raw); i += 2 {
		t[int(addr)+i/2] = binary.BigEndian.Uint16(raw[i:])
	}
	return nil
}

// Registers returns n registers of a register area.
func (b *Bank) Registers(a Area, addr uint16, n int) ([]uint16, error) {
	if a.IsBit() {
		return nil, fmt.Errorf("get registers: %s is a bit area", a)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	t := b.words(a)
	if err := checkRange(a, addr, n, len(t)); err != nil {
		return nil, err
	}
	return append([]uint16(nil), t[addr:int(addr)+n]...), nil
}

// SetBits sets consecutive coils or discrete inputs.
func (b *Bank) SetBits(a Area, addr uint16, vals ...bool) error {
	if !a.IsBit() {
		return fmt.Errorf("set bits: %s is a register area", a)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.bits(a)
	if err := checkRange(a, addr, len(vals), len(t)); err != nil {
		return err
	}
	copy(t[addr:], vals)
	return nil
}

// Bits returns n coils or discrete inputs.
func (b *Bank) Bits(a Area, addr uint16, n int) ([]bool, error) {
	if !a.IsBit() {
		return nil, fmt.Errorf("get bits: %s is a register area", a)
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	t := b.bits(a)
	if err := checkRange(a, addr, n, len(t)); err != nil {
		return nil, err
	}
	return append([]bool(nil), t[addr:int(addr)+n]...), nil
}

// appendRead appends a read response's byte count and payload for a
// validated read request, or returns false when the range is outside the
// table.
func (b *Bank) appendRead(dst []byte, r *Request) ([]byte, bool) {
	a := areaOf(r.Function)
	b.mu.RLock()
	defer b.mu.RUnlock()
	if a.IsBit() {
		t := b.bits(a)
		if int(r.Address)+int(r.Quantity) > len(t) {
			return dst, false
		}
		dst = append(dst, byte(bitBytes(r.Quantity)))
		return PackBits(dst, t[r.Address:int(r.Address)+int(r.Quantity)]), true
	}
	t := b.words(a)
	if int(r.Address)+int(r.Quantity) > len(t) {
		return dst, false
	}
	dst = append(dst, byte(2*r.Quantity))
	for _, v := range t[r.Address : int(r.Address)+int(r.Quantity)] {
		dst = append(dst, byte(v>>8), byte(v))
	}
	return dst, true
}

// inRange reports whether a validated request's range fits its table.
func (b *Bank) inRange(r *Request) bool {
	a := areaOf(r.Function)
	n := len(b.holding) // the tables never change size, so no lock is needed
	if a.IsBit() {
		n = len(b.coils)
	}
	return int(r.Address)+int(r.Quantity) <= n
}

// applyWrite stores a validated, in-range write request.
func (b *Bank) applyWrite(r *Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch r.Function {
	case FuncWriteSingleCoil:
		b.coils[r.Address] = r.Data[0] == 0xFF
	case FuncWriteSingleRegister:
		b.holding[r.Address] = binary.BigEndian.Uint16(r.Data)
	case FuncWriteMultipleCoils:
		for i := range int(r.Quantity) {
			b.coils[int(r.Address)+i] = r.Data[i/8]&(1<<(i%8)) != 0
		}
	case FuncWriteMultipleRegisters:
		for i := range int(r.Quantity) {
			b.holding[int(r.Address)+i] = binary.BigEndian.Uint16(r.Data[2*i:])
		}
	}
}

// areaOf returns the table a function code reads or writes.
func areaOf(fn Function) Area {
	switch fn {
	case FuncReadCoils, FuncWriteSingleCoil, FuncWriteMultipleCoils:
		return Coils
	case FuncReadDiscreteInputs:
		return DiscreteInputs
	case FuncReadInputRegisters:
		return InputRegisters
	}
	return HoldingRegisters
}
