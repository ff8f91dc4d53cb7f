package sparkplug

import (
	"errors"
	"testing"

	"github.com/pith-historian/pith/internal/api"
)

// TestCommandMetric encodes control values in each type and reads them
// back, refusing what a type cannot hold.
func TestCommandMetric(t *testing.T) {
	for _, c := range []struct {
		dt DataType
		v  float64
		ok bool
	}{
		{TypeInt8, -128, true}, {TypeInt8, 128, false}, {TypeInt16, -300, true}, {TypeInt32, -7, true},
		{TypeInt32, 1.5, false}, {TypeUInt8, 255, true}, {TypeUInt8, -1, false}, {TypeUInt16, 65535, true},
		{TypeUInt32, 4e9, true}, {TypeUInt32, 5e9, false}, {TypeInt64, -1e15, true}, {TypeUInt64, 1e15, true},
		{TypeUInt64, -1, false}, {TypeBoolean, 1, true}, {TypeBoolean, 2, false}, {TypeFloat, 0.25, true},
		{TypeFloat, 1e40, false}, {TypeDouble, -1.5e300, true}, {TypeDateTime, 1700000000000, true},
		{TypeUnknown, 3.25, true},
	} {
		m, err := commandMetric("x", c.dt, c.v)
		if !c.ok {
			if !errors.Is(err, api.ErrControlValue) {
				t.Errorf("%s %v: %v, want a refusal", c.dt, c.v, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %v: %v", c.dt, c.v, err)
			continue
		}
		var p Payload
		if err := Decode(Append(nil, &Payload{Metrics: []Metric{m}}), &p); err != nil {
			t.Fatal(err)
		}
		if got, why := p.Metrics[0].Float(TypeUnknown); why != "" || got != c.v {
			t.Errorf("%s %v: reads back %v %q", c.dt, c.v, got, why)
		}
	}
}
