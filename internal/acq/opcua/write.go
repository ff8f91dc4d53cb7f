package opcua

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/gopcua/opcua/ua"
)

// Errors of Write, wrapped with details.
var (
	// ErrNotWritable: the tag is not this station's or not writable.
	ErrNotWritable = errors.New("not a writable tag of the station")
	// ErrValue: the value does not fit the tag's type.
	ErrValue = errors.New("value does not fit the variable")
	// ErrNotConnected: the station has no session now.
	ErrNotConnected = errors.New("no OPC UA session")
)

// StatusError is a write the server answered with a status other than
// Good.
type StatusError struct {
	Status ua.StatusCode
}

func (e *StatusError) Error() string { return "server answered " + StatusName(e.Status) }

// Writable reports whether name is a writable tag of the station.
func (s *Station) Writable(name string) bool {
	i, ok := s.byTag[name]
	return ok && s.tags[i].Writable
}

// Write writes value to the variable behind tag name, converted back to
// the raw value ((value - offset) / scale) in the tag's type; an array
// element is written with its index range. It returns once the server
// answered: nil for a Good status, a *StatusError with the server's status
// otherwise.
func (s *Station) Write(ctx context.Context, name string, value float64) error {
	i, ok := s.byTag[name]
	if !ok || !s.tags[i].Writable {
		return fmt.Errorf("write %q: %w", name, ErrNotWritable)
	}
	t := s.tags[i]
	raw := (value - t.Offset) / t.Scale
	var v *ua.Variant
	var err error
	wv := &ua.WriteValue{AttributeID: ua.AttributeIDValue}
	if wv.NodeID, err = ua.ParseNodeID(t.Node); err != nil {
		return fmt.Errorf("write %q: %w", name, err)
	}
	if t.Element >= 0 {
		v, err = EncodeElement(raw, t.Type)
		wv.IndexRange = strconv.Itoa(t.Element)
	} else {
		v, err = Encode(raw, t.Type)
	}
	if err != nil {
		return fmt.Errorf("write %q: %w: %w", name, ErrValue, err)
	}
	wv.Value = &ua.DataValue{EncodingMask: ua.DataValueValue, Value: v}
	c := s.client.Load()
	if c == nil {
		return fmt.Errorf("write %q to station %q: %w", name, s.cfg.Name, ErrNotConnected)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout.Std())
	defer cancel()
	res, err := c.Write(cctx, &ua.WriteRequest{NodesToWrite: []*ua.WriteValue{wv}})
	if err != nil {
		return fmt.Errorf("write %q to station %q: %w", name, s.cfg.Name, err)
	}
	if len(res.Results) != 1 {
		return fmt.Errorf("write %q to station %q: %d results", name, s.cfg.Name, len(res.Results))
	}
	if st := res.Results[0]; st != ua.StatusOK {
		return fmt.Errorf("write %q to station %q: %w", name, s.cfg.Name, &StatusError{Status: st})
	}
	return nil
}

// TagNames returns the names of the station's tags.
func (s *Station) TagNames() []string {
	out := make([]string, len(s.tags))
	for i, t := range s.tags {
		out[i] = t.Name
	}
	return out
}

// statusNone marks a tag that has had no value yet. It is not a status a
// server sends (its reserved bits are set).
const statusNone = 0xFFFFFFFF

// Status returns the raw OPC UA status of the last value of tag name, as
// StatusName spells it ("Good (0x00000000)", "BadServerNotConnected
// (0x808A0000)" after a connection loss); ok is false for a tag that is
// not the station's or has had no value yet.
func (s *Station) Status(name string) (string, bool) {
	i, ok := s.byTag[name]
	if !ok {
		return "", false
	}
	st := s.status[i].Load()
	if st == statusNone {
		return "", false
	}
	return StatusName(ua.StatusCode(st)), true
}
