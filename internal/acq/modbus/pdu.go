package modbus

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Function is a Modbus function code.
type Function uint8

// The function codes this package speaks.
const (
	FuncReadCoils              Function = 1
	FuncReadDiscreteInputs     Function = 2
	FuncReadHoldingRegisters   Function = 3
	FuncReadInputRegisters     Function = 4
	FuncWriteSingleCoil        Function = 5
	FuncWriteSingleRegister    Function = 6
	FuncWriteMultipleCoils     Function = 15
	FuncWriteMultipleRegisters Function = 16
)

// Protocol limits from the Modbus application protocol specification v1.1b3.
const (
	MaxReadRegisters  = 125  // registers per FC 3/4 request
	MaxReadBits       = 2000 // bits per FC 1/2 request
	MaxWriteRegisters = 123  // registers per FC 16 request
	MaxWriteBits      = 1968 // bits per FC 15 request
	MaxPDU            = 253  // bytes of function code plus data
)

// exceptionFlag is set in the function code of an exception response.
const exceptionFlag = 0x80

// Area is one of the four Modbus data tables.
type Area uint8

// The four data tables.
const (
	Coils Area = iota
	DiscreteInputs
	HoldingRegisters
	InputRegisters
)

// String returns the area's name as used in configuration.
func (a Area) String() string {
	switch a {
	case Coils:
		return "coil"
	case DiscreteInputs:
		return "discrete"
	case HoldingRegisters:
		return "holding"
	case InputRegisters:
		return "input"
	}
	return fmt.Sprintf("area(%d)", uint8(a))
}

// IsBit reports whether the area holds single bits rather than registers.
func (a Area) IsBit() bool { return a == Coils || a == DiscreteInputs }

// Writable reports whether Modbus lets a client write the area: coils and
// holding registers.
func (a Area) Writable() bool { return a == Coils || a == HoldingRegisters }

// ReadFunction returns the function code that reads the area.
func (a Area) ReadFunction() Function {
	switch a {
	case Coils:
		return FuncReadCoils
	case DiscreteInputs:
		return FuncReadDiscreteInputs
	case InputRegisters:
		return FuncReadInputRegisters
	}
	return FuncReadHoldingRegisters
}

// ExceptionCode is the code carried by an exception response.
type ExceptionCode uint8

// Exception codes from the specification.
const (
	ExIllegalFunction            ExceptionCode = 0x01
	ExIllegalDataAddress         ExceptionCode = 0x02
	ExIllegalDataValue           ExceptionCode = 0x03
	ExServerDeviceFailure        ExceptionCode = 0x04
	ExAcknowledge                ExceptionCode = 0x05
	ExServerDeviceBusy           ExceptionCode = 0x06
	ExMemoryParityError          ExceptionCode = 0x08
	ExGatewayPathUnavailable     ExceptionCode = 0x0A
	ExGatewayTargetFailedRespond ExceptionCode = 0x0B
)

// String returns the specification's name of the code.
func (c ExceptionCode) String() string {
	switch c {
	case ExIllegalFunction:
		return "illegal function"
	case ExIllegalDataAddress:
		return "illegal data address"
	case ExIllegalDataValue:
		return "illegal data value"
	case ExServerDeviceFailure:
		return "server device failure"
	case ExAcknowledge:
		return "acknowledge"
	case ExServerDeviceBusy:
		return "server device busy"
	case ExMemoryParityError:
		return "memory parity error"
	case ExGatewayPathUnavailable:
		return "gateway path unavailable"
	case ExGatewayTargetFailedRespond:
		return "gateway target device failed to respond"
	}
	return fmt.Sprintf("exception 0x%02x", uint8(c))
}

// ExceptionError is a device's exception response to a request. A server
// write hook may also return one to refuse a write with that code.
type ExceptionError struct {
	Function Function      // the request's function code, without the 0x80 flag
	Code     ExceptionCode // why the device refused
}

// Error implements error.
func (e *ExceptionError) Error() string {
	return fmt.Sprintf("modbus exception on function %d: %s", e.Function, e.Code)
}

// Is makes errors.Is match any *ExceptionError with the same code, so that
// callers can test errors.Is(err, &ExceptionError{Code: ExIllegalDataAddress}).
func (e *ExceptionError) Is(target error) bool {
	t, ok := target.(*ExceptionError)
	return ok && t.Code == e.Code && (t.Function == 0 || t.Function == e.Function)
}

// ErrMalformed is wrapped by every error about bytes that do not form a valid
// frame or PDU.
var ErrMalformed = errors.New("malformed modbus frame")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Request is one Modbus request. Data holds the write payload in wire order:
// for FC 5 the two bytes 0xFF00 or 0x0000, for FC 6 the register value, for
// FC 15 the packed coils (least significant bit first) and for FC 16 the
// registers big-endian. Reads leave Data nil.
type Request struct {
	Unit     uint8
	Function Function
	Address  uint16
	Quantity uint16 // registers or bits; 1 for single writes
	Data     []byte
}

// bitBytes returns how many bytes carry n packed bits.
func bitBytes(n uint16) int { return (int(n) + 7) / 8 }

// Validate checks the request against the protocol limits.
func (r *Request) Validate() error {
	q := r.Quantity
	switch r.Function {
	case FuncReadCoils, FuncReadDiscreteInputs:
		if q == 0 || q > MaxReadBits {
			return fmt.Errorf("check request: %d bits out of 1..%d", q, MaxReadBits)
		}
	case FuncReadHoldingRegisters, FuncReadInputRegisters:
		if q == 0 || q > MaxReadRegisters {
			return fmt.Errorf("check request: %d registers out of 1..%d", q, MaxReadRegisters)
		}
	case FuncWriteSingleCoil:
		if len(r.Data) != 2 || (r.Data[0] != 0xFF && r.Data[0] != 0) || r.Data[1] != 0 {
			return fmt.Errorf("check request: single coil value must be 0xFF00 or 0x0000")
		}
	case FuncWriteSingleRegister:
		if len(r.Data) != 2 {
			return fmt.Errorf("check request: single register needs 2 bytes, have %d", len(r.Data))
		}
	case FuncWriteMultipleCoils:
		if q == 0 || q > MaxWriteBits || len(r.Data) != bitBytes(q) {
			return fmt.Errorf("check request: %d coils with %d bytes", q, len(r.Data))
		}
	case FuncWriteMultipleRegisters:
		if q == 0 || q > MaxWriteRegisters || len(r.Data) != 2*int(q) {
			return fmt.Errorf("check request: %d registers with %d bytes", q, len(r.Data))
		}
	default:
		return fmt.Errorf("check request: unsupported function %d", r.Function)
	}
	if r.Function != FuncWriteSingleCoil && r.Function != FuncWriteSingleRegister &&
		int(r.Address)+int(q) > 0x10000 {
		return fmt.Errorf("check request: address %d + quantity %d beyond 65535", r.Address, q)
	}
	return nil
}

// AppendRequestPDU appends the request's PDU (function code and data) to dst.
// It does not validate; call Validate first for untrusted input.
func AppendRequestPDU(dst []byte, r *Request) []byte {
	dst = append(dst, byte(r.Function))
	dst = binary.BigEndian.AppendUint16(dst, r.Address)
	switch r.Function {
	case FuncWriteSingleCoil, FuncWriteSingleRegister:
		return append(dst, r.Data...)
	case FuncWriteMultipleCoils, FuncWriteMultipleRegisters:
		dst = binary.BigEndian.AppendUint16(dst, r.Quantity)
		dst = append(dst, byte(len(r.Data)))
		return append(dst, r.Data...)
	}
	return binary.BigEndian.AppendUint16(dst, r.Quantity)
}

// ParseRequestPDU decodes a request PDU as a server receives it. Data aliases
// pdu. An unknown function code returns an *ExceptionError with
// ExIllegalFunction and a bad quantity or length an *ExceptionError with
// ExIllegalDataValue, so that a server can answer with it directly; the unit
// is left zero for the caller to fill.
func ParseRequestPDU(pdu []byte) (Request, error) {
	var r Request
	if len(pdu) == 0 {
		return r, malformed("empty pdu")
	}
	r.Function = Function(pdu[0])
	// The exception is built only on the error path so that parsing a good
	// request does not allocate.
	bad := func() error { return &ExceptionError{Function: r.Function, Code: ExIllegalDataValue} }
	switch r.Function {
	case FuncReadCoils, FuncReadDiscreteInputs, FuncReadHoldingRegisters, FuncReadInputRegisters:
		if len(pdu) != 5 {
			return r, bad()
		}
		r.Address = binary.BigEndian.Uint16(pdu[1:])
		r.Quantity = binary.BigEndian.Uint16(pdu[3:])
	case FuncWriteSingleCoil, FuncWriteSingleRegister:
		if len(pdu) != 5 {
			return r, bad()
		}
		r.Address = binary.BigEndian.Uint16(pdu[1:])
		r.Quantity = 1
		r.Data = pdu[3:5]
	case FuncWriteMultipleCoils, FuncWriteMultipleRegisters:
		if len(pdu) < 6 || len(pdu) != 6+int(pdu[5]) {
			return r, bad()
		}
		r.Address = binary.BigEndian.Uint16(pdu[1:])
		r.Quantity = binary.BigEndian.Uint16(pdu[3:])
		r.Data = pdu[6:]
	default:
		return r, &ExceptionError{Function: r.Function, Code: ExIllegalFunction}
	}
	if err := r.Validate(); err != nil {
		return r, bad()
	}
	return r, nil
}

// ResponsePDULen returns the length of the normal response PDU to r.
func ResponsePDULen(r *Request) int {
	switch r.Function {
	case FuncReadCoils, FuncReadDiscreteInputs:
		return 2 + bitBytes(r.Quantity)
	case FuncReadHoldingRegisters, FuncReadInputRegisters:
		return 2 + 2*int(r.Quantity)
	}
	return 5
}

// ParseResponsePDU checks a response PDU against the request that caused it
// and returns its payload: the register bytes or packed bits of a read, or
// the echoed address and value/quantity of a write. The payload aliases pdu.
// An exception response returns an *ExceptionError.
func ParseResponsePDU(r *Request, pdu []byte) ([]byte, error) {
	if len(pdu) == 0 {
		return nil, malformed("empty pdu")
	}
	fn := Function(pdu[0])
	if fn == r.Function|exceptionFlag {
		if len(pdu) != 2 {
			return nil, malformed("exception pdu of %d bytes", len(pdu))
		}
		return nil, &ExceptionError{Function: r.Function, Code: ExceptionCode(pdu[1])}
	}
	if fn != r.Function {
		return nil, malformed("response function %d to request function %d", fn, r.Function)
	}
	if want := ResponsePDULen(r); len(pdu) != want {
		return nil, malformed("response pdu of %d bytes, want %d", len(pdu), want)
	}
	switch r.Function {
	case FuncReadCoils, FuncReadDiscreteInputs, FuncReadHoldingRegisters, FuncReadInputRegisters:
		if int(pdu[1]) != len(pdu)-2 {
			return nil, malformed("byte count %d in a %d byte pdu", pdu[1], len(pdu))
		}
		return pdu[2:], nil
	case FuncWriteSingleCoil, FuncWriteSingleRegister:
		if binary.BigEndian.Uint16(pdu[1:]) != r.Address || string(pdu[3:5]) != string(r.Data) {
			return nil, malformed("write echo does not match the request")
		}
	default:
		if binary.BigEndian.Uint16(pdu[1:]) != r.Address || binary.BigEndian.Uint16(pdu[3:]) != r.Quantity {
			return nil, malformed("write echo does not match the request")
		}
	}
	return pdu[1:], nil
}

// AppendExceptionPDU appends an exception response PDU.
func AppendExceptionPDU(dst []byte, fn Function, code ExceptionCode) []byte {
	return append(dst, byte(fn)|exceptionFlag, byte(code))
}
