package events

import (
	"reflect"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// The protobuf runtime's view of Hamustro's payload.proto: the reference
// the hand-written decoders (protobuf and JSON) are checked against.

// hamustroFile describes payload.proto.
var hamustroFile = func() protoreflect.FileDescriptor {
	str := func(name string, num int32, label descriptorpb.FieldDescriptorProto_Label) *descriptorpb.FieldDescriptorProto {
		return &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(num), Label: label.Enum(),
			Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()}
	}
	typed := func(f *descriptorpb.FieldDescriptorProto, t descriptorpb.FieldDescriptorProto_Type, typeName string) *descriptorpb.FieldDescriptorProto {
		f.Type = t.Enum()
		if typeName != "" {
			f.TypeName = proto.String(typeName)
		}
		return f
	}
	req, opt, rep := descriptorpb.FieldDescriptorProto_LABEL_REQUIRED, descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL, descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	var envValues []*descriptorpb.EnumValueDescriptorProto
	for i, n := range hamEnvs {
		envValues = append(envValues, &descriptorpb.EnumValueDescriptorProto{Name: proto.String(n), Number: proto.Int32(int32(i))})
	}
	coll := []*descriptorpb.FieldDescriptorProto{
		str("device_id", 1, req), str("client_id", 2, req), str("session", 3, req), str("system_version", 4, req),
		str("product_version", 5, req), typed(str("env", 6, req), descriptorpb.FieldDescriptorProto_TYPE_ENUM, ".Environment"),
	}
	for n := 7; n <= 14; n++ {
		coll = append(coll, str(hamCollectionStr[n], int32(n), opt))
	}
	coll = append(coll, typed(str("payloads", 15, rep), descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".Payload"))
	pay := []*descriptorpb.FieldDescriptorProto{
		typed(str("at", 1, req), descriptorpb.FieldDescriptorProto_TYPE_UINT64, ""),
		str("event", 2, req),
		typed(str("nr", 3, req), descriptorpb.FieldDescriptorProto_TYPE_UINT32, ""),
	}
	for n := 4; n <= 8; n++ {
		pay = append(pay, str(hamPayloadStr[n], int32(n), opt))
	}
	pay = append(pay, typed(str("parameters", 9, rep), descriptorpb.FieldDescriptorProto_TYPE_MESSAGE, ".Parameter"))
	fd := &descriptorpb.FileDescriptorProto{
		Name:     proto.String("hamustro/payload.proto"),
		Syntax:   proto.String("proto2"),
		EnumType: []*descriptorpb.EnumDescriptorProto{{Name: proto.String("Environment"), Value: envValues}},
		MessageType: []*descriptorpb.DescriptorProto{
			{Name: proto.String("Payload"), Field: pay},
			{Name: proto.String("Collection"), Field: coll},
			{Name: proto.String("Parameter"), Field: []*descriptorpb.FieldDescriptorProto{str("name", 1, req), str("value", 2, req)}},
		},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		panic("hamustro descriptor: " + err.Error())
	}
	return f
}()

// hamustroCollection is the Collection message descriptor.
var hamustroCollection = hamustroFile.Messages().ByName("Collection")

// hamFromMessage converts a Collection message to a hamCollection.
func hamFromMessage(m protoreflect.Message) *hamCollection {
	c := &hamCollection{}
	fields := m.Descriptor().Fields()
	for n := protowire.Number(1); n <= 15; n++ {
		fd := fields.ByNumber(n)
		if !m.Has(fd) {
			continue
		}
		c.has |= 1 << n
		switch n {
		case 6:
			c.env = int32(m.Get(fd).Enum())
		case 15:
			l := m.Get(fd).List()
			for i := range l.Len() {
				c.payloads = append(c.payloads, hamPayloadFromMessage(l.Get(i).Message()))
			}
		default:
			c.str[n] = m.Get(fd).String()
		}
	}
	return c
}

func hamPayloadFromMessage(m protoreflect.Message) hamPayload {
	var p hamPayload
	fields := m.Descriptor().Fields()
	for n := protowire.Number(1); n <= 9; n++ {
		fd := fields.ByNumber(n)
		if !m.Has(fd) {
			continue
		}
		p.has |= 1 << n
		switch n {
		case 1:
			p.at = m.Get(fd).Uint()
		case 2:
			p.event = m.Get(fd).String()
		case 3:
			p.nr = uint32(m.Get(fd).Uint())
		case 9:
			l := m.Get(fd).List()
			for i := range l.Len() {
				pm := l.Get(i).Message()
				pf := pm.Descriptor().Fields()
				var q hamParam
				for k := protowire.Number(1); k <= 2; k++ {
					if f := pf.ByNumber(k); pm.Has(f) {
						q.has |= 1 << k
						if k == 1 {
							q.name = pm.Get(f).String()
						} else {
							q.value = pm.Get(f).String()
						}
					}
				}
				p.params = append(p.params, q)
			}
		default:
			p.str[n] = m.Get(fd).String()
		}
	}
	return p
}

// protojsonHamustro decodes the JSON form with protojson, as Hamustro's
// jsonpb did: the reference for decodeHamustroJSON.
func protojsonHamustro(b []byte) (*hamCollection, error) {
	m := dynamicpb.NewMessage(hamustroCollection)
	if err := (protojson.UnmarshalOptions{AllowPartial: true}).Unmarshal(b, m); err != nil {
		return nil, err
	}
	return hamFromMessage(m), nil
}

// hamJSONCases are JSON collections on the edges of protojson's rules.
var hamJSONCases = []string{
	`{}`, ` { } `, `{"device_id":"d"}`, `{"deviceId":"d"}`, `{"device_id":"d","deviceId":"e"}`,
	`{"device_id":null,"deviceId":"e"}`, `{"device_id":null}`, `{"DeviceId":"d"}`, `{"device_Id":"d"}`,
	`{"productGitHash":"x","product_git_hash":"y"}`, `{"systemLanguage":"fi"}`, `{"extra":1}`,
	`{"env":"BETA"}`, `{"env":"beta"}`, `{"env":4}`, `{"env":-3}`, `{"env":2147483648}`, `{"env":"4"}`,
	`{"env":4.0}`, `{"env":4e0}`, `{"env":null}`, `{"env":true}`,
	`{"payloads":[]}`, `{"payloads":null}`, `{"payloads":[null]}`, `{"payloads":[{}]}`, `{"payloads":{}}`,
	`{"payloads":[{"at":1},{"at":"2"}]}`, `{"payloads":[{"at":" 2"}]}`, `{"payloads":[{"at":"2 "}]}`,
	`{"payloads":[{"at":1e3}]}`, `{"payloads":[{"at":1.5e1}]}`, `{"payloads":[{"at":1.5}]}`,
	`{"payloads":[{"at":-0}]}`, `{"payloads":[{"at":-1}]}`, `{"payloads":[{"at":18446744073709551615}]}`,
	`{"payloads":[{"at":18446744073709551616}]}`, `{"payloads":[{"at":1e}]}`, `{"payloads":[{"at":1e+}]}`,
	`{"payloads":[{"at":"1e"}]}`, `{"payloads":[{"at":01}]}`, `{"payloads":[{"at":1E2}]}`, `{"payloads":[{"at":100e-2}]}`,
	`{"payloads":[{"at":"1e2"}]}`, `{"payloads":[{"at":"\"1\""}]}`, `{"payloads":[{"at":""}]}`, `{"payloads":[{"at":1x}]}`,
	`{"payloads":[{"nr":4294967295}]}`, `{"payloads":[{"nr":4294967296}]}`, `{"payloads":[{"nr":"7"}]}`,
	`{"payloads":[{"event":"e","parameters":[{"name":"k","value":"v"},{"name":"k2"}]}]}`,
	`{"payloads":[{"parameters":[]}]}`, `{"payloads":[{"parameters":[{"name":null}]}]}`,
	`{"payloads":[{"tenantId":"t","user_id":"u","ip":"1.2.3.4","country":"FI","timezone":"UTC"}]}`,
	`{"payloads":[{"at":1,}]}`, `{"payloads":[{"at":1}],}`, `{"payloads":[{"at":1}]`, `{"a"}`, `[]`, ``, `null`,
	`{"device_id":"\u00e9\ud83d\ude00\/\b\f\n\r\t\"\\"}`, `{"device_id":"\ud83d"}`, `{"device_id":"\ude00"}`,
	`{"device_id":"\ud83dx"}`, `{"device_id":"\ud83d\u0041"}`, `{"device_id":"\u12"}`, `{"device_id":"\x"}`,
	"{\"device_id\":\"\xff\"}", "{\"device_id\":\"a\tb\"}", `{"device_id":"d"} x`, `{"device_id":"d"}{}`,
	`{"device_id":nullx}`, `{"device_id":1}`, `{"session":"s" , "env" : 1 }`,
}

func TestHamustroJSONMatchesProtojson(t *testing.T) {
	for _, c := range hamJSONCases {
		got, err := decodeHamustroJSON([]byte(c))
		want, werr := protojsonHamustro([]byte(c))
		if (err == nil) != (werr == nil) {
			t.Errorf("%s: decoder error %v, protojson error %v", c, err, werr)
			continue
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoder and protojson differ:\n%+v\n%+v", c, got, want)
		}
	}
}

// FuzzHamustroJSON checks the hand-written JSON decoder against
// protojson: both accept the same documents and find the same fields.
//
// Run with: go test -run '^$' -fuzz FuzzHamustroJSON ./internal/events/
func FuzzHamustroJSON(f *testing.F) {
	for _, c := range hamJSONCases {
		f.Add([]byte(c))
	}
	for _, useProto := range []bool{false, true} {
		js, err := protojson.MarshalOptions{UseProtoNames: useProto}.Marshal(hamMessage("d", "c", map[string]string{"browser": "b"}, 3,
			testPayload{at: 1700000000, event: "e.x", nr: 7, str: map[string]string{"ip": "1.2.3.4"}, params: [][2]string{{"k", "v"}}}))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(js)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeHamustroJSON(b)
		want, werr := protojsonHamustro(b)
		if (err == nil) != (werr == nil) {
			t.Fatalf("decoder error %v, protojson error %v", err, werr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decoder and protojson differ:\n%+v\n%+v", got, want)
		}
	})
}
