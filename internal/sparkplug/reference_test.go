package sparkplug

import (
	"bytes"
	"math"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// referenceDescriptor builds the Sparkplug B Payload message for the
// official protobuf runtime (dynamicpb), the reference our decoder is
// checked and measured against. DataSet, Template, MetaData, PropertySet
// and the extension are declared as bytes, which is the same on the wire.
func referenceDescriptor(t testing.TB) protoreflect.MessageDescriptor {
	t.Helper()
	opt := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()
	rep := descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	field := func(name string, num int32, typ descriptorpb.FieldDescriptorProto_Type, label *descriptorpb.FieldDescriptorProto_Label, oneof *int32) *descriptorpb.FieldDescriptorProto {
		f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Type: typ.Enum(), Label: label, OneofIndex: oneof}
		if typ == descriptorpb.FieldDescriptorProto_TYPE_MESSAGE {
			f.TypeName = proto.String(".spb.Payload.Metric")
		}
		return f
	}
	const (
		u64 = descriptorpb.FieldDescriptorProto_TYPE_UINT64
		u32 = descriptorpb.FieldDescriptorProto_TYPE_UINT32
		str = descriptorpb.FieldDescriptorProto_TYPE_STRING
		byt = descriptorpb.FieldDescriptorProto_TYPE_BYTES
		bol = descriptorpb.FieldDescriptorProto_TYPE_BOOL
		flt = descriptorpb.FieldDescriptorProto_TYPE_FLOAT
		dbl = descriptorpb.FieldDescriptorProto_TYPE_DOUBLE
		msg = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	)
	o := proto.Int32(0)
	metric := &descriptorpb.DescriptorProto{
		Name: proto.String("Metric"),
		Field: []*descriptorpb.FieldDescriptorProto{
			field("name", 1, str, opt, nil), field("alias", 2, u64, opt, nil), field("timestamp", 3, u64, opt, nil),
			field("datatype", 4, u32, opt, nil), field("is_historical", 5, bol, opt, nil),
			field("is_transient", 6, bol, opt, nil), field("is_null", 7, bol, opt, nil),
			field("metadata", 8, byt, opt, nil), field("properties", 9, byt, opt, nil),
			field("int_value", 10, u32, opt, o), field("long_value", 11, u64, opt, o),
			field("float_value", 12, flt, opt, o), field("double_value", 13, dbl, opt, o),
			field("boolean_value", 14, bol, opt, o), field("string_value", 15, str, opt, o),
			field("bytes_value", 16, byt, opt, o), field("dataset_value", 17, byt, opt, o),
			field("template_value", 18, byt, opt, o), field("extension_value", 19, byt, opt, o),
		},
		OneofDecl: []*descriptorpb.OneofDescriptorProto{{Name: proto.String("value")}},
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name: proto.String("sparkplug_b_reference.proto"), Package: proto.String("spb"), Syntax: proto.String("proto2"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: proto.String("Payload"),
			Field: []*descriptorpb.FieldDescriptorProto{
				field("timestamp", 1, u64, opt, nil), field("metrics", 2, msg, rep, nil), field("seq", 3, u64, opt, nil),
				field("uuid", 4, str, opt, nil), field("body", 5, byt, opt, nil),
			},
			NestedType: []*descriptorpb.DescriptorProto{metric},
		}},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f.Messages().ByName("Payload")
}

// TestDecodeMatchesReference decodes the golden payloads with our decoder
// and with the protobuf runtime and compares every field.
func TestDecodeMatchesReference(t *testing.T) {
	md := referenceDescriptor(t)
	for _, name := range []string{"nbirth", "ndata_alias", "ndata_names", "ndeath", "dataset", "template", "properties", "compressed_deflate"} {
		b := readPayload(t, name)
		compareWithReference(t, md, b)
	}
	compareWithReference(t, md, benchPayload(100))
}

func compareWithReference(t *testing.T, md protoreflect.MessageDescriptor, b []byte) {
	t.Helper()
	ref := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(b, ref); err != nil {
		t.Fatal(err)
	}
	var p Payload
	if err := Decode(b, &p); err != nil {
		t.Fatal(err)
	}
	get := func(m protoreflect.Message, name string) protoreflect.Value {
		return m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name)))
	}
	if get(ref, "timestamp").Uint() != p.Timestamp || get(ref, "seq").Uint() != p.Seq || get(ref, "uuid").String() != string(p.UUID) {
		t.Errorf("header differs: %v", ref)
	}
	list := get(ref, "metrics").List()
	if list.Len() != len(p.Metrics) {
		t.Fatalf("%d metrics, reference %d", len(p.Metrics), list.Len())
	}
	for i := range p.Metrics {
		r, m := list.Get(i).Message(), &p.Metrics[i]
		if get(r, "name").String() != string(m.Name) || get(r, "alias").Uint() != m.Alias ||
			get(r, "timestamp").Uint() != m.Timestamp || uint32(get(r, "datatype").Uint()) != uint32(m.Datatype) ||
			get(r, "is_null").Bool() != m.IsNull || !bytes.Equal(get(r, "properties").Bytes(), m.Properties) {
			t.Errorf("metric %d differs: %v / %+v", i, r, m)
		}
		od := r.WhichOneof(r.Descriptor().Oneofs().ByName("value"))
		var ok bool
		switch {
		case od == nil:
			ok = m.Kind == KindNone
		case od.Name() == "int_value":
			ok = m.Kind == KindInt && r.Get(od).Uint() == m.Bits
		case od.Name() == "long_value":
			ok = m.Kind == KindLong && r.Get(od).Uint() == m.Bits
		case od.Name() == "float_value":
			ok = m.Kind == KindFloat && sameFloat(r.Get(od).Float(), float64(math.Float32frombits(uint32(m.Bits))))
		case od.Name() == "double_value":
			ok = m.Kind == KindDouble && sameFloat(r.Get(od).Float(), math.Float64frombits(m.Bits))
		case od.Name() == "boolean_value":
			ok = m.Kind == KindBool && r.Get(od).Bool() == (m.Bits == 1)
		case od.Name() == "string_value":
			ok = m.Kind == KindString && r.Get(od).String() == string(m.Raw)
		default:
			ok = bytes.Equal(r.Get(od).Bytes(), m.Raw)
		}
		if !ok {
			t.Errorf("metric %d value differs: %v / %+v", i, r, m)
		}
	}
}

// sameFloat reports whether a and b are equal or both NaN.
func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// benchPayload is an NDATA of n Double metrics by alias, each with a
// timestamp, as an edge node publishing on change sends.
func benchPayload(n int) []byte {
	p := Payload{Timestamp: 1700000000000, HasSeq: true, Seq: 7}
	for i := range n {
		p.Metrics = append(p.Metrics, Metric{Alias: uint64(i + 1), HasAlias: true, Timestamp: 1700000000000 + uint64(i),
			Datatype: TypeDouble, Kind: KindDouble, Bits: math.Float64bits(float64(i) * 1.25)})
	}
	return Append(nil, &p)
}

// The decode rate, in metrics per second on one core, against the
// official protobuf runtime (dynamicpb) decoding the same bytes:
//
//	go test -run '^$' -bench 'Decode|HostHandle' -benchtime 2s -count 5 -cpu 1 ./internal/sparkplug/
func BenchmarkDecode(b *testing.B) {
	msg := benchPayload(100)
	var p Payload
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if err := Decode(msg, &p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "metrics/s")
}

func BenchmarkDecodeReferenceDynamicpb(b *testing.B) {
	msg := benchPayload(100)
	md := referenceDescriptor(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		m := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(msg, m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "metrics/s")
}

// BenchmarkHostHandle is the host's whole work per message but the store
// write: decode, sequence check, alias lookup, conversion, the points.
func BenchmarkHostHandle(b *testing.B) {
	n, _ := newNamer(DefaultTagTemplate)
	h := newHostState(n, 0, &HostStats{}, nil)
	h.log = discardLogger()
	birth := Payload{HasSeq: true, Seq: 0}
	for i := range 100 {
		birth.Metrics = append(birth.Metrics, Metric{Name: []byte("m" + string(rune('a'+i%26)) + string(rune('a'+i/26))), Alias: uint64(i + 1), HasAlias: true,
			Datatype: TypeDouble, Kind: KindDouble})
	}
	now := timeUnix()
	h.handle("spBv1.0/G/NBIRTH/n", Append(nil, &birth), now)
	msg := benchPayload(100)
	node := h.nodes["G/n"]
	b.ReportAllocs()
	for b.Loop() {
		node.seq = 6 // the payload's seq is 7
		pts, _ := h.handle("spBv1.0/G/NDATA/n", msg, now)
		if len(pts) != 100 {
			b.Fatalf("%d points", len(pts))
		}
	}
	b.ReportMetric(float64(b.N)*100/b.Elapsed().Seconds(), "metrics/s")
}
