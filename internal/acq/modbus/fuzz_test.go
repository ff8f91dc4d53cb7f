package modbus

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"
)

// fakeLink replays bytes to a client and records what it writes; once the
// bytes run out, reads hit the deadline.
type fakeLink struct {
	in  []byte
	out bytes.Buffer
}

func (f *fakeLink) Read(p []byte) (int, error) {
	if len(f.in) == 0 {
		return 0, os.ErrDeadlineExceeded
	}
	n := copy(p, f.in)
	f.in = f.in[n:]
	return n, nil
}
func (f *fakeLink) Write(p []byte) (int, error)   { return f.out.Write(p) }
func (f *fakeLink) Close() error                  { return nil }
func (f *fakeLink) SetDeadline(_ time.Time) error { return nil }

// fuzzRequests are the requests a fuzzed response is checked against.
var fuzzRequests = []Request{
	{Unit: 1, Function: FuncReadHoldingRegisters, Address: 0, Quantity: 2},
	{Unit: 1, Function: FuncReadCoils, Address: 0, Quantity: 10},
	{Unit: 1, Function: FuncWriteSingleRegister, Address: 1, Quantity: 1, Data: []byte{0, 3}},
	{Unit: 1, Function: FuncWriteMultipleRegisters, Address: 1, Quantity: 2, Data: []byte{0, 1, 0, 2}},
}

// goldenResponsePDUs answer fuzzRequests one to one.
var goldenResponsePDUs = [][]byte{
	{3, 4, 0x12, 0x34, 0x56, 0x78},
	{1, 2, 0xCD, 0x01},
	{6, 0, 1, 0, 3},
	{16, 0, 1, 0, 2},
}

func fuzzClient(t *testing.T, scheme string, in []byte) (*Client, *fakeLink) {
	c, err := NewClient(scheme+"://fuzz:1", DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	l := &fakeLink{in: in}
	c.link = l
	return c, l
}

// checkResponse runs the client's decoder on in and checks that a success
// carries a payload of the size the request implies.
func checkResponse(t *testing.T, scheme string, sel byte, in []byte) {
	req := fuzzRequests[int(sel)%len(fuzzRequests)]
	c, _ := fuzzClient(t, scheme, in)
	got, err := c.Do(context.Background(), &req, nil)
	if err != nil {
		var ex *ExceptionError
		if !errors.As(err, &ex) && !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrMalformed) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		return
	}
	// A read's payload follows the function and byte count; a write's
	// echo follows the function code.
	want := ResponsePDULen(&req) - 1
	if req.Function <= FuncReadInputRegisters {
		want--
	}
	if len(got) != want {
		t.Fatalf("payload of %d bytes for %+v", len(got), req)
	}
}

func FuzzClientTCPResponse(f *testing.F) {
	for i, pdu := range goldenResponsePDUs {
		f.Add(byte(i), AppendTCPFrame(nil, 1, 1, pdu))
		f.Add(byte(i), append(AppendTCPFrame(nil, 0, 1, pdu), AppendTCPFrame(nil, 1, 1, pdu)...))
	}
	f.Add(byte(0), AppendTCPFrame(nil, 1, 1, []byte{0x83, 2}))
	f.Fuzz(func(t *testing.T, sel byte, in []byte) { checkResponse(t, "tcp", sel, in) })
}

func FuzzClientRTUResponse(f *testing.F) {
	for i, pdu := range goldenResponsePDUs {
		frame := AppendRTUFrame(nil, 1, pdu)
		f.Add(byte(i), frame)
		echo := AppendRTURequest(nil, &fuzzRequests[i])
		f.Add(byte(i), append(append([]byte{0xFF, 0x00}, echo...), frame...))
	}
	f.Add(byte(0), AppendRTUFrame(nil, 1, []byte{0x83, 2}))
	f.Fuzz(func(t *testing.T, sel byte, in []byte) { checkResponse(t, "rtuovertcp", sel, in) })
}

// FuzzServerTCPRequest feeds frames to the server's request decoder: every
// parsed request re-encodes to the same bytes and every answer is a
// well-formed frame.
func FuzzServerTCPRequest(f *testing.F) {
	for _, g := range goldenFrames {
		f.Add(unhex(f, g.tcp))
	}
	f.Add(AppendTCPFrame(nil, 9, 7, []byte{0x2B, 0x0E, 0x01, 0x00}))
	s := NewServer(ServerOptions{HoldingRegisters: 300, Coils: 300})
	f.Fuzz(func(t *testing.T, in []byte) {
		h, pdu, err := ParseTCPFrame(in)
		if err != nil {
			return
		}
		if req, err := ParseRequestPDU(pdu); err == nil {
			req.Unit = h.Unit
			if again := AppendTCPRequest(nil, h.Transaction, &req); !bytes.Equal(again, in) {
				t.Fatalf("re-encoded % x, want % x", again, in)
			}
		}
		out := s.appendTCPAnswer(nil, h, pdu)
		if _, _, err := ParseTCPFrame(out); err != nil {
			t.Fatalf("answer % x: %v", out, err)
		}
	})
}

// rtuStream is a ReadWriter over fixed input for ServeRTU; it keeps each
// Write as one frame, as a serial line's silence would delimit it.
type rtuStream struct {
	fakeLink
	frames [][]byte
}

func (r *rtuStream) Write(p []byte) (int, error) {
	r.frames = append(r.frames, bytes.Clone(p))
	return len(p), nil
}

func (r *rtuStream) Read(p []byte) (int, error) {
	// Hand out a few bytes at a time to exercise partial frames.
	if len(r.in) == 0 {
		return 0, errors.New("end of input")
	}
	n := copy(p[:min(len(p), 5)], r.in)
	r.in = r.in[n:]
	return n, nil
}

// FuzzServerRTURequest feeds a byte stream to the RTU server: it must
// never panic and everything it writes must be valid RTU frames.
func FuzzServerRTURequest(f *testing.F) {
	for _, g := range goldenFrames {
		f.Add(unhex(f, g.rtu))
	}
	f.Add(append([]byte{0x00, 0x55}, unhex(f, goldenFrames[0].rtu)...))
	f.Add(AppendRTUFrame(nil, 1, []byte{0x2B, 0x0E, 0x01, 0x00}))
	s := NewServer(ServerOptions{HoldingRegisters: 300, Coils: 300})
	f.Fuzz(func(t *testing.T, in []byte) {
		rw := &rtuStream{fakeLink: fakeLink{in: in}}
		_ = s.ServeRTU(context.Background(), rw)
		// Each answer is one Write; splitting the concatenated output at
		// the first valid CRC would be wrong, since a frame's prefix can
		// carry a valid CRC by chance (1 in 65536 per length).
		for _, fr := range rw.frames {
			if len(fr) < 4 || CRC16(fr[:len(fr)-2]) != binary.LittleEndian.Uint16(fr[len(fr)-2:]) {
				t.Fatalf("server wrote a frame without a valid CRC: % x", fr)
			}
		}
	})
}

// TestFuzzSeedsPass keeps the fuzz seeds meaningful: each golden response
// decodes successfully through the client.
func TestFuzzSeedsPass(t *testing.T) {
	for i, pdu := range goldenResponsePDUs {
		req := fuzzRequests[i]
		for _, scheme := range []string{"tcp", "rtuovertcp"} {
			in := AppendTCPFrame(nil, 1, 1, pdu)
			if scheme != "tcp" {
				// Noise and our own echo before the answer.
				in = append(append([]byte{0xFF, 0x00}, AppendRTURequest(nil, &req)...), AppendRTUFrame(nil, 1, pdu)...)
			}
			c, l := fuzzClient(t, scheme, in)
			got, err := c.Do(context.Background(), &req, nil)
			if err != nil || !bytes.Equal(got, pdu[len(pdu)-len(got):]) {
				t.Errorf("%s %d: %x, %v", scheme, i, got, err)
			}
			if l.out.Len() == 0 {
				t.Errorf("%s %d: nothing written", scheme, i)
			}
		}
	}
}
