package modbus

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCRC16Vectors(t *testing.T) {
	tests := []struct {
		in   string
		want uint16
	}{
		{"313233343536373839", 0x4B37}, // the CRC catalogue's check value for "123456789"
		{"01030000000a", 0xCDC5},       // sent as C5 CD
		{"010400000001", 0xCA31},       // sent as 31 CA
		{"1103006b0003", 0x8776},       // the specification's example, sent as 76 87
	}
	for _, tt := range tests {
		if got := CRC16(unhex(t, tt.in)); got != tt.want {
			t.Errorf("CRC16(%s) = %04x, want %04x", tt.in, got, tt.want)
		}
	}
}

// goldenFrames are requests with their wire bytes in both framings; the RTU
// CRCs come from the specification and were cross-checked with the
// computeCRC function of pymodbus, an independent implementation.
var goldenFrames = []struct {
	name string
	req  Request
	tcp  string // with transaction id 0x0001
	rtu  string
}{
	{"read holding", Request{Unit: 0x11, Function: FuncReadHoldingRegisters, Address: 0x006B, Quantity: 3},
		"0001 0000 0006 11 03006b0003", "11 03006b0003 7687"},
	{"read coils", Request{Unit: 1, Function: FuncReadCoils, Address: 0x13, Quantity: 0x25},
		"0001 0000 0006 01 0100130025", "01 0100130025 0c14"},
	{"read discrete", Request{Unit: 1, Function: FuncReadDiscreteInputs, Address: 0xC4, Quantity: 0x16},
		"0001 0000 0006 01 0200c40016", "01 0200c40016 b839"},
	{"read input", Request{Unit: 1, Function: FuncReadInputRegisters, Address: 0, Quantity: 1},
		"0001 0000 0006 01 0400000001", "01 0400000001 31ca"},
	{"write coil", Request{Unit: 1, Function: FuncWriteSingleCoil, Address: 0xAC, Quantity: 1, Data: []byte{0xFF, 0}},
		"0001 0000 0006 01 0500acff00", "01 0500acff00 4c1b"},
	{"write register", Request{Unit: 1, Function: FuncWriteSingleRegister, Address: 1, Quantity: 1, Data: []byte{0, 3}},
		"0001 0000 0006 01 0600010003", "01 0600010003 980b"},
	{"write coils", Request{Unit: 1, Function: FuncWriteMultipleCoils, Address: 0x13, Quantity: 10, Data: []byte{0xCD, 0x01}},
		"0001 0000 0009 01 0f0013000a02cd01", "01 0f0013000a02cd01 72cb"},
	{"write registers", Request{Unit: 1, Function: FuncWriteMultipleRegisters, Address: 1, Quantity: 2, Data: []byte{0, 0x0A, 1, 2}},
		"0001 0000 000b 01 100001000204000a0102", "01 100001000204000a0102 9230"},
}

func TestGoldenRequestFrames(t *testing.T) {
	for _, g := range goldenFrames {
		t.Run(g.name, func(t *testing.T) {
			if err := g.req.Validate(); err != nil {
				t.Fatal(err)
			}
			if got, want := AppendTCPRequest(nil, 1, &g.req), unhex(t, g.tcp); !bytes.Equal(got, want) {
				t.Errorf("tcp = % x, want % x", got, want)
			}
			if got, want := AppendRTURequest(nil, &g.req), unhex(t, g.rtu); !bytes.Equal(got, want) {
				t.Errorf("rtu = % x, want % x", got, want)
			}
			h, pdu, err := ParseTCPFrame(unhex(t, g.tcp))
			if err != nil || h.Transaction != 1 || h.Unit != g.req.Unit {
				t.Fatalf("ParseTCPFrame = %+v, %v", h, err)
			}
			got, err := ParseRequestPDU(pdu)
			got.Unit = h.Unit
			if err != nil || !sameRequest(got, g.req) {
				t.Errorf("ParseRequestPDU = %+v, %v; want %+v", got, err, g.req)
			}
			rtu := unhex(t, g.rtu)
			if n := RTURequestLen(rtu); n != len(rtu) {
				t.Errorf("RTURequestLen = %d, want %d", n, len(rtu))
			}
			unit, pdu, err := ParseRTUFrame(rtu)
			if err != nil || unit != g.req.Unit {
				t.Fatalf("ParseRTUFrame = %d, %v", unit, err)
			}
			if got, err := ParseRequestPDU(pdu); err != nil || got.Address != g.req.Address {
				t.Errorf("ParseRequestPDU(rtu) = %+v, %v", got, err)
			}
		})
	}
}

func sameRequest(a, b Request) bool {
	return a.Unit == b.Unit && a.Function == b.Function && a.Address == b.Address &&
		a.Quantity == b.Quantity && bytes.Equal(a.Data, b.Data)
}

func TestParseResponsePDU(t *testing.T) {
	read3 := &Request{Unit: 1, Function: FuncReadHoldingRegisters, Address: 0x6B, Quantity: 3}
	tests := []struct {
		name    string
		req     *Request
		pdu     string
		want    string
		wantErr error
	}{
		{"registers", read3, "0306022b00000064", "022b00000064", nil},
		{"exception", read3, "8302", "", &ExceptionError{Code: ExIllegalDataAddress}},
		{"short", read3, "030402", "", ErrMalformed},
		{"bad count", read3, "0305022b00000064", "", ErrMalformed},
		{"other function", read3, "0406022b00000064", "", ErrMalformed},
		{"coils", &Request{Function: FuncReadCoils, Address: 0x13, Quantity: 0x13}, "0103cd6b05", "cd6b05", nil},
		{"write echo", &Request{Function: FuncWriteSingleRegister, Address: 1, Quantity: 1, Data: []byte{0, 3}}, "0600010003", "00010003", nil},
		{"write bad echo", &Request{Function: FuncWriteSingleRegister, Address: 1, Quantity: 1, Data: []byte{0, 3}}, "0600010004", "", ErrMalformed},
		{"multi echo", &Request{Function: FuncWriteMultipleRegisters, Address: 1, Quantity: 2, Data: make([]byte, 4)}, "1000010002", "00010002", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseResponsePDU(tt.req, unhex(t, tt.pdu))
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || hex.EncodeToString(got) != tt.want {
				t.Errorf("got %x, %v; want %s", got, err, tt.want)
			}
		})
	}
}

func TestExceptionError(t *testing.T) {
	err := error(&ExceptionError{Function: FuncReadHoldingRegisters, Code: ExIllegalDataAddress})
	if got, want := err.Error(), "modbus exception on function 3: illegal data address"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, &ExceptionError{Code: ExIllegalDataAddress}) {
		t.Error("errors.Is by code failed")
	}
	if errors.Is(err, &ExceptionError{Code: ExIllegalFunction}) {
		t.Error("errors.Is matched another code")
	}
}

func TestParseRequestPDUExceptions(t *testing.T) {
	tests := []struct {
		pdu  string
		code ExceptionCode
	}{
		{"2b0e0100", ExIllegalFunction},
		{"0300000000", ExIllegalDataValue},     // zero quantity
		{"030000007e", ExIllegalDataValue},     // 126 registers
		{"01000007d1", ExIllegalDataValue},     // 2001 bits
		{"0500001234", ExIllegalDataValue},     // coil value not 0xFF00/0
		{"10000000010200", ExIllegalDataValue}, // byte count disagrees
		{"03fffe0003", ExIllegalDataValue},     // beyond 65535
	}
	for _, tt := range tests {
		_, err := ParseRequestPDU(unhex(t, tt.pdu))
		var ex *ExceptionError
		if !errors.As(err, &ex) || ex.Code != tt.code {
			t.Errorf("ParseRequestPDU(%s) = %v, want code %v", tt.pdu, err, tt.code)
		}
	}
}

func TestTCPFrameLen(t *testing.T) {
	if n, err := TCPFrameLen(unhex(t, "000100000006")); n != 0 || err != nil {
		t.Errorf("short header = %d, %v", n, err)
	}
	if _, err := TCPFrameLen(unhex(t, "00010001000601")); !errors.Is(err, ErrMalformed) {
		t.Errorf("protocol 1: %v", err)
	}
	if _, err := TCPFrameLen(unhex(t, "00010000010001")); !errors.Is(err, ErrMalformed) {
		t.Errorf("length 256: %v", err)
	}
}

func TestRTUFrameGap(t *testing.T) {
	if got, want := RTUFrameGap(9600), 4010416*1e-9; got.Seconds() < want-1e-6 || got.Seconds() > want+1e-6 {
		t.Errorf("gap at 9600 = %v, want ~4.01ms", got)
	}
	if got := RTUFrameGap(115200); got.Microseconds() != 1750 {
		t.Errorf("gap at 115200 = %v, want 1.75ms", got)
	}
}
