package modbus

import (
	"bytes"
	"os"
	"time"
)

// errDeadline is the error os.File reads return at their deadline.
var errDeadline = os.ErrDeadlineExceeded

// roundTripTCP writes one MBAP request and reads frames until the one with
// the request's transaction id arrives. Frames with another id (a gateway's
// late or duplicated answer to an earlier request, the most common field
// bug) are dropped, never mistaken for this answer. The caller holds the request lock and has set the deadline.
func (c *Client) roundTripTCP(req *Request) ([]byte, error) {
	c.txid++
	c.wbuf = AppendTCPRequest(c.wbuf[:0], c.txid, req)
	if err := c.writeAll(c.wbuf); err != nil {
		return nil, err
	}
	buf := c.rbuf
	start, end := 0, 0
	for {
		for {
			n, err := TCPFrameLen(buf[start:end])
			if err != nil {
				return nil, err
			}
			if n == 0 || end-start < n {
				break
			}
			h, pdu, err := ParseTCPFrame(buf[start : start+n])
			if err != nil {
				return nil, err
			}
			start += n
			if h.Transaction != c.txid {
				c.stats.stale.Add(1)
				continue
			}
			return ParseResponsePDU(req, pdu)
		}
		if start == end {
			start, end = 0, 0
		} else if len(buf)-end < MaxTCPFrame {
			end = copy(buf, buf[start:end])
			start = 0
		}
		n, err := c.link.Read(buf[end:])
		end += n
		if err != nil && n == 0 {
			return nil, ioErr("read response", err)
		}
	}
}

// roundTripRTU writes one RTU request after the inter-frame gap and reads
// until a frame from the addressed unit with a good CRC and the expected
// length arrives. Bytes before it (line noise, the echo of our own request
// on two-wire adapters, late answers) are skipped one at a time, which
// resynchronizes on the next plausible frame start. The caller holds the
// request lock and has set the deadline.
func (c *Client) roundTripRTU(req *Request) ([]byte, error) {
	if c.target.scheme == "rtu" {
		gap := RTUFrameGap(c.target.serial.Baud)
		if wait := gap - time.Since(c.lastIO); wait > 0 {
			time.Sleep(wait)
		}
		if f, ok := c.link.(inputFlusher); ok {
			_ = f.FlushInput()
		}
	}
	c.wbuf = AppendRTURequest(c.wbuf[:0], req)
	err := c.writeAll(c.wbuf)
	c.lastIO = time.Now()
	if err != nil {
		return nil, err
	}
	if req.Unit == 0 {
		// Broadcast writes get no answer.
		return nil, nil
	}
	want := RTUResponseLen(req)
	fn := byte(req.Function)
	// The response to a single write repeats the request byte for byte, so
	// an echo cannot be told from it and is accepted as the answer.
	echoCheck := req.Function != FuncWriteSingleCoil && req.Function != FuncWriteSingleRegister
	buf := c.rbuf
	start, end := 0, 0
	for {
		for end-start >= 2 {
			b := buf[start:end]
			if echoCheck && len(b) >= len(c.wbuf) && bytes.Equal(b[:len(c.wbuf)], c.wbuf) {
				start += len(c.wbuf)
				echoCheck = false
				continue
			}
			if b[0] != req.Unit || (b[1] != fn && b[1] != fn|exceptionFlag) {
				start++
				c.stats.garbage.Add(1)
				continue
			}
			need := want
			if b[1] == fn|exceptionFlag {
				need = rtuExceptionLen
			}
			if len(b) < need {
				break
			}
			_, pdu, err := ParseRTUFrame(b[:need])
			if err != nil {
				start++
				c.stats.garbage.Add(1)
				continue
			}
			c.lastIO = time.Now()
			return ParseResponsePDU(req, pdu)
		}
		if start == end {
			start, end = 0, 0
		} else if len(buf)-end < MaxRTUFrame {
			end = copy(buf, buf[start:end])
			start = 0
		}
		n, err := c.link.Read(buf[end:])
		end += n
		if err != nil && n == 0 {
			return nil, ioErr("read response", err)
		}
	}
}
