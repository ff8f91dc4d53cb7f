package modbus

import (
	"encoding/hex"
	"math"
	"testing"
)

// TestValueGolden checks every type in every order against wire bytes
// worked out by hand from the big-endian encoding (Python's struct module
// for the floats).
func TestValueGolden(t *testing.T) {
	tests := []struct {
		typ   Type
		value float64
		wire  [4]string // ABCD, CDAB, BADC, DCBA
	}{
		{Uint16, 0x1234, [4]string{"1234", "1234", "3412", "3412"}},
		{Int16, -2, [4]string{"fffe", "fffe", "feff", "feff"}},
		{Uint32, 0x12345678, [4]string{"12345678", "56781234", "34127856", "78563412"}},
		{Int32, -123456789, [4]string{"f8a432eb", "32ebf8a4", "a4f8eb32", "eb32a4f8"}},
		{Float32, float64(float32(123.456)), [4]string{"42f6e979", "e97942f6", "f64279e9", "79e9f642"}},
		{Uint64, 0x0001020304050607, [4]string{"0001020304050607", "0607040502030001", "0100030205040706", "0706050403020100"}},
		{Int64, -2, [4]string{"fffffffffffffffe", "fffeffffffffffff", "fffffffffffffeff", "feffffffffffffff"}},
		{Float64, -1234.5678, [4]string{"c0934a456d5cfaad", "faad6d5c4a45c093", "93c0454a5c6dadfa", "adfa5c6d454a93c0"}},
		{Bool, 1, [4]string{"0001", "0001", "0100", "0100"}},
	}
	for _, tt := range tests {
		for o := ABCD; o <= DCBA; o++ {
			name := tt.typ.String() + "/" + o.String()
			wire, _ := hex.DecodeString(tt.wire[o])
			got, err := DecodeFloat64(wire, tt.typ, o)
			if err != nil || got != tt.value {
				t.Errorf("%s: decode = %v, %v; want %v", name, got, err, tt.value)
			}
			enc, err := AppendEncoded(nil, tt.value, tt.typ, o)
			if err != nil || hex.EncodeToString(enc) != tt.wire[o] {
				t.Errorf("%s: encode = %x, %v; want %s", name, enc, err, tt.wire[o])
			}
			if int(tt.typ.Registers())*2 != len(wire) {
				t.Errorf("%s: Registers() = %d for %d bytes", name, tt.typ.Registers(), len(wire))
			}
		}
	}
}

func TestEncodeRange(t *testing.T) {
	bad := []struct {
		typ Type
		v   float64
	}{
		{Uint16, -1}, {Uint16, 65536}, {Int16, 32768}, {Int16, -32769},
		{Uint32, -1}, {Uint32, 1 << 32}, {Int32, 1 << 31}, {Uint64, -1},
		{Uint64, 1 << 64}, {Int64, 1 << 63}, {Int16, math.NaN()},
	}
	for _, tt := range bad {
		if _, err := AppendEncoded(nil, tt.v, tt.typ, ABCD); err == nil {
			t.Errorf("AppendEncoded(%v, %s) accepted an out of range value", tt.v, tt.typ)
		}
	}
	if b, err := AppendEncoded(nil, 2.6, Uint16, ABCD); err != nil || hex.EncodeToString(b) != "0003" {
		t.Errorf("rounding: %x, %v", b, err)
	}
	if _, err := DecodeFloat64([]byte{1, 2}, Float32, ABCD); err == nil {
		t.Error("short input decoded")
	}
}
