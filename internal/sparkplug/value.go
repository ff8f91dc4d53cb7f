package sparkplug

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"math"
)

// Reasons a metric's value is not archived; each is counted apart
// (HostStats.Skipped) and logged once per metric.
const (
	SkipText     = "text"      // String, Text and UUID: Pith's tags hold numbers
	SkipType     = "type"      // DataSet, Bytes, File, Template, property sets, arrays
	SkipNonFin   = "nonfinite" // NaN or an infinity
	SkipNoValue  = "novalue"   // neither a value nor is_null
	SkipUnknown  = "unknown"   // an alias or name the birth did not declare
	numSkipKinds = 5
)

// skipIndex numbers the reasons for the counters.
func skipIndex(reason string) int {
	switch reason {
	case SkipText:
		return 0
	case SkipType:
		return 1
	case SkipNonFin:
		return 2
	case SkipNoValue:
		return 3
	}
	return 4
}

// Float returns the metric's value as a number, or the reason it has
// none Pith can archive. dt is the type declared by the birth (the
// metric's own Datatype when it carries one wins). Integers are read with
// their type's width and sign, as encoders put signed types in the
// unsigned fields in two's complement, some with 32 and some with the
// type's own width; a 64-bit integer beyond 2^53 loses precision.
func (m *Metric) Float(dt DataType) (float64, string) {
	if m.Datatype != TypeUnknown {
		dt = m.Datatype
	}
	switch m.Kind {
	case KindInt, KindLong:
		switch dt {
		case TypeInt8:
			return float64(int8(m.Bits)), ""
		case TypeInt16:
			return float64(int16(m.Bits)), ""
		case TypeInt32:
			return float64(int32(m.Bits)), ""
		case TypeInt64:
			return float64(int64(m.Bits)), ""
		case TypeUInt8:
			return float64(uint8(m.Bits)), ""
		case TypeUInt16:
			return float64(uint16(m.Bits)), ""
		case TypeUInt32:
			return float64(uint32(m.Bits)), ""
		}
		return float64(m.Bits), ""
	case KindFloat:
		return finite(float64(math.Float32frombits(uint32(m.Bits))))
	case KindDouble:
		return finite(math.Float64frombits(m.Bits))
	case KindBool:
		return float64(m.Bits & 1), ""
	case KindString:
		return 0, SkipText
	case KindNone:
		return 0, SkipNoValue
	}
	return 0, SkipType
}

func finite(v float64) (float64, string) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, SkipNonFin
	}
	return v, ""
}

// Numeric reports whether Pith archives metrics of type dt.
func Numeric(dt DataType) bool {
	return (dt >= TypeInt8 && dt <= TypeBoolean) || dt == TypeDateTime
}

// compressedUUID marks a payload whose body holds another, compressed,
// payload (the Sparkplug B convention Eclipse Tahu follows).
const compressedUUID = "SPBV1.0_COMPRESSED"

// MaxInflated bounds a decompressed payload, against a compression bomb.
const MaxInflated = 64 << 20

// Inflate returns the payload inside a compressed one, and whether p was
// compressed. The algorithm is the metric "algorithm": DEFLATE (zlib
// framing, the default) or GZIP.
func Inflate(p *Payload) ([]byte, bool, error) {
	if string(p.UUID) != compressedUUID {
		return nil, false, nil
	}
	algo := "DEFLATE"
	for i := range p.Metrics {
		if string(p.Metrics[i].Name) == "algorithm" && p.Metrics[i].Kind == KindString {
			algo = string(p.Metrics[i].Raw)
		}
	}
	var r io.Reader
	var err error
	switch algo {
	case "DEFLATE", "deflate":
		r, err = zlib.NewReader(bytes.NewReader(p.Body))
	case "GZIP", "gzip":
		r, err = gzip.NewReader(bytes.NewReader(p.Body))
	default:
		return nil, true, payloadErr("unknown compression algorithm %q", algo)
	}
	if err != nil {
		return nil, true, payloadErr("inflate %s body: %v", algo, err)
	}
	out, err := io.ReadAll(io.LimitReader(r, MaxInflated+1))
	if err != nil {
		return nil, true, payloadErr("inflate %s body: %v", algo, err)
	}
	if len(out) > MaxInflated {
		return nil, true, payloadErr("inflated body over %d bytes", MaxInflated)
	}
	return out, true, nil
}

// DecodeMessage decodes a payload as received, inflating a compressed one.
func DecodeMessage(b []byte, p *Payload) error {
	if err := Decode(b, p); err != nil {
		return err
	}
	inner, ok, err := Inflate(p)
	if err != nil || !ok {
		return err
	}
	if err := Decode(inner, p); err != nil {
		return fmt.Errorf("compressed payload: %w", err)
	}
	if string(p.UUID) == compressedUUID {
		return errors.Join(ErrPayload, errors.New("compressed payload inside a compressed payload"))
	}
	return nil
}
