package modbus

import (
	"encoding/binary"
	"time"
)

// MaxRTUFrame is the largest RTU frame: unit, MaxPDU and the CRC.
const MaxRTUFrame = 1 + MaxPDU + 2

// rtuExceptionLen is the length of an RTU exception frame: unit, function,
// code and CRC.
const rtuExceptionLen = 5

// AppendRTURequest appends a whole RTU request frame (unit, PDU, CRC) to dst.
func AppendRTURequest(dst []byte, r *Request) []byte {
	start := len(dst)
	dst = append(dst, r.Unit)
	dst = AppendRequestPDU(dst, r)
	return binary.LittleEndian.AppendUint16(dst, CRC16(dst[start:]))
}

// AppendRTUFrame appends an RTU frame around an already encoded PDU.
func AppendRTUFrame(dst []byte, unit uint8, pdu []byte) []byte {
	start := len(dst)
	dst = append(dst, unit)
	dst = append(dst, pdu...)
	return binary.LittleEndian.AppendUint16(dst, CRC16(dst[start:]))
}

// ParseRTUFrame checks the CRC of one whole RTU frame and returns its unit
// and PDU, which aliases b.
func ParseRTUFrame(b []byte) (uint8, []byte, error) {
	if len(b) < 4 {
		return 0, nil, malformed("rtu frame of %d bytes", len(b))
	}
	n := len(b) - 2
	if got, want := binary.LittleEndian.Uint16(b[n:]), CRC16(b[:n]); got != want {
		return 0, nil, malformed("rtu crc 0x%04x, computed 0x%04x", got, want)
	}
	return b[0], b[1:n], nil
}

// RTUResponseLen returns the length of the normal RTU response frame to r.
// The RTU framing has no length field, so the client learns where a
// response ends from its request (or from the exception flag).
func RTUResponseLen(r *Request) int { return 1 + ResponsePDULen(r) + 2 }

// RTURequestLen returns the length of the RTU request frame starting at b,
// as a server sees it: 0 when more bytes are needed to tell, or -1 when the
// function code is unknown (the frame's end can then only be found by the
// inter-frame gap or by a CRC match).
func RTURequestLen(b []byte) int {
	if len(b) < 2 {
		return 0
	}
	switch Function(b[1]) {
	case FuncReadCoils, FuncReadDiscreteInputs, FuncReadHoldingRegisters, FuncReadInputRegisters,
		FuncWriteSingleCoil, FuncWriteSingleRegister:
		return 8
	case FuncWriteMultipleCoils, FuncWriteMultipleRegisters:
		if len(b) < 7 {
			return 0
		}
		return 9 + int(b[6])
	}
	return -1
}

// RTUFrameGap returns the silent interval of 3.5 characters that separates
// RTU frames at the given baud rate. A character is 11 bits (start, 8 data,
// parity or second stop, stop); above 19200 baud the specification fixes the
// gap at 1.75 ms.
func RTUFrameGap(baud int) time.Duration {
	if baud <= 0 || baud > 19200 {
		return 1750 * time.Microsecond
	}
	return time.Duration(int64(time.Second) * 35 * 11 / 10 / int64(baud))
}
