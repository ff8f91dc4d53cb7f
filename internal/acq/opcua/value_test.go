package opcua

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/ua"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
)

func TestFloat(t *testing.T) {
	for _, tt := range []struct {
		v    any
		el   int
		want float64
		ok   bool
	}{
		{true, -1, 1, true}, {false, -1, 0, true}, {int8(-5), -1, -5, true}, {uint8(250), -1, 250, true},
		{int16(-300), -1, -300, true}, {uint16(65535), -1, 65535, true}, {int32(-7), -1, -7, true},
		{uint32(4e9), -1, 4e9, true}, {int64(-1 << 40), -1, -1 << 40, true}, {uint64(1 << 60), -1, 1 << 60, true},
		{float32(1.5), -1, 1.5, true}, {2.25, -1, 2.25, true},
		{math.NaN(), -1, 0, false}, {math.Inf(1), -1, 0, false}, {"text", -1, 0, false},
		{[]float64{1, 2, 3}, 2, 3, true}, {[]float64{1, 2, 3}, 3, 0, false}, {[]float64{1, 2}, -1, 0, false},
		{[]int16{-1, 4}, 1, 4, true}, {[]bool{false, true}, 1, 1, true}, {2.0, 0, 0, false},
	} {
		v, err := ua.NewVariant(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := Float(v, tt.el)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("Float(%T %v, %d) = %v, %v; want %v, %v", tt.v, tt.v, tt.el, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := Float(nil, -1); ok {
		t.Error("nil variant converted")
	}
}

func TestQuality(t *testing.T) {
	for _, tt := range []struct {
		s    ua.StatusCode
		want model.Quality
	}{
		{ua.StatusOK, model.QualityGood}, {0x00A00000, model.QualityGood},
		{ua.StatusUncertainLastUsableValue, model.QualityUncertain}, {ua.StatusUncertain, model.QualityUncertain},
		{ua.StatusBadNodeIDUnknown, model.QualityBad}, {ua.StatusBadCommunicationError, model.QualityBad}, {0xC0000000, model.QualityBad},
	} {
		if got := Quality(tt.s); got != tt.want {
			t.Errorf("Quality(%08X) = %v, want %v", uint32(tt.s), got, tt.want)
		}
	}
	if !Overflowed(0x00000480) || Overflowed(0x00000080) || Overflowed(0x00000400) {
		t.Error("overflow bit read wrong")
	}
	if got := StatusName(ua.StatusBadTypeMismatch); got != "BadTypeMismatch (0x80740000)" {
		t.Errorf("StatusName = %q", got)
	}
}

func TestEncode(t *testing.T) {
	for _, tt := range []struct {
		raw  float64
		typ  config.OPCUAType
		want any
	}{
		{1, config.OPCUABoolean, true}, {0, config.OPCUABoolean, false}, {-128, config.OPCUASByte, int8(-128)},
		{255, config.OPCUAByte, uint8(255)}, {2.6, config.OPCUAInt16, int16(3)}, {65535, config.OPCUAUInt16, uint16(65535)},
		{-2e9, config.OPCUAInt32, int32(-2e9)}, {4e9, config.OPCUAUInt32, uint32(4e9)}, {-1e15, config.OPCUAInt64, int64(-1e15)},
		{1e15, config.OPCUAUInt64, uint64(1e15)}, {1.5, config.OPCUAFloat, float32(1.5)}, {1e300, config.OPCUADouble, 1e300},
	} {
		v, err := Encode(tt.raw, tt.typ)
		if err != nil || v.Value() != tt.want {
			t.Errorf("Encode(%v, %v) = %v, %v; want %T %v", tt.raw, tt.typ, v, err, tt.want, tt.want)
		}
	}
	for _, tt := range []struct {
		raw float64
		typ config.OPCUAType
	}{
		{0.5, config.OPCUABoolean}, {128, config.OPCUASByte}, {-1, config.OPCUAByte}, {65536, config.OPCUAUInt16},
		{1e10, config.OPCUAInt32}, {-1, config.OPCUAUInt64}, {1e20, config.OPCUAInt64}, {1e39, config.OPCUAFloat},
		{math.NaN(), config.OPCUADouble}, {math.Inf(-1), config.OPCUAFloat},
	} {
		if v, err := Encode(tt.raw, tt.typ); err == nil {
			t.Errorf("Encode(%v, %v) = %v, want an error", tt.raw, tt.typ, v)
		}
	}
	v, err := EncodeElement(3, config.OPCUAInt32)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := v.Value().([]int32); !ok || len(got) != 1 || got[0] != 3 {
		t.Errorf("EncodeElement = %#v", v.Value())
	}
}

// FuzzValue converts whatever a server can put in a variant of each
// numeric type, scalar or array, with any element index, and maps any
// status code: nothing may panic or yield a non-finite number. The
// variant is built from the fuzzed bytes, so that every type is reached
// (FuzzDecodeDataValue fuzzes the decoder). Run: go test -fuzz FuzzValue
// ./internal/acq/opcua/
func FuzzValue(f *testing.F) {
	f.Add(uint8(11), false, int16(-1), uint32(0), []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	f.Add(uint8(1), true, int16(2), uint32(0x40000000), []byte{1, 0, 1})
	f.Add(uint8(6), true, int16(9), uint32(0x80740000), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(uint8(10), false, int16(0), uint32(0x00000480), []byte{0, 0, 0x80, 0x7f})
	f.Fuzz(func(t *testing.T, kind uint8, array bool, el int16, status uint32, b []byte) {
		_ = Quality(ua.StatusCode(status))
		_ = Overflowed(ua.StatusCode(status))
		_ = StatusName(ua.StatusCode(status))
		vals := numbers(kind%12, b)
		if vals == nil {
			return
		}
		var v *ua.Variant
		var err error
		if array {
			v, err = ua.NewVariant(vals)
		} else {
			rv := reflect.ValueOf(vals)
			if rv.Len() == 0 {
				return
			}
			v, err = ua.NewVariant(rv.Index(0).Interface())
		}
		if err != nil {
			return
		}
		if f, ok := Float(v, int(el)); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			t.Fatalf("Float gave %v", f)
		}
	})
}

// numbers reads b as a slice of the OPC UA built-in type kind (1 Boolean
// to 11 Double), little-endian as on the wire; nil for other kinds.
func numbers(kind uint8, b []byte) any {
	var typ reflect.Type
	switch config.OPCUAType(kind) {
	case config.OPCUABoolean:
		typ = reflect.TypeOf(false)
	case config.OPCUASByte:
		typ = reflect.TypeOf(int8(0))
	case config.OPCUAByte:
		typ = reflect.TypeOf(uint8(0))
	case config.OPCUAInt16:
		typ = reflect.TypeOf(int16(0))
	case config.OPCUAUInt16:
		typ = reflect.TypeOf(uint16(0))
	case config.OPCUAInt32:
		typ = reflect.TypeOf(int32(0))
	case config.OPCUAUInt32:
		typ = reflect.TypeOf(uint32(0))
	case config.OPCUAInt64:
		typ = reflect.TypeOf(int64(0))
	case config.OPCUAUInt64:
		typ = reflect.TypeOf(uint64(0))
	case config.OPCUAFloat:
		typ = reflect.TypeOf(float32(0))
	case config.OPCUADouble:
		typ = reflect.TypeOf(float64(0))
	default:
		return nil
	}
	n := len(b) / int(typ.Size())
	out := reflect.MakeSlice(reflect.SliceOf(typ), n, n)
	if err := binary.Read(bytes.NewReader(b[:n*int(typ.Size())]), binary.LittleEndian, out.Interface()); err != nil {
		return nil
	}
	return out.Interface()
}

// TestDecoderHostileLengths feeds the OPC UA decoder the malformed lengths
// that made gopcua v0.8.0 panic in the secure channel's receive goroutine
// (where nothing recovers, so one faulty or hostile server, or anyone on
// the path of an unsigned channel, could stop Pith): a negative array
// length, lengths past the message's end, dimensions whose product wraps
// around. Pith builds the patched copy in third_party/opcua: each must be
// an error wrapping BadDecodingError (or the library's encoding-limit
// and unbalanced-array errors), never a panic, both through the variant's
// own decoder and through a whole Publish response as the channel decodes
// it.
func TestDecoderHostileLengths(t *testing.T) {
	for _, tt := range []struct {
		name string
		dv   []byte // an encoded DataValue
	}{
		// Encoding mask: value present; variant: Double array, length -2.
		{"negative length", []byte{0x01, 0x80 | 11, 0xfe, 0xff, 0xff, 0xff}},
		{"min int32 length", []byte{0x01, 0x80 | 11, 0x00, 0x00, 0x00, 0x80}},
		{"length past the end", []byte{0x01, 0x80 | 11, 0x00, 0xff, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 7, 8}},
		{"dimensions past the end", []byte{0x01, 0xC0 | 1, 0x01, 0x00, 0x00, 0x00, 0x01, 0xff, 0xff, 0xff, 0x7f}},
		// 2 elements, dimensions 65538 x 65536 x ... wrap to 2 in int32.
		{"wrapping dimensions", []byte{0x01, 0xC0 | 1, 0x02, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00,
			0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00}},
		{"string array negative length", []byte{0x01, 0x80 | 12, 0xfd, 0xff, 0xff, 0xff}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("DataValue.Decode panicked: %v", r)
					}
				}()
				var dv ua.DataValue
				_, err = dv.Decode(tt.dv)
			}()
			if err == nil {
				t.Fatal("DataValue.Decode accepted it")
			}
			// The same value inside a Publish response, decoded as the
			// secure channel decodes every message it receives.
			msg := publishResponse(t, tt.dv)
			if _, _, err := ua.DecodeService(msg); err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("DecodeService: %v, want the value refused", err)
			}
		})
	}
	// The genuine response decodes, so the failures above are the
	// malformed value's.
	good := []byte{0x01, 0x80 | 11, 0x01, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f}
	_, body, err := ua.DecodeService(publishResponse(t, good))
	if err != nil {
		t.Fatal(err)
	}
	m := body.(*ua.PublishResponse).NotificationMessage.NotificationData[0].Value.(*ua.DataChangeNotification).MonitoredItems[0]
	if got, ok := Float(m.Value.Value, 0); !ok || got != 1.5 {
		t.Fatalf("genuine value decoded as %v, %v", got, ok)
	}
	// A decoder defect not met yet still ends as an error: ua.Decode
	// recovers (a nil target makes reflect panic inside it).
	if _, err := ua.Decode([]byte{1, 2, 3}, (*ua.DataValue)(nil)); !errors.Is(err, ua.StatusBadDecodingError) {
		t.Fatalf("ua.Decode of a panicking target: %v, want BadDecodingError", err)
	}
}

// publishResponse encodes a Publish response whose one data change
// carries the encoded DataValue dv, as a server sends it (type id first).
func publishResponse(t *testing.T, dv []byte) []byte {
	t.Helper()
	const marker = 123.456
	mark, _ := ua.NewVariant(marker)
	res := &ua.PublishResponse{
		ResponseHeader: &ua.ResponseHeader{Timestamp: time.Unix(1, 0), ServiceDiagnostics: &ua.DiagnosticInfo{},
			AdditionalHeader: ua.NewExtensionObject(nil)},
		SubscriptionID: 1,
		NotificationMessage: &ua.NotificationMessage{SequenceNumber: 1, PublishTime: time.Unix(1, 0),
			NotificationData: []*ua.ExtensionObject{ua.NewExtensionObject(&ua.DataChangeNotification{
				MonitoredItems: []*ua.MonitoredItemNotification{{ClientHandle: 0,
					Value: &ua.DataValue{EncodingMask: ua.DataValueValue, Value: mark}}},
				DiagnosticInfos: []*ua.DiagnosticInfo{},
			})}},
		AvailableSequenceNumbers: []uint32{},
		Results:                  []ua.StatusCode{},
		DiagnosticInfos:          []*ua.DiagnosticInfo{},
	}
	body, err := ua.Encode(res)
	if err != nil {
		t.Fatal(err)
	}
	// Swap the marker DataValue (mask 0x01, variant Double) for dv.
	want, _ := (&ua.DataValue{EncodingMask: ua.DataValueValue, Value: mark}).Encode()
	i := bytes.Index(body, want)
	if i < 0 {
		t.Fatal("marker value not found in the encoded response")
	}
	body = append(append(append([]byte(nil), body[:i]...), dv...), body[i+len(want):]...)
	// The notification is an extension object whose length precedes
	// its body: mend it (four-byte node id 811, binary body, length).
	eo := bytes.Index(body, []byte{0x01, 0x00, 0x2b, 0x03, 0x01})
	if eo < 0 || eo > i {
		t.Fatal("notification's extension object not found")
	}
	n := binary.LittleEndian.Uint32(body[eo+5:])
	binary.LittleEndian.PutUint32(body[eo+5:], n+uint32(len(dv)-len(want)))
	typeID, err := ua.NewFourByteExpandedNodeID(0, id.PublishResponse_Encoding_DefaultBinary).Encode()
	if err != nil {
		t.Fatal(err)
	}
	return append(typeID, body...)
}

// FuzzDecodeDataValue decodes arbitrary bytes as a DataValue with the
// variant's own decoder (not through ua.Decode, whose recover would hide
// a panic) and converts what it yields: nothing may panic. Seeded with
// the malformed lengths of TestDecoderHostileLengths. Run: go test -fuzz
// FuzzDecodeDataValue ./internal/acq/opcua/
func FuzzDecodeDataValue(f *testing.F) {
	f.Add([]byte{0x01, 0x80 | 11, 0xfe, 0xff, 0xff, 0xff})
	f.Add([]byte{0x01, 0x80 | 11, 0x01, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f})
	f.Add([]byte{0x01, 0xC0 | 1, 0x02, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00})
	f.Add([]byte{0x0d, 12, 5, 0, 0, 0, 'h', 'e', 'l', 'l', 'o', 0, 0, 0, 0x40})
	f.Fuzz(func(t *testing.T, b []byte) {
		var dv ua.DataValue
		if _, err := dv.Decode(b); err != nil {
			return
		}
		if f, ok := Float(dv.Value, -1); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			t.Fatalf("Float gave %v", f)
		}
		_, _ = Float(dv.Value, 0)
		_, _, _ = Text(dv.Value, -1)
		_, _, _ = Text(dv.Value, 0)
	})
}

func TestText(t *testing.T) {
	long := strings.Repeat("é", model.MaxTextLen) // 2 bytes each
	for _, tt := range []struct {
		v       any
		el      int
		want    string
		cut, ok bool
	}{
		{"Running", -1, "Running", false, true},
		{"two\r\nlines", -1, "two lines", false, true},
		{long, -1, strings.Repeat("é", (model.MaxTextLen-3)/2) + "…", true, true},
		{[]string{"a", "b"}, 1, "b", false, true},
		{[]string{"a", "b"}, 2, "", false, false},
		{[]string{"a"}, -1, "", false, false},
		{"a", 0, "", false, false},
		{3.5, -1, "", false, false},
	} {
		v, err := ua.NewVariant(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		got, cut, ok := Text(v, tt.el)
		if got != tt.want || cut != tt.cut || ok != tt.ok {
			t.Errorf("Text(%.20v, %d) = %.20q, %v, %v; want %.20q, %v, %v", tt.v, tt.el, got, cut, ok, tt.want, tt.cut, tt.ok)
		}
	}
	if _, _, ok := Text(nil, -1); ok {
		t.Error("nil variant converted")
	}
}

// TestDecoderDeepNesting feeds the decoder a DiagnosticInfo nesting two
// million inner ones (one byte each) and Variant arrays of Variants
// nested 400,000 deep: decoded recursively without a bound as released,
// they cost seconds of CPU and a stack past 32-bit systems' limit (a
// fatal error). The patched decoder refuses both past MaxNestingDepth,
// and takes nesting up to it.
func TestDecoderDeepNesting(t *testing.T) {
	start := time.Now()
	var d ua.DiagnosticInfo
	if _, err := ua.Decode(append(bytes.Repeat([]byte{0x40}, 2<<20), 0), &d); !errors.Is(err, ua.StatusBadEncodingLimitsExceeded) {
		t.Errorf("deep DiagnosticInfo: %v, want BadEncodingLimitsExceeded", err)
	}
	var v ua.Variant
	if _, err := ua.Decode(append(bytes.Repeat([]byte{0x80 | 24, 1, 0, 0, 0}, 400_000), 0), &v); !errors.Is(err, ua.StatusBadEncodingLimitsExceeded) {
		t.Errorf("deep Variant: %v, want BadEncodingLimitsExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing took %v", d)
	}
	// MaxNestingDepth levels are fine.
	if _, err := ua.Decode(append(bytes.Repeat([]byte{0x40}, ua.MaxNestingDepth), 0), &d); err != nil {
		t.Errorf("DiagnosticInfo %d deep: %v", ua.MaxNestingDepth, err)
	}
	n := 0
	for x := &d; x != nil; x = x.InnerDiagnosticInfo {
		n++
	}
	if n != ua.MaxNestingDepth+1 {
		t.Errorf("decoded %d levels, want %d", n, ua.MaxNestingDepth+1)
	}
	b := append(bytes.Repeat([]byte{0x80 | 24, 1, 0, 0, 0}, ua.MaxNestingDepth), 11, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f)
	if _, err := ua.Decode(b, &v); err != nil {
		t.Fatalf("Variant %d deep: %v", ua.MaxNestingDepth, err)
	}
	x := &v
	for range ua.MaxNestingDepth {
		x = x.Value().([]*ua.Variant)[0]
	}
	if x.Value() != 1.5 {
		t.Errorf("innermost value %v", x.Value())
	}
}
