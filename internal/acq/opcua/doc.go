// Package opcua is Pith's OPC UA client acquisition: a station per server
// endpoint holds one session, with one subscription for its monitored tags
// and a cyclic read for the others, and writes what arrives into the tag
// table with the values' source timestamps and the quality their status
// codes map to. Control writes go to the server through the same session.
//
// The protocol (secure channel, encoding, services) is
// github.com/gopcua/opcua's, but the station runs the subscription itself:
// it creates the subscription and monitored items, keeps one publish
// request outstanding with its acknowledgements, and after a broken link
// activates the same session on a new secure channel and republishes the
// notification messages from the last sequence number it applied. The
// library's own reconnection is off, since in v0.8.0 its session restore
// closes the session it restores. A session the server no longer knows
// (a restart) is replaced by a new session and subscription.
//
// Unlike Modbus stations, which the acq.Scheduler polls, an OPC UA station
// is pushed to, so it runs its own goroutines; it keeps the same
// statistics tags (pith.station.<name>.*) plus notifications_per_s and
// queue_overflows.
package opcua
