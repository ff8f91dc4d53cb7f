package modbus

import "encoding/binary"

// MBAPHeaderLen is the length of the Modbus TCP (MBAP) header: transaction
// id, protocol id, length and unit id.
const MBAPHeaderLen = 7

// MaxTCPFrame is the largest Modbus TCP frame: header plus MaxPDU.
const MaxTCPFrame = MBAPHeaderLen + MaxPDU

// MBAPHeader is the decoded header of a Modbus TCP frame.
type MBAPHeader struct {
	Transaction uint16
	Protocol    uint16 // always 0 for Modbus
	Length      uint16 // bytes following the length field: unit id plus PDU
	Unit        uint8
}

// AppendTCPRequest appends a whole Modbus TCP request frame to dst.
func AppendTCPRequest(dst []byte, txid uint16, r *Request) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint16(dst, txid)
	dst = append(dst, 0, 0, 0, 0, r.Unit)
	dst = AppendRequestPDU(dst, r)
	binary.BigEndian.PutUint16(dst[start+4:], uint16(len(dst)-start-6))
	return dst
}

// AppendTCPFrame appends a Modbus TCP frame around an already encoded PDU.
func AppendTCPFrame(dst []byte, txid uint16, unit uint8, pdu []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, txid)
	dst = append(dst, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(pdu)+1))
	dst = append(dst, unit)
	return append(dst, pdu...)
}

// TCPFrameLen reads the header at the start of b and returns the length of
// the whole frame, or 0 when b holds fewer than MBAPHeaderLen bytes. A
// header that cannot start a valid frame returns an ErrMalformed error.
func TCPFrameLen(b []byte) (int, error) {
	if len(b) < MBAPHeaderLen {
		return 0, nil
	}
	if p := binary.BigEndian.Uint16(b[2:]); p != 0 {
		return 0, malformed("protocol id %d", p)
	}
	n := int(binary.BigEndian.Uint16(b[4:]))
	if n < 2 || n > MaxPDU+1 {
		return 0, malformed("mbap length %d", n)
	}
	return 6 + n, nil
}

// ParseTCPFrame decodes one whole Modbus TCP frame (request or response).
// The PDU aliases b.
func ParseTCPFrame(b []byte) (MBAPHeader, []byte, error) {
	var h MBAPHeader
	n, err := TCPFrameLen(b)
	if err != nil {
		return h, nil, err
	}
	if n == 0 || len(b) != n {
		return h, nil, malformed("tcp frame of %d bytes, header says %d", len(b), n)
	}
	h.Transaction = binary.BigEndian.Uint16(b)
	h.Protocol = binary.BigEndian.Uint16(b[2:])
	h.Length = binary.BigEndian.Uint16(b[4:])
	h.Unit = b[6]
	return h, b[MBAPHeaderLen:], nil
}
