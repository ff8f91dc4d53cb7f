package config

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/acq/modbus"
)

// TestModbusNames checks that the words the file accepts for types and
// orders parse to the modbus values of that name, exactly as written.
func TestModbusNames(t *testing.T) {
	for _, tt := range []struct {
		in   string
		got  func(string) (fmt.Stringer, error)
		want fmt.Stringer
	}{
		{"int16", asStringer(parseType), modbus.Int16},
		{"uint16", asStringer(parseType), modbus.Uint16},
		{"int32", asStringer(parseType), modbus.Int32},
		{"uint32", asStringer(parseType), modbus.Uint32},
		{"int64", asStringer(parseType), modbus.Int64},
		{"uint64", asStringer(parseType), modbus.Uint64},
		{"float32", asStringer(parseType), modbus.Float32},
		{"float64", asStringer(parseType), modbus.Float64},
		{"bool", asStringer(parseType), modbus.Bool},
		{"Float32", asStringer(parseType), nil},
		{"", asStringer(parseType), nil},
		{"ABCD", asStringer(parseOrder), modbus.ABCD},
		{"CDAB", asStringer(parseOrder), modbus.CDAB},
		{"BADC", asStringer(parseOrder), modbus.BADC},
		{"DCBA", asStringer(parseOrder), modbus.DCBA},
		{"cdab", asStringer(parseOrder), nil},
	} {
		got, err := tt.got(tt.in)
		switch {
		case tt.want == nil && err == nil:
			t.Errorf("parse %q = %v, want an error", tt.in, got)
		case tt.want != nil && (err != nil || got != tt.want):
			t.Errorf("parse %q = %v, %v, want %v", tt.in, got, err, tt.want)
		}
	}
}

func asStringer[T fmt.Stringer](f func(string) (T, error)) func(string) (fmt.Stringer, error) {
	return func(s string) (fmt.Stringer, error) { return f(s) }
}

func TestExpandedTags(t *testing.T) {
	tests := []struct {
		spec  ModbusTagSpec
		names []string
		addrs []uint16
	}{
		{ModbusTagSpec{Name: "a.r{i}", Register: "holding:10", Type: "uint16", Count: 3}, []string{"a.r0", "a.r1", "a.r2"}, []uint16{10, 11, 12}},
		{ModbusTagSpec{Name: "a.f{i}", Register: "input:0", Type: "float32", Count: 3}, []string{"a.f0", "a.f1", "a.f2"}, []uint16{0, 2, 4}},
		{ModbusTagSpec{Name: "a.d{i}.v", Register: "holding:100", Type: "float64", Count: 2}, []string{"a.d0.v", "a.d1.v"}, []uint16{100, 104}},
		{ModbusTagSpec{Name: "a.u{i}", Register: "holding:0", Type: "uint64", Count: 2}, []string{"a.u0", "a.u1"}, []uint16{0, 4}},
		{ModbusTagSpec{Name: "a.b{i}", Register: "discrete:7", Type: "bool", Count: 3}, []string{"a.b0", "a.b1", "a.b2"}, []uint16{7, 8, 9}},
		{ModbusTagSpec{Name: "a.one{i}", Register: "coil:65535", Type: "bool", Count: 1}, []string{"a.one0"}, []uint16{65535}},
		{ModbusTagSpec{Name: "a.last", Register: "holding:65534", Type: "int32", Count: 1}, []string{"a.last"}, []uint16{65534}},
		{ModbusTagSpec{Name: "a.{i}.{i}", Register: "holding:0", Type: "int16", Count: 2}, []string{"a.0.0", "a.1.1"}, []uint16{0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.spec.Name+"/"+tt.spec.Type, func(t *testing.T) {
			spec := tt.spec
			spec.Order, spec.Scale, spec.Archive = "ABCD", 1, "change"
			c := ModbusClient{Tags: []ModbusTagSpec{spec}}
			tags, err := c.ExpandedTags()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			var addrs []uint16
			for i, tag := range tags {
				names = append(names, tag.Name)
				addrs = append(addrs, tag.Address)
				if tag.Entry != 0 || tag.Index != i {
					t.Errorf("tag %d Entry, Index = %d, %d", i, tag.Entry, tag.Index)
				}
			}
			if !slices.Equal(names, tt.names) || !slices.Equal(addrs, tt.addrs) {
				t.Errorf("names %v addrs %v, want %v %v", names, addrs, tt.names, tt.addrs)
			}
		})
	}
}

func TestExpandedTagsFields(t *testing.T) {
	c := ModbusClient{Tags: []ModbusTagSpec{
		DefaultModbusTagSpec(),
		{Name: "p.level", Register: "input:3", Type: "int16", Order: "BADC", Count: 1, Scale: 0.01, Offset: -5,
			Unit: "m", Description: "Level", Archive: "deadband", Deadband: 0.5},
	}}
	c.Tags[0].Name, c.Tags[0].Register, c.Tags[0].Type = "p.run", "coil:1", "bool"
	tags, err := c.ExpandedTags()
	if err != nil {
		t.Fatal(err)
	}
	want := []ModbusTag{
		{Name: "p.run", Area: modbus.Coils, Address: 1, Type: modbus.Bool, Order: modbus.ABCD, Scale: 1, Archive: ArchiveChange},
		{Name: "p.level", Area: modbus.InputRegisters, Address: 3, Type: modbus.Int16, Order: modbus.BADC, Scale: 0.01, Offset: -5,
			Unit: "m", Description: "Level", Archive: ArchiveDeadband, Deadband: 0.5, Entry: 1},
	}
	if !slices.Equal(tags, want) {
		t.Errorf("ExpandedTags =\n%+v\nwant\n%+v", tags, want)
	}
}

func TestExpandedTagsErrorsAreRelative(t *testing.T) {
	c := ModbusClient{Tags: []ModbusTagSpec{DefaultModbusTagSpec()}}
	c.Tags[0].Name, c.Tags[0].Register, c.Tags[0].Type = "x", "holding:0", "real"
	_, err := c.ExpandedTags()
	if err == nil || !strings.HasPrefix(err.Error(), "tags[0].type: unknown type") {
		t.Errorf("ExpandedTags error = %v", err)
	}
}

func TestExpandedRegisters(t *testing.T) {
	s := ModbusServer{Registers: []ModbusRegisterSpec{
		{Register: "holding:500", Tag: "plant.sp", Type: "float32", Order: "CDAB", Count: 1, Scale: 1, Writable: true},
		{Register: "coil:0", Tag: "plant.b{i}", Type: "bool", Order: "ABCD", Count: 2, Scale: 1},
		{Register: "holding:0", Tag: "plc1.r{i}", Type: "uint16", Order: "ABCD", Count: 2, Scale: 10, Offset: 1},
	}}
	regs, err := s.ExpandedRegisters()
	if err != nil {
		t.Fatal(err)
	}
	want := []ModbusRegister{
		{Tag: "plc1.r0", Area: modbus.HoldingRegisters, Address: 0, Type: modbus.Uint16, Order: modbus.ABCD, Scale: 10, Offset: 1, Entry: 2},
		{Tag: "plc1.r1", Area: modbus.HoldingRegisters, Address: 1, Type: modbus.Uint16, Order: modbus.ABCD, Scale: 10, Offset: 1, Entry: 2, Index: 1},
		{Tag: "plant.sp", Area: modbus.HoldingRegisters, Address: 500, Type: modbus.Float32, Order: modbus.CDAB, Scale: 1, Writable: true},
		{Tag: "plant.b0", Area: modbus.Coils, Address: 0, Type: modbus.Bool, Order: modbus.ABCD, Scale: 1, Entry: 1},
		{Tag: "plant.b1", Area: modbus.Coils, Address: 1, Type: modbus.Bool, Order: modbus.ABCD, Scale: 1, Entry: 1, Index: 1},
	}
	if !slices.Equal(regs, want) {
		t.Errorf("ExpandedRegisters =\n%+v\nwant\n%+v", regs, want)
	}
}

func TestExpandedRegistersSameAddressOtherArea(t *testing.T) {
	s := ModbusServer{Registers: []ModbusRegisterSpec{DefaultModbusRegisterSpec(), DefaultModbusRegisterSpec()}}
	s.Registers[0].Register, s.Registers[0].Tag, s.Registers[0].Type = "holding:0", "a", "float64"
	s.Registers[1].Register, s.Registers[1].Tag, s.Registers[1].Type = "input:1", "b", "int16"
	if _, err := s.ExpandedRegisters(); err != nil {
		t.Errorf("ExpandedRegisters = %v, want areas kept apart", err)
	}
}

func TestParseRegister(t *testing.T) {
	tests := []struct {
		in   string
		area modbus.Area
		addr uint16
		ok   bool
	}{
		{"holding:0", modbus.HoldingRegisters, 0, true},
		{"input:65535", modbus.InputRegisters, 65535, true},
		{"coil:5", modbus.Coils, 5, true},
		{"discrete:17", modbus.DiscreteInputs, 17, true},
		{"discrete:-1", 0, 0, false},
		{"holding:0x10", 0, 0, false},
		{"Holding:1", 0, 0, false},
		{":1", 0, 0, false},
		{"holding:", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		area, addr, err := ParseRegister(tt.in)
		if (err == nil) != tt.ok || area != tt.area || addr != tt.addr {
			t.Errorf("ParseRegister(%q) = %v, %d, %v", tt.in, area, addr, err)
		}
	}
}

func TestParseModbusURL(t *testing.T) {
	tests := []struct {
		in      string
		want    Endpoint
		wantErr string
	}{
		{in: "tcp://127.0.0.1:5020", want: Endpoint{Scheme: "tcp", Address: "127.0.0.1:5020"}},
		{in: "tcp://plc.local", want: Endpoint{Scheme: "tcp", Address: "plc.local:502"}},
		{in: "tcp://[::1]:1502/", want: Endpoint{Scheme: "tcp", Address: "[::1]:1502"}},
		{in: "rtuovertcp://10.0.0.5:4001", want: Endpoint{Scheme: "rtuovertcp", Address: "10.0.0.5:4001"}},
		{in: "rtu:///dev/ttyUSB0?baud=9600&parity=N&stop=1", want: Endpoint{Scheme: "rtu", Device: "/dev/ttyUSB0", Baud: 9600, Parity: 'N', StopBits: 1, DataBits: 8}},
		{in: "rtu:///dev/ttyAMA0", want: Endpoint{Scheme: "rtu", Device: "/dev/ttyAMA0", Baud: 19200, Parity: 'E', StopBits: 1, DataBits: 8}},
		{in: "rtu:///dev/ttyS1?parity=o&stop=2&data=7&baud=115200", want: Endpoint{Scheme: "rtu", Device: "/dev/ttyS1", Baud: 115200, Parity: 'O', StopBits: 2, DataBits: 7}},
		{in: "", wantErr: "empty"},
		{in: "127.0.0.1:502", wantErr: "scheme"},
		{in: "http://h:80", wantErr: "unknown scheme"},
		{in: "tcp://:502", wantErr: "needs a host"},
		{in: "tcp://h:", wantErr: "port is empty"},
		{in: "tcp://h:0", wantErr: "1..65535"},
		{in: "tcp://h:502/x", wantErr: "no path"},
		{in: "tcp://h:502?x=1", wantErr: "no query"},
		{in: "tcp://u@h:502", wantErr: "user"},
		{in: "rtu://ttyUSB0", wantErr: "absolute device path"},
		{in: "rtu:///", wantErr: "absolute device path"},
		{in: "rtu:///dev/ttyS0?baud=fast", wantErr: "baud"},
		{in: "rtu:///dev/ttyS0?stop=3", wantErr: "stop bits"},
		{in: "rtu:///dev/ttyS0?data=9", wantErr: "data bits"},
		{in: "rtu:///dev/ttyS0?bits=8", wantErr: "unknown query parameter"},
		{in: "rtu:///dev/ttyS0?baud=9600&baud=19200", wantErr: "2 times"},
	}
	for _, tt := range tests {
		got, err := ParseModbusURL(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseModbusURL(%q) = %+v, %v, want error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseModbusURL(%q) = %+v, %v, want %+v", tt.in, got, err, tt.want)
		}
	}
}

func TestEnumStrings(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{ArchiveDeadband.String(), "deadband"}, {Archive(0).String(), "Archive(0)"},
	} {
		if tt.got != tt.want {
			t.Errorf("String() = %q, want %q", tt.got, tt.want)
		}
	}
}
