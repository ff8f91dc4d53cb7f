// Package modbus is Pith's own Modbus implementation: pure framing functions
// (MBAP for TCP, RTU with CRC-16 for serial lines and RTU-over-TCP), a client
// that polls devices, a read planner that merges wanted items into as few
// requests as the protocol allows, value codecs for the usual word and byte
// orders, and a server (slave) that publishes a register bank over TCP or an
// RTU byte stream.
//
// Layers, from the wire up:
//
//   - pdu.go: function codes, the Request type, PDU encoders and decoders and
//     the typed ExceptionError.
//   - frame_tcp.go, frame_rtu.go, crc.go: the two framings around a PDU.
//   - client*.go: Dial, the connection life cycle (timeouts, reconnect with
//     back-off) and the request methods.
//   - plan.go: read planning; value.go: value decoding and encoding.
//   - server*.go, bank.go: the server and its register bank.
//
// The wire formats are drawn in docs/format/modbus.md.
//
// Concurrency: a Client owns one connection (one TCP socket or one serial
// line). Several stations with different unit ids may share it; their
// requests are serialized by the Client, one outstanding request at a time,
// because neither RTU nor most TCP devices handle pipelined requests.
package modbus
