package sparkplug

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// readPayload reads a golden payload that Eclipse Tahu's codec encoded
// (testdata/tahu/dump.js wrote testdata/payloads).
func readPayload(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "payloads", name+".bin"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeTahuBirth checks every numeric type of a birth Tahu encoded.
func TestDecodeTahuBirth(t *testing.T) {
	var p Payload
	if err := DecodeMessage(readPayload(t, "nbirth"), &p); err != nil {
		t.Fatal(err)
	}
	if p.Timestamp != 1700000000000 || !p.HasSeq || p.Seq != 0 {
		t.Fatalf("timestamp %d seq %d (%v)", p.Timestamp, p.Seq, p.HasSeq)
	}
	want := []struct {
		name  string
		alias uint64
		dt    DataType
		v     float64
		skip  string
	}{
		{"bdSeq", 0, TypeUInt64, 3, ""},
		{"Node Control/Rebirth", 0, TypeBoolean, 0, ""},
		{"Inputs/Temperature", 1, TypeDouble, 21.5, ""},
		{"Inputs/Count", 2, TypeInt32, -7, ""},
		{"Inputs/Small", 3, TypeInt8, -100, ""},
		{"Inputs/Word", 4, TypeUInt16, 65535, ""},
		{"Inputs/Big", 5, TypeInt64, -1234567890123, ""},
		{"Inputs/Counter", 6, TypeUInt64, 9007199254740991, ""},
		{"Inputs/U32", 7, TypeUInt32, 4000000000, ""},
		{"Inputs/Ratio", 8, TypeFloat, 0.25, ""},
		{"Inputs/Running", 9, TypeBoolean, 1, ""},
		{"Inputs/Label", 10, TypeString, 0, SkipText},
		{"Inputs/When", 11, TypeDateTime, 1700000000000, ""},
		{"Inputs/Missing", 12, TypeDouble, 0, SkipNoValue},
	}
	if len(p.Metrics) != len(want) {
		t.Fatalf("%d metrics, want %d", len(p.Metrics), len(want))
	}
	for i, w := range want {
		m := &p.Metrics[i]
		if string(m.Name) != w.name || m.Alias != w.alias || m.Datatype != w.dt {
			t.Errorf("metric %d: %q alias %d %s, want %q alias %d %s", i, m.Name, m.Alias, m.Datatype, w.name, w.alias, w.dt)
		}
		v, skip := m.Float(TypeUnknown)
		if v != w.v || skip != w.skip {
			t.Errorf("metric %s: %v %q, want %v %q", w.name, v, skip, w.v, w.skip)
		}
	}
	if !p.Metrics[13].IsNull {
		t.Error("Inputs/Missing: is_null not set")
	}
	if p.Metrics[2].Timestamp != 1700000000000 {
		t.Errorf("metric timestamp %d", p.Metrics[2].Timestamp)
	}
}

func TestDecodeTahuCompressed(t *testing.T) {
	var plain, p Payload
	if err := DecodeMessage(readPayload(t, "ndata_alias"), &plain); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"compressed_deflate", "compressed_gzip"} {
		if err := DecodeMessage(readPayload(t, name), &p); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(p.Metrics) != 3 || p.Seq != 1 || p.Metrics[0].Alias != 1 {
			t.Fatalf("%s: %+v", name, p)
		}
		if v, _ := p.Metrics[0].Float(TypeDouble); v != 22.25 {
			t.Errorf("%s: alias 1 = %v", name, v)
		}
	}
}

func TestDecodeTahuOtherTypes(t *testing.T) {
	for _, c := range []struct {
		name string
		kind Kind
		dt   DataType
	}{{"dataset", KindDataSet, TypeDataSet}, {"template", KindTemplate, TypeTemplate}} {
		var p Payload
		if err := DecodeMessage(readPayload(t, c.name), &p); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		m := p.Metrics[0]
		if m.Kind != c.kind || m.Datatype != c.dt {
			t.Errorf("%s: kind %d type %s", c.name, m.Kind, m.Datatype)
		}
		if _, skip := m.Float(TypeUnknown); skip != SkipType {
			t.Errorf("%s: skip %q", c.name, skip)
		}
	}
	var p Payload
	if err := DecodeMessage(readPayload(t, "properties"), &p); err != nil {
		t.Fatal(err)
	}
	if p.Metrics[0].Properties == nil || p.Metrics[0].Alias != 20 {
		t.Errorf("properties: %+v", p.Metrics[0])
	}
}

// TestRoundTrip encodes payloads and decodes them back.
func TestRoundTrip(t *testing.T) {
	in := Payload{Timestamp: 42, HasSeq: true, Seq: 255, UUID: []byte("u"), Body: []byte{1, 2}, Metrics: []Metric{
		{Name: []byte("a/b"), Alias: 7, HasAlias: true, Timestamp: 9, Datatype: TypeDouble, Kind: KindDouble, Bits: math.Float64bits(-1.5)},
		{Alias: 0, HasAlias: true, Kind: KindInt, Bits: 0xffffff9c, Datatype: TypeInt8},
		{Name: []byte(""), IsNull: true, IsHistorical: true, IsTransient: true, Datatype: TypeFloat},
		{Name: []byte("s"), Kind: KindString, Raw: []byte("text"), Properties: []byte{0x0a, 0}},
		{Name: bytes.Repeat([]byte("x"), 300), Kind: KindLong, Bits: math.MaxUint64},
		{Kind: KindFloat, Bits: uint64(math.Float32bits(0.5))},
		{Kind: KindBool, Bits: 1},
	}}
	b := Append(nil, &in)
	var out Payload
	if err := Decode(b, &out); err != nil {
		t.Fatal(err)
	}
	if again := Append(nil, &out); !bytes.Equal(again, b) {
		t.Fatalf("re-encoded differs:\n%x\n%x", again, b)
	}
	if v, _ := out.Metrics[1].Float(TypeUnknown); v != -100 {
		t.Errorf("int8 = %v", v)
	}
	if v, _ := out.Metrics[0].Float(TypeUnknown); v != -1.5 {
		t.Errorf("double = %v", v)
	}
	if out.Metrics[2].Name == nil || len(out.Metrics[2].Name) != 0 || out.Metrics[1].Name != nil {
		t.Errorf("empty name and absent name not told apart")
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"truncated varint", []byte{0x08, 0x80}},
		{"truncated metric", []byte{0x12, 0x05, 0x0a}},
		{"timestamp as bytes", []byte{0x0a, 0x00}},
		{"metric name as varint", []byte{0x12, 0x02, 0x08, 0x01}},
		{"double as varint", []byte{0x12, 0x02, 0x68, 0x01}},
		{"bad field number", []byte{0x00}},
		{"bad compressed body", append(Append(nil, &Payload{UUID: []byte(compressedUUID), Body: []byte("nope")}), 0x18, 0x01)},
	} {
		var p Payload
		if err := DecodeMessage(c.b, &p); err == nil {
			t.Errorf("%s: no error", c.name)
		}
	}
	// Unknown fields are skipped.
	var p Payload
	if err := Decode([]byte{0x30, 0x01, 0x08, 0x05}, &p); err != nil || p.Timestamp != 5 {
		t.Errorf("unknown field: %v %d", err, p.Timestamp)
	}
}

// FuzzDecode checks that no input makes the decoder panic or hang, that
// what it accepts the protobuf runtime (dynamicpb) decodes to the same
// fields, and that it encodes to bytes it decodes to the same payload.
// Seeds: the payloads Tahu encoded. Run: go test -fuzz FuzzDecode ./internal/sparkplug/
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "payloads", "*.bin"))
	for _, fn := range files {
		b, err := os.ReadFile(fn)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	md := referenceDescriptor(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Payload
		if Decode(b, &p) == nil {
			// What we accept, the protobuf runtime reads alike.
			compareWithReference(t, md, b)
		}
		if err := DecodeMessage(b, &p); err != nil {
			return
		}
		for i := range p.Metrics {
			p.Metrics[i].Float(TypeUnknown)
			p.Metrics[i].Unit()
		}
		enc := Append(nil, &p)
		var q Payload
		if err := Decode(enc, &q); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if again := Append(nil, &q); !bytes.Equal(again, enc) {
			t.Fatalf("not stable:\n%x\n%x", enc, again)
		}
	})
}

func TestMetricUnit(t *testing.T) {
	for _, tt := range []struct {
		props []byte
		want  string
		ok    bool
	}{
		{AppendUnitProperty(nil, "degC"), "degC", true},
		{nil, "", false},
		{[]byte{0x0a, 0x03, 'f', 'o', 'o'}, "", false}, // a key without a value
		{[]byte{0x0a, 0x05}, "", false},                // truncated
	} {
		m := Metric{Properties: tt.props}
		if got, ok := m.Unit(); got != tt.want || ok != tt.ok {
			t.Errorf("Unit(%x) = %q, %v; want %q, %v", tt.props, got, ok, tt.want, tt.ok)
		}
	}
	// Other spellings, in any case.
	for _, key := range []string{"engUnits", "Unit", "units", "ENGUNIT"} {
		b := AppendUnitProperty(nil, "bar")
		b = append([]byte{0x0a, byte(len(key))}, append([]byte(key), b[2+len("engUnit"):]...)...)
		if got, ok := (&Metric{Properties: b}).Unit(); !ok || got != "bar" {
			t.Errorf("key %q: %q, %v", key, got, ok)
		}
	}
}
