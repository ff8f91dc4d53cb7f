package events

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// testPayload is one Hamustro payload for hamMessage.
type testPayload struct {
	at     uint64
	event  string
	nr     uint32
	str    map[string]string // timezone, tenant_id, user_id, ip, country
	params [][2]string
}

// hamMessage builds a real Collection message (with the protobuf
// runtime, not with the decoder under test).
func hamMessage(device, client string, extra map[string]string, env int32, payloads ...testPayload) *dynamicpb.Message {
	m := dynamicpb.NewMessage(hamustroCollection)
	f := hamustroCollection.Fields()
	set := func(m *dynamicpb.Message, fd protoreflect.FieldDescriptor, v protoreflect.Value) { m.Set(fd, v) }
	sv, pv := "14.1", "2.3.0"
	set(m, f.ByName("device_id"), protoreflect.ValueOfString(device))
	set(m, f.ByName("client_id"), protoreflect.ValueOfString(client))
	set(m, f.ByName("system_version"), protoreflect.ValueOfString(sv))
	set(m, f.ByName("product_version"), protoreflect.ValueOfString(pv))
	set(m, f.ByName("session"), protoreflect.ValueOfString(hamustroSession(device, client, sv, pv)))
	set(m, f.ByName("env"), protoreflect.ValueOfEnum(protoreflect.EnumNumber(env)))
	for k, v := range extra {
		set(m, f.ByName(protoreflect.Name(k)), protoreflect.ValueOfString(v))
	}
	list := m.Mutable(f.ByName("payloads")).List()
	for _, p := range payloads {
		pm := list.NewElement().Message()
		pf := pm.Descriptor().Fields()
		pm.Set(pf.ByName("at"), protoreflect.ValueOfUint64(p.at))
		pm.Set(pf.ByName("event"), protoreflect.ValueOfString(p.event))
		pm.Set(pf.ByName("nr"), protoreflect.ValueOfUint32(p.nr))
		for k, v := range p.str {
			pm.Set(pf.ByName(protoreflect.Name(k)), protoreflect.ValueOfString(v))
		}
		params := pm.Mutable(pf.ByName("parameters")).List()
		for _, kv := range p.params {
			q := params.NewElement().Message()
			q.Set(q.Descriptor().Fields().ByName("name"), protoreflect.ValueOfString(kv[0]))
			q.Set(q.Descriptor().Fields().ByName("value"), protoreflect.ValueOfString(kv[1]))
			params.Append(protoreflect.ValueOfMessage(q))
		}
		list.Append(protoreflect.ValueOfMessage(pm))
	}
	return m
}

func postTrack(t *testing.T, c *Collector, ctype string, body []byte, hdr map[string]string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("POST", "/api/v1/track", bytes.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, req)
	return rec.Code, strings.TrimSpace(rec.Body.String())
}

func TestTrackProtobufAndJSON(t *testing.T) {
	fsys := vfs.NewFaultFS()
	c, err := New("/data", testOptions(fsys), nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := hamMessage("dev1", "cli1", map[string]string{"system": "iOS", "browser": "Safari"}, 4,
		testPayload{at: 1700000000, event: "Client.CreateUser", nr: 1,
			str: map[string]string{"timezone": "+01:00", "user_id": "u7", "ip": "10.0.0.1"}},
		testPayload{at: 1700000005, event: "Client.Open", nr: 2,
			params: [][2]string{{"screen", "main"}, {"from", "push <x>"}}},
	)
	pb, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := postTrack(t, c, "application/protobuf", pb, nil); code != 200 || body != `{"accepted":2,"duplicates":0}` {
		t.Fatalf("protobuf: %d %s", code, body)
	}
	// The JSON form of the same collection (field names as in the .proto,
	// then in lowerCamelCase) names the same payloads: all duplicates.
	for _, useProto := range []bool{true, false} {
		js, err := protojson.MarshalOptions{UseProtoNames: useProto}.Marshal(msg)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := postTrack(t, c, "application/json; charset=utf-8", js, nil); code != 200 || body != `{"accepted":0,"duplicates":2}` {
			t.Fatalf("json (proto names %v): %d %s\n%s", useProto, code, body, js)
		}
	}
	// Hand-written JSON with a string "at", a numeric enum and a new nr.
	js := `{"device_id":"dev1","client_id":"cli1","session":"` + hamustroSession("dev1", "cli1", "14.1", "2.3.0") +
		`","system_version":"14.1","product_version":"2.3.0","env":1,"payloads":[{"at":"1700000009","event":"x","nr":3}]}`
	if code, body := postTrack(t, c, "application/json", []byte(js), nil); code != 200 || body != `{"accepted":1,"duplicates":0}` {
		t.Fatalf("hand-written json: %d %s", code, body)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	got := sinkEvents(t, fsys, "/data")
	if len(got) != 3 {
		t.Fatalf("sink has %d events, want 3: %+v", len(got), got)
	}
	want0 := Event{ID: got[0].ID, Time: 1700000000000, Name: "Client.CreateUser",
		Source: Source{Device: "dev1", Client: "cli1", Session: hamustroSession("dev1", "cli1", "14.1", "2.3.0")},
		Num:    map[string]float64{"nr": 1},
		Str: map[string]string{"env": "BETA", "system_version": "14.1", "product_version": "2.3.0", "system": "iOS",
			"browser": "Safari", "timezone": "+01:00", "user_id": "u7", "ip": "10.0.0.1"}}
	if !reflect.DeepEqual(got[0], want0) || len(got[0].ID) != 32 {
		t.Errorf("event 0:\ngot  %+v\nwant %+v", got[0], want0)
	}
	if p := got[1].Str["parameters"]; p != `{"from":"push \u003cx\u003e","screen":"main"}` {
		t.Errorf("parameters: %q", p)
	}
	if got[2].Str["env"] != "GENERAL_AVAILABILITY" || got[2].Num["nr"] != 3 || got[2].Time != 1700000009000 {
		t.Errorf("event 2: %+v", got[2])
	}
}

func TestTrackErrors(t *testing.T) {
	c, err := New("/data", testOptions(vfs.NewFaultFS()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	good := hamMessage("d", "c", nil, 0, testPayload{at: 1, event: "e", nr: 1})
	badSession := hamMessage("d", "c", nil, 0, testPayload{at: 1, event: "e", nr: 1})
	badSession.Set(hamustroCollection.Fields().ByName("session"), protoreflect.ValueOfString("nope"))
	badName := hamMessage("d", "c", nil, 0, testPayload{at: 1, event: "bad name", nr: 1})
	zeroAt := hamMessage("d", "c", nil, 0, testPayload{at: 0, event: "e", nr: 1})
	empty := hamMessage("d", "c", nil, 0)
	noDevice := hamMessage("d", "c", nil, 0, testPayload{at: 1, event: "e", nr: 1})
	noDevice.Clear(hamustroCollection.Fields().ByName("device_id"))
	marshal := func(m *dynamicpb.Message) []byte {
		b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name  string
		ctype string
		body  []byte
		code  int
		resp  string
	}{
		{"no content type", "", marshal(good), 415, ""},
		{"text", "text/plain", marshal(good), 415, ""},
		{"bad session", "application/protobuf", marshal(badSession), 400, "session"},
		{"bad name", "application/x-protobuf", marshal(badName), 400, "field name"},
		{"zero at", "application/protobuf", marshal(zeroAt), 400, "field at"},
		{"no device", "application/protobuf", marshal(noDevice), 400, "device_id: is required"},
		{"truncated", "application/protobuf", marshal(good)[:10], 400, "decode collection"},
		{"unknown json field", "application/json", []byte(`{"nope":1}`), 400, "decode collection"},
		{"no payloads", "application/protobuf", marshal(empty), 204, ""},
		{"good", "application/protobuf", marshal(good), 200, `"accepted":1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := postTrack(t, c, tt.ctype, tt.body, nil)
			if code != tt.code || !strings.Contains(body, tt.resp) {
				t.Errorf("got %d %s, want %d ...%s...", code, body, tt.code, tt.resp)
			}
		})
	}
}

func TestTrackSignature(t *testing.T) {
	secret := []byte("ultrasafesecret")
	now := time.Unix(1700000000, 0)
	opts := testOptions(vfs.NewFaultFS())
	opts.Secret = secret
	opts.Now = func() time.Time { return now }
	c, err := New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body, err := proto.Marshal(hamMessage("d", "c", nil, 0, testPayload{at: 1, event: "e", nr: 1}))
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(now.Unix(), 10)
	old := strconv.FormatInt(now.Unix()-301, 10)
	hdr := func(ts, sig string) map[string]string {
		return map[string]string{HamustroTimeHeader: ts, HamustroSignatureHeader: sig}
	}
	tests := []struct {
		name string
		hdr  map[string]string
		body []byte
		code int
		resp string
	}{
		{"good", hdr(ts, HamustroSign(secret, ts, body)), body, 200, `{"accepted":1,"duplicates":0}`},
		{"replay", hdr(ts, HamustroSign(secret, ts, body)), body, 200, `{"accepted":0,"duplicates":1}`},
		{"other secret", hdr(ts, HamustroSign([]byte("x"), ts, body)), body, 401, ""},
		{"other body", hdr(ts, HamustroSign(secret, ts, body)), append(bytes.Clone(body), 0x08, 0x01), 401, ""},
		{"too old", hdr(old, HamustroSign(secret, old, body)), body, 401, ""},
		{"iso time", hdr("2023-11-14T22:13:20", HamustroSign(secret, "2023-11-14T22:13:20", body)), body, 401, ""},
		{"signature without time", map[string]string{HamustroSignatureHeader: HamustroSign(secret, ts, body)}, body, 401, ""},
		{"time without signature", map[string]string{HamustroTimeHeader: ts}, body, 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, resp := postTrack(t, c, "application/protobuf", tt.body, tt.hdr)
			if code != tt.code || tt.resp != "" && resp != tt.resp {
				t.Errorf("got %d %s, want %d %s", code, resp, tt.code, tt.resp)
			}
		})
	}
}

// TestHamustroSignKnown checks HamustroSign against a value computed by
// hand from Hamustro's definition:
// base64(sha256("1454514489|" + md5hex("hello") + "|ultrasafesecret")).
func TestHamustroSignKnown(t *testing.T) {
	// md5("hello") = 5d41402abc4b2a76b9719d911017c592
	got := HamustroSign([]byte("ultrasafesecret"), "1454514489", []byte("hello"))
	h := sha256Base64("1454514489|5d41402abc4b2a76b9719d911017c592|ultrasafesecret")
	if got != h {
		t.Errorf("got %s, want %s", got, h)
	}
}

// FuzzHamustroProto checks the hand-written protobuf decoder against the
// protobuf runtime: both accept the same wire bytes and find the same
// fields, and an accepted collection's events encode canonically.
//
// Run with: go test -run '^$' -fuzz FuzzHamustroProto ./internal/events/
func FuzzHamustroProto(f *testing.F) {
	seed, _ := proto.Marshal(hamMessage("d", "c", map[string]string{"browser": "b"}, 3,
		testPayload{at: 1700000000, event: "e.x", nr: 7, str: map[string]string{"ip": "1.2.3.4"}, params: [][2]string{{"k", "v"}}},
		testPayload{at: 2, event: "f", nr: 8}))
	f.Add(seed)
	f.Add([]byte{})
	f.Add(protowire.AppendTag(nil, 6, protowire.VarintType))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeHamustroProto(b)
		m := dynamicpb.NewMessage(hamustroCollection)
		oerr := proto.UnmarshalOptions{AllowPartial: true}.Unmarshal(b, m)
		if (err == nil) != (oerr == nil) {
			t.Fatalf("decoder error %v, protobuf runtime error %v", err, oerr)
		}
		if err != nil {
			return
		}
		if want := hamFromMessage(m); !reflect.DeepEqual(got, want) {
			t.Fatalf("decoder and protobuf runtime differ:\n%+v\n%+v", got, want)
		}
		evs, err := got.events(nil, 100)
		if err != nil {
			return
		}
		for i := range evs {
			line := AppendJSON(nil, &evs[i])
			again, err := DecodeBytes(nil, line, 1, 1)
			if err != nil || !bytes.Equal(AppendJSON(nil, &again[0]), line) {
				t.Fatalf("event %d does not round trip: %v\n%s", i, err, line)
			}
		}
	})
}

func sha256Base64(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// BenchmarkHamustroProto decodes and converts a 25-payload collection
// (Hamustro's stress-test size).
//
// Run with: go test -run '^$' -bench HamustroProto ./internal/events/
func BenchmarkHamustroProto(b *testing.B) {
	var ps []testPayload
	for i := range 25 {
		ps = append(ps, testPayload{at: 1700000000 + uint64(i), event: "Client.Click", nr: uint32(i),
			str: map[string]string{"user_id": "u1", "ip": "10.0.0.1"}, params: [][2]string{{"screen", "main"}}})
	}
	body, err := proto.Marshal(hamMessage("device-0001", "client-ios", map[string]string{"system": "iOS"}, 0, ps...))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := decodeHamustroProto(body)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.events(nil, 100); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*25)/b.Elapsed().Seconds(), "events/s")
}
