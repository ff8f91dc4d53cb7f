// Package opcua is Pith's OPC UA client acquisition: a station per server
// endpoint holds one session, with one subscription for its monitored tags
// and a cyclic read for the others, and writes what arrives into the tag
// table with the values' source timestamps and the quality their status
// codes map to. Control writes go to the server through the same session.
//
// The protocol is github.com/gopcua/opcua's; the client reconnects on its
// own and recovers the session and subscription (reactivate, transfer,
// republish the notifications the server still holds, or re-create). The
// station only replaces the client when that recovery gave up.
//
// Unlike Modbus stations, which the acq.Scheduler polls, an OPC UA station
// is pushed to, so it runs its own goroutines; it keeps the same
// statistics tags (pith.station.<name>.*) plus notifications_per_s and
// queue_overflows.
package opcua
