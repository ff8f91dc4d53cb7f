// Package sparkplug speaks MQTT Sparkplug B: a host application that
// archives what edge nodes publish (host.go), an edge node that publishes
// Pith's tags (edge.go), and the payload codec they share (payload.go,
// docs/format/sparkplug.md).
package sparkplug

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// DataType is a Sparkplug B metric's declared type.
type DataType uint32

// The data types of the Sparkplug B specification.
const (
	TypeUnknown         DataType = 0
	TypeInt8            DataType = 1
	TypeInt16           DataType = 2
	TypeInt32           DataType = 3
	TypeInt64           DataType = 4
	TypeUInt8           DataType = 5
	TypeUInt16          DataType = 6
	TypeUInt32          DataType = 7
	TypeUInt64          DataType = 8
	TypeFloat           DataType = 9
	TypeDouble          DataType = 10
	TypeBoolean         DataType = 11
	TypeString          DataType = 12
	TypeDateTime        DataType = 13
	TypeText            DataType = 14
	TypeUUID            DataType = 15
	TypeDataSet         DataType = 16
	TypeBytes           DataType = 17
	TypeFile            DataType = 18
	TypeTemplate        DataType = 19
	TypePropertySet     DataType = 20
	TypePropertySetList DataType = 21
)

var typeNames = [...]string{"Unknown", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32",
	"UInt64", "Float", "Double", "Boolean", "String", "DateTime", "Text", "UUID", "DataSet", "Bytes",
	"File", "Template", "PropertySet", "PropertySetList"}

// String returns the specification's name of the type.
func (t DataType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	if t >= 22 && t <= 34 {
		return "Array"
	}
	return fmt.Sprintf("DataType(%d)", uint32(t))
}

// Kind says which field of a metric's value oneof is set.
type Kind uint8

// The value kinds, one per field of the oneof.
const (
	KindNone      Kind = iota // no value (a null metric, or a malformed one)
	KindInt                   // int_value, uint32
	KindLong                  // long_value, uint64
	KindFloat                 // float_value
	KindDouble                // double_value
	KindBool                  // boolean_value
	KindString                // string_value
	KindBytes                 // bytes_value
	KindDataSet               // dataset_value (kept undecoded)
	KindTemplate              // template_value (kept undecoded)
	KindExtension             // extension_value (kept undecoded)
)

// Metric is one metric of a payload. Name, Raw and Properties point into
// the decoded message: they are valid until it is reused.
type Metric struct {
	Name         []byte // nil when absent (a metric sent by alias)
	Alias        uint64
	HasAlias     bool
	Timestamp    uint64 // Unix milliseconds; 0 when absent
	Datatype     DataType
	IsHistorical bool
	IsTransient  bool
	IsNull       bool
	Kind         Kind
	// Bits holds an integer or boolean value, or the IEEE 754 bits of a
	// float (32) or double (64) value.
	Bits uint64
	// Raw holds a string, bytes, data set, template or extension value
	// as it was encoded.
	Raw []byte
	// Properties is the encoded PropertySet, nil when absent.
	Properties []byte
}

// Payload is a decoded Sparkplug B payload. Decode reuses its Metrics.
type Payload struct {
	Timestamp uint64 // Unix milliseconds; 0 when absent
	HasSeq    bool
	Seq       uint64
	UUID      []byte
	Body      []byte
	Metrics   []Metric
}

// Field numbers of the Sparkplug B schema (docs/format/sparkplug.md).
const (
	fPayloadTimestamp = 1
	fPayloadMetrics   = 2
	fPayloadSeq       = 3
	fPayloadUUID      = 4
	fPayloadBody      = 5

	fMetricName       = 1
	fMetricAlias      = 2
	fMetricTimestamp  = 3
	fMetricDatatype   = 4
	fMetricHistorical = 5
	fMetricTransient  = 6
	fMetricNull       = 7
	fMetricMetadata   = 8
	fMetricProperties = 9
	fMetricInt        = 10
	fMetricLong       = 11
	fMetricFloat      = 12
	fMetricDouble     = 13
	fMetricBool       = 14
	fMetricString     = 15
	fMetricBytes      = 16
	fMetricDataSet    = 17
	fMetricTemplate   = 18
	fMetricExtension  = 19
)

// MaxMetrics bounds the metrics of one payload, so that a hostile
// message cannot make the decoder hold an unbounded slice (a metric
// costs at least two bytes on the wire, so a broker's message limit
// bounds it too).
const MaxMetrics = 1 << 20

// ErrPayload wraps every decoding error.
var ErrPayload = errors.New("bad sparkplug payload")

func payloadErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrPayload, fmt.Sprintf(format, args...))
}

// Decode reads a Sparkplug B payload into p, reusing its Metrics slice.
// Unknown fields are skipped, as protobuf requires; a field of a known
// number with the wrong wire type is an error. p points into b afterwards.
func Decode(b []byte, p *Payload) error {
	ms := p.Metrics[:0]
	*p = Payload{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || !num.IsValid() {
			return payloadErr("field tag: %v", tagErr(n))
		}
		b = b[n:]
		switch {
		case num == fPayloadTimestamp && typ == protowire.VarintType:
			p.Timestamp, n = protowire.ConsumeVarint(b)
		case num == fPayloadSeq && typ == protowire.VarintType:
			p.Seq, n = protowire.ConsumeVarint(b)
			p.HasSeq = true
		case num == fPayloadUUID && typ == protowire.BytesType:
			p.UUID, n = protowire.ConsumeBytes(b)
		case num == fPayloadBody && typ == protowire.BytesType:
			p.Body, n = protowire.ConsumeBytes(b)
		case num == fPayloadMetrics && typ == protowire.BytesType:
			var mb []byte
			mb, n = protowire.ConsumeBytes(b)
			if n < 0 {
				break
			}
			if len(ms) >= MaxMetrics {
				return payloadErr("more than %d metrics", MaxMetrics)
			}
			ms = append(ms, Metric{})
			if err := decodeMetric(mb, &ms[len(ms)-1]); err != nil {
				return fmt.Errorf("metric %d: %w", len(ms)-1, err)
			}
		case num >= fPayloadTimestamp && num <= fPayloadBody:
			return payloadErr("payload field %d has wire type %d", num, typ)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return payloadErr("payload field %d: %v", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	p.Metrics = ms
	return nil
}

// decodeMetric reads one Metric message.
func decodeMetric(b []byte, m *Metric) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || !num.IsValid() {
			return payloadErr("metric field tag: %v", tagErr(n))
		}
		b = b[n:]
		var v uint64
		want := protowire.VarintType
		switch num {
		case fMetricName, fMetricMetadata, fMetricProperties, fMetricString, fMetricBytes,
			fMetricDataSet, fMetricTemplate, fMetricExtension:
			want = protowire.BytesType
		case fMetricFloat:
			want = protowire.Fixed32Type
		case fMetricDouble:
			want = protowire.Fixed64Type
		case fMetricAlias, fMetricTimestamp, fMetricDatatype, fMetricHistorical, fMetricTransient,
			fMetricNull, fMetricInt, fMetricLong, fMetricBool:
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return payloadErr("metric field %d: %v", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		if typ != want {
			return payloadErr("metric field %d has wire type %d, want %d", num, typ, want)
		}
		var raw []byte
		switch want {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		case protowire.Fixed32Type:
			var u uint32
			u, n = protowire.ConsumeFixed32(b)
			v = uint64(u)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		}
		if n < 0 {
			return payloadErr("metric field %d: %v", num, protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case fMetricName:
			if raw == nil {
				raw = []byte{}
			}
			m.Name = raw
		case fMetricAlias:
			m.Alias, m.HasAlias = v, true
		case fMetricTimestamp:
			m.Timestamp = v
		case fMetricDatatype:
			m.Datatype = DataType(uint32(v))
		case fMetricHistorical:
			m.IsHistorical = v != 0
		case fMetricTransient:
			m.IsTransient = v != 0
		case fMetricNull:
			m.IsNull = v != 0
		case fMetricMetadata:
			// Metadata (content type, sizes, file names) is not kept.
		case fMetricProperties:
			m.Properties = raw
		case fMetricInt:
			m.Kind, m.Bits, m.Raw = KindInt, uint64(uint32(v)), nil
		case fMetricLong:
			m.Kind, m.Bits, m.Raw = KindLong, v, nil
		case fMetricFloat:
			m.Kind, m.Bits, m.Raw = KindFloat, v, nil
		case fMetricDouble:
			m.Kind, m.Bits, m.Raw = KindDouble, v, nil
		case fMetricBool:
			m.Kind, m.Bits, m.Raw = KindBool, b2u(v != 0), nil
		case fMetricString:
			m.Kind, m.Bits, m.Raw = KindString, 0, raw
		case fMetricBytes:
			m.Kind, m.Bits, m.Raw = KindBytes, 0, raw
		case fMetricDataSet:
			m.Kind, m.Bits, m.Raw = KindDataSet, 0, raw
		case fMetricTemplate:
			m.Kind, m.Bits, m.Raw = KindTemplate, 0, raw
		case fMetricExtension:
			m.Kind, m.Bits, m.Raw = KindExtension, 0, raw
		}
	}
	return nil
}

// tagErr explains a field tag the decoder refused.
func tagErr(n int) error {
	if n < 0 {
		return protowire.ParseError(n)
	}
	return errors.New("invalid field number")
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Append encodes p after dst and returns the result. Fields at their zero
// value are left out, except that Seq is written when HasSeq is set and a
// metric's value when its Kind is not KindNone.
func Append(dst []byte, p *Payload) []byte {
	if p.Timestamp != 0 {
		dst = protowire.AppendTag(dst, fPayloadTimestamp, protowire.VarintType)
		dst = protowire.AppendVarint(dst, p.Timestamp)
	}
	for i := range p.Metrics {
		dst = protowire.AppendTag(dst, fPayloadMetrics, protowire.BytesType)
		// Metrics are small: encode into the tail, then move it behind
		// its length prefix.
		start := len(dst)
		dst = appendMetric(dst, &p.Metrics[i])
		n := len(dst) - start
		var lenBuf [binaryMaxVarint]byte
		l := protowire.AppendVarint(lenBuf[:0], uint64(n))
		dst = append(dst, l...)
		copy(dst[start+len(l):], dst[start:start+n])
		copy(dst[start:], l)
	}
	if p.HasSeq {
		dst = protowire.AppendTag(dst, fPayloadSeq, protowire.VarintType)
		dst = protowire.AppendVarint(dst, p.Seq)
	}
	if p.UUID != nil {
		dst = protowire.AppendTag(dst, fPayloadUUID, protowire.BytesType)
		dst = protowire.AppendBytes(dst, p.UUID)
	}
	if p.Body != nil {
		dst = protowire.AppendTag(dst, fPayloadBody, protowire.BytesType)
		dst = protowire.AppendBytes(dst, p.Body)
	}
	return dst
}

const binaryMaxVarint = 10

func appendMetric(dst []byte, m *Metric) []byte {
	if m.Name != nil {
		dst = protowire.AppendTag(dst, fMetricName, protowire.BytesType)
		dst = protowire.AppendBytes(dst, m.Name)
	}
	if m.HasAlias {
		dst = protowire.AppendTag(dst, fMetricAlias, protowire.VarintType)
		dst = protowire.AppendVarint(dst, m.Alias)
	}
	if m.Timestamp != 0 {
		dst = protowire.AppendTag(dst, fMetricTimestamp, protowire.VarintType)
		dst = protowire.AppendVarint(dst, m.Timestamp)
	}
	if m.Datatype != TypeUnknown {
		dst = protowire.AppendTag(dst, fMetricDatatype, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(m.Datatype))
	}
	for _, f := range [...]struct {
		num protowire.Number
		on  bool
	}{{fMetricHistorical, m.IsHistorical}, {fMetricTransient, m.IsTransient}, {fMetricNull, m.IsNull}} {
		if f.on {
			dst = protowire.AppendTag(dst, f.num, protowire.VarintType)
			dst = protowire.AppendVarint(dst, 1)
		}
	}
	if m.Properties != nil {
		dst = protowire.AppendTag(dst, fMetricProperties, protowire.BytesType)
		dst = protowire.AppendBytes(dst, m.Properties)
	}
	switch m.Kind {
	case KindInt:
		dst = protowire.AppendTag(dst, fMetricInt, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(uint32(m.Bits)))
	case KindLong:
		dst = protowire.AppendTag(dst, fMetricLong, protowire.VarintType)
		dst = protowire.AppendVarint(dst, m.Bits)
	case KindFloat:
		dst = protowire.AppendTag(dst, fMetricFloat, protowire.Fixed32Type)
		dst = protowire.AppendFixed32(dst, uint32(m.Bits))
	case KindDouble:
		dst = protowire.AppendTag(dst, fMetricDouble, protowire.Fixed64Type)
		dst = protowire.AppendFixed64(dst, m.Bits)
	case KindBool:
		dst = protowire.AppendTag(dst, fMetricBool, protowire.VarintType)
		dst = protowire.AppendVarint(dst, m.Bits&1)
	case KindString, KindBytes, KindDataSet, KindTemplate, KindExtension:
		dst = protowire.AppendTag(dst, rawField(m.Kind), protowire.BytesType)
		dst = protowire.AppendBytes(dst, m.Raw)
	}
	return dst
}

// rawField is the field number of a value kind kept as bytes.
func rawField(k Kind) protowire.Number {
	switch k {
	case KindString:
		return fMetricString
	case KindBytes:
		return fMetricBytes
	case KindDataSet:
		return fMetricDataSet
	case KindTemplate:
		return fMetricTemplate
	}
	return fMetricExtension
}
