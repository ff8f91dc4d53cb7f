package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/acq/modbus"
)

// The Modbus data area, value type and byte order of tags and registers are
// the modbus package's own Area, Type and Order: the configuration names
// them with the words their String methods return, so a parsed entry reaches
// the station and the server as is.

// areas, types and orders list the valid values in the order the error
// messages name them.
var (
	areas  = [...]modbus.Area{modbus.HoldingRegisters, modbus.InputRegisters, modbus.Coils, modbus.DiscreteInputs}
	types  = [...]modbus.Type{modbus.Int16, modbus.Uint16, modbus.Int32, modbus.Uint32, modbus.Int64, modbus.Uint64, modbus.Float32, modbus.Float64, modbus.Bool}
	orders = [...]modbus.Order{modbus.ABCD, modbus.CDAB, modbus.BADC, modbus.DCBA}
)

// lookupName returns the value in vals whose name is exactly s.
func lookupName[T fmt.Stringer](vals []T, s string) (T, bool) {
	for _, v := range vals {
		if v.String() == s {
			return v, true
		}
	}
	var zero T
	return zero, false
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
func ParseRegister(s string) (modbus.Area, uint16, error) {
	area, addr, err := parseRegister(s)
	if err != nil {
		return 0, 0, fmt.Errorf("parse register %q: %w", s, err)
	}
	return area, addr, nil
}

// parseRegister is ParseRegister with errors that do not repeat the input,
// for messages that already name the key.
func parseRegister(s string) (modbus.Area, uint16, error) {
	name, addr, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("want AREA:ADDRESS such as \"holding:0\", got %q", s)
	}
	area, ok := lookupName(areas[:], name)
	if !ok {
		return 0, 0, fmt.Errorf("unknown area %q (want holding, input, coil or discrete)", name)
	}
	n, err := strconv.ParseUint(addr, 10, 16)
	if err != nil {
		return 0, 0, fmt.Errorf("address %q is not a decimal number 0..65535", addr)
	}
	return area, uint16(n), nil
}

// parseType parses a type name.
func parseType(s string) (modbus.Type, error) {
	if t, ok := lookupName(types[:], s); ok {
		return t, nil
	}
	return 0, fmt.Errorf("unknown type %q (want int16, uint16, int32, uint32, int64, uint64, float32, float64 or bool)", s)
}

// parseOrder parses a byte order name.
func parseOrder(s string) (modbus.Order, error) {
	if o, ok := lookupName(orders[:], s); ok {
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
