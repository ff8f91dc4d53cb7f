package opcua

import (
	"fmt"
	"math"
	"reflect"

	"github.com/gopcua/opcua/ua"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
)

// Status code bits (OPC UA Part 4, 7.34.1): the severity is the top two
// bits; with InfoType DataValue, bit 7 says the server's queue of the
// monitored item overflowed and dropped values before this one.
const (
	severityMask     = 0xC0000000
	severityGood     = 0x00000000
	severityUncertn  = 0x40000000
	infoTypeMask     = 0x00000C00
	infoTypeValue    = 0x00000400
	overflowBit      = 0x00000080
	maxExactInteger  = 1 << 53 // beyond it an integer is not exact as float64
	maxArrayElements = 1 << 16 // an element index past it is refused
)

// Quality maps an OPC UA status code to Pith's quality by its severity:
// Good, Uncertain, and Bad for the rest (both Bad severities).
func Quality(s ua.StatusCode) model.Quality {
	switch uint32(s) & severityMask {
	case severityGood:
		return model.QualityGood
	case severityUncertn:
		return model.QualityUncertain
	}
	return model.QualityBad
}

// Overflowed reports whether a monitored item's value carries the
// overflow bit: the server's queue was full and dropped older values.
func Overflowed(s ua.StatusCode) bool {
	return uint32(s)&infoTypeMask == infoTypeValue && uint32(s)&overflowBit != 0
}

// StatusName returns a status code's symbolic name and number, such as
// "BadTypeMismatch (0x80740000)".
func StatusName(s ua.StatusCode) string {
	name := fmt.Sprintf("0x%08X", uint32(s))
	if s == ua.StatusOK {
		return "Good (" + name + ")"
	}
	if d, ok := ua.StatusCodes[s]; ok {
		return d.Name[len("Status"):] + " (" + name + ")"
	}
	if d, ok := ua.StatusCodes[s&0xFFFF0000]; ok && s&0xFFFF != 0 {
		return d.Name[len("Status"):] + " (" + name + ")"
	}
	return name
}

// Float returns the number a variant holds: a scalar when element is
// negative, element element of a one-dimensional array otherwise.
// Booleans are 0 and 1, integers and floats convert to float64. ok is false
// for an empty variant, a non-numeric type, a scalar where an array is
// expected (or the reverse), an index past the array's end, and a value
// that is not finite. It never panics, whatever the variant holds: its
// input comes from the network.
func Float(v *ua.Variant, element int) (float64, bool) {
	if v == nil {
		return 0, false
	}
	val := v.Value()
	if val == nil {
		return 0, false
	}
	if element >= 0 {
		rv := reflect.ValueOf(val)
		if rv.Kind() != reflect.Slice || element >= rv.Len() || element >= maxArrayElements {
			return 0, false
		}
		val = rv.Index(element).Interface()
	}
	f, ok := scalar(val)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// Text returns the string a variant holds: a scalar when element is
// negative, element element of a one-dimensional array otherwise, as a
// text value Pith can store (model.FitText: line breaks made spaces, cut
// to model.MaxTextLen bytes, invalid UTF-8 replaced); cut reports that
// the stored text is no longer the server's. ok is false for an empty
// variant, another type than String, and an index past the array's end.
// It never panics.
func Text(v *ua.Variant, element int) (text string, cut, ok bool) {
	if v == nil {
		return "", false, false
	}
	var s string
	switch x := v.Value().(type) {
	case string:
		if element >= 0 {
			return "", false, false
		}
		s = x
	case []string:
		if element < 0 || element >= len(x) {
			return "", false, false
		}
		s = x[element]
	default:
		return "", false, false
	}
	text, cut = model.FitText(s)
	return text, cut, true
}

// scalar converts one numeric value.
func scalar(val any) (float64, bool) {
	switch x := val.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case int8:
		return float64(x), true
	case uint8:
		return float64(x), true
	case int16:
		return float64(x), true
	case uint16:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint32:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// Encode returns the variant a control write sends: raw in the tag's type.
// Integers are rounded to the nearest; a value the type cannot hold is
// refused, never clipped, since a clipped setpoint is a different command.
// Booleans take 0 or 1.
func Encode(raw float64, typ config.OPCUAType) (*ua.Variant, error) {
	if math.IsNaN(raw) || math.IsInf(raw, 0) {
		return nil, fmt.Errorf("encode %s: %v is not finite", typ, raw)
	}
	r := math.Round(raw)
	inRange := func(lo, hi float64) error {
		if r < lo || r > hi {
			return fmt.Errorf("encode %s: %v out of range %v..%v", typ, raw, lo, hi)
		}
		return nil
	}
	var v any
	var err error
	switch typ {
	case config.OPCUABoolean:
		if raw != 0 && raw != 1 {
			return nil, fmt.Errorf("encode Boolean: takes 0 or 1, not %v", raw)
		}
		v = raw == 1
	case config.OPCUASByte:
		err, v = inRange(math.MinInt8, math.MaxInt8), int8(r)
	case config.OPCUAByte:
		err, v = inRange(0, math.MaxUint8), uint8(r)
	case config.OPCUAInt16:
		err, v = inRange(math.MinInt16, math.MaxInt16), int16(r)
	case config.OPCUAUInt16:
		err, v = inRange(0, math.MaxUint16), uint16(r)
	case config.OPCUAInt32:
		err, v = inRange(math.MinInt32, math.MaxInt32), int32(r)
	case config.OPCUAUInt32:
		err, v = inRange(0, math.MaxUint32), uint32(r)
	case config.OPCUAInt64:
		err, v = inRange(-maxExactInteger, maxExactInteger), int64(r)
	case config.OPCUAUInt64:
		err, v = inRange(0, maxExactInteger), uint64(max(r, 0))
	case config.OPCUAFloat:
		if math.Abs(raw) > math.MaxFloat32 {
			return nil, fmt.Errorf("encode Float: %v out of range", raw)
		}
		v = float32(raw)
	case config.OPCUADouble:
		v = raw
	default:
		return nil, fmt.Errorf("encode: unknown type %v", typ)
	}
	if err != nil {
		return nil, err
	}
	return ua.NewVariant(v)
}

// EncodeElement is Encode for one element of an array variable: a
// one-element array, written with the index range of the element.
func EncodeElement(raw float64, typ config.OPCUAType) (*ua.Variant, error) {
	one, err := Encode(raw, typ)
	if err != nil {
		return nil, err
	}
	rv := reflect.ValueOf(one.Value())
	arr := reflect.MakeSlice(reflect.SliceOf(rv.Type()), 1, 1)
	arr.Index(0).Set(rv)
	return ua.NewVariant(arr.Interface())
}
