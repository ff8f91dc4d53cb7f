package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Area is a Modbus data area. The zero value is not a valid area.
type Area uint8

// The four Modbus data areas.
const (
	AreaHolding  Area = iota + 1 // holding registers (read/write, 16 bits)
	AreaInput                    // input registers (read-only, 16 bits)
	AreaCoil                     // coils (read/write, 1 bit)
	AreaDiscrete                 // discrete inputs (read-only, 1 bit)
)

var areaNames = [...]string{AreaHolding: "holding", AreaInput: "input", AreaCoil: "coil", AreaDiscrete: "discrete"}

// String returns the area's name as written in the file.
func (a Area) String() string {
	if a == 0 || int(a) >= len(areaNames) {
		return "Area(" + strconv.Itoa(int(a)) + ")"
	}
	return areaNames[a]
}

// IsBit reports whether the area holds bits (coils, discrete inputs) rather
// than 16-bit registers.
func (a Area) IsBit() bool { return a == AreaCoil || a == AreaDiscrete }

// Writable reports whether Modbus lets a client write the area.
func (a Area) Writable() bool { return a == AreaHolding || a == AreaCoil }

// Type is the type of a Modbus value. The zero value is not a valid type.
type Type uint8

// The value types.
const (
	TypeInt16 Type = iota + 1
	TypeUint16
	TypeInt32
	TypeUint32
	TypeInt64
	TypeUint64
	TypeFloat32
	TypeFloat64
	TypeBool
)

var typeNames = [...]string{
	TypeInt16: "int16", TypeUint16: "uint16", TypeInt32: "int32", TypeUint32: "uint32",
	TypeInt64: "int64", TypeUint64: "uint64", TypeFloat32: "float32", TypeFloat64: "float64",
	TypeBool: "bool",
}

// String returns the type's name as written in the file.
func (t Type) String() string {
	if t == 0 || int(t) >= len(typeNames) {
		return "Type(" + strconv.Itoa(int(t)) + ")"
	}
	return typeNames[t]
}

// WidthRegisters returns how many consecutive addresses one value of type t
// takes: 16-bit registers for the numeric types (1, 2 or 4), one bit for
// bool. It returns 0 for an invalid type.
func WidthRegisters(t Type) int {
	switch t {
	case TypeInt16, TypeUint16, TypeBool:
		return 1
	case TypeInt32, TypeUint32, TypeFloat32:
		return 2
	case TypeInt64, TypeUint64, TypeFloat64:
		return 4
	}
	return 0
}

// Order is the byte order of a value spread over registers, naming the
// bytes of a 32-bit value from most (A) to least (D) significant in the order
// they arrive. For 64-bit values each pattern extends naturally: ABCD is
// ABCDEFGH (big-endian), CDAB is GHEFCDAB (registers reversed), BADC is
// BADCFEHG (bytes swapped in each register), DCBA is HGFEDCBA
// (little-endian). For 16-bit values ABCD and CDAB are big-endian, BADC and
// DCBA byte-swapped. The zero value is not a valid order.
type Order uint8

// The byte orders.
const (
	OrderABCD Order = iota + 1 // big-endian, the Modbus convention
	OrderCDAB                  // registers swapped
	OrderBADC                  // bytes swapped within each register
	OrderDCBA                  // little-endian
)

var orderNames = [...]string{OrderABCD: "ABCD", OrderCDAB: "CDAB", OrderBADC: "BADC", OrderDCBA: "DCBA"}

// String returns the order's name as written in the file.
func (o Order) String() string {
	if o == 0 || int(o) >= len(orderNames) {
		return "Order(" + strconv.Itoa(int(o)) + ")"
	}
	return orderNames[o]
}

// Archive says which values of a tag are archived. The zero value is not a
// valid policy.
type Archive uint8

// The archive policies.
const (
	ArchiveAll      Archive = iota + 1 // every value read
	ArchiveChange                      // a value different from the last archived one
	ArchiveDeadband                    // a value differing by at least the deadband
)

var archiveNames = [...]string{ArchiveAll: "all", ArchiveChange: "change", ArchiveDeadband: "deadband"}

// String returns the policy's name as written in the file.
func (a Archive) String() string {
	if a == 0 || int(a) >= len(archiveNames) {
		return "Archive(" + strconv.Itoa(int(a)) + ")"
	}
	return archiveNames[a]
}

// lookup returns the index of s in names, or 0.
func lookup(names []string, s string) int {
	for i, n := range names {
		if i > 0 && n == s {
			return i
		}
	}
	return 0
}

// ParseRegister parses "AREA:ADDRESS", AREA one of holding, input, coil,
// discrete and ADDRESS the zero-based PDU address 0..65535 in decimal.
func ParseRegister(s string) (Area, uint16, error) {
	area, addr, err := parseRegister(s)
	if err != nil {
		return 0, 0, fmt.Errorf("parse register %q: %w", s, err)
	}
	return area, addr, nil
}

// parseRegister is ParseRegister with errors that do not repeat the input,
// for messages that already name the key.
func parseRegister(s string) (Area, uint16, error) {
	name, addr, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("want AREA:ADDRESS such as \"holding:0\", got %q", s)
	}
	area := Area(lookup(areaNames[:], name))
	if area == 0 {
		return 0, 0, fmt.Errorf("unknown area %q (want holding, input, coil or discrete)", name)
	}
	n, err := strconv.ParseUint(addr, 10, 16)
	if err != nil {
		return 0, 0, fmt.Errorf("address %q is not a decimal number 0..65535", addr)
	}
	return area, uint16(n), nil
}

// parseType parses a type name.
func parseType(s string) (Type, error) {
	if t := Type(lookup(typeNames[:], s)); t != 0 {
		return t, nil
	}
	return 0, fmt.Errorf("unknown type %q (want int16, uint16, int32, uint32, int64, uint64, float32, float64 or bool)", s)
}

// parseOrder parses a byte order name.
func parseOrder(s string) (Order, error) {
	if o := Order(lookup(orderNames[:], s)); o != 0 {
		return o, nil
	}
	return 0, fmt.Errorf("unknown order %q (want ABCD, CDAB, BADC or DCBA)", s)
}

// parseArchive parses an archive policy name.
func parseArchive(s string) (Archive, error) {
	if a := Archive(lookup(archiveNames[:], s)); a != 0 {
		return a, nil
	}
	return 0, fmt.Errorf("unknown archive policy %q (want all, change or deadband)", s)
}
