package events

import (
	"errors"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	const now = 1700000000000
	tests := []struct {
		name  string
		body  string
		n     int    // events decoded
		index int    // ValidationError.Index when field or msg is set
		field string // ValidationError.Field
		msg   string // part of the error
	}{
		{name: "one", body: `{"name":"boot","id":"a"}`, n: 1},
		{name: "array", body: ` [{"name":"a"},{"name":"b","time":5}] `, n: 2},
		{name: "ndjson", body: "{\"name\":\"a\"}\n{\"name\":\"b\"}\n\n{\"name\":\"c\"}\n", n: 3},
		{name: "full", body: `{"id":"x1","time":17,"name":"door.open","source":{"device":"d","client":"c","session":"s"},"num":{"v":1.5},"str":{"who":"bob"}}`, n: 1},
		{name: "empty", body: "  ", msg: "no events"},
		{name: "empty array", body: "[]", msg: "no events"},
		{name: "not json", body: "tag,1,2", msg: "must start"},
		{name: "missing name", body: `[{"name":"a"},{"id":"x"}]`, index: 1, field: "name", msg: "required"},
		{name: "bad name", body: `{"name":"a b"}`, field: "name", msg: "not a letter"},
		{name: "dot name", body: `{"name":".a"}`, field: "name", msg: "start or end"},
		{name: "time string", body: `[{"name":"a"},{"name":"a"},{"name":"a","time":"x"}]`, index: 2, field: "time", msg: "integer"},
		{name: "time float", body: `{"name":"a","time":1.5}`, field: "time", msg: "integer"},
		{name: "time negative", body: `{"name":"a","time":-1}`, field: "time", msg: "positive"},
		{name: "num string", body: `{"name":"a","num":{"k":"v"}}`, field: "num", msg: "number"},
		{name: "str number", body: `{"name":"a","str":{"k":1}}`, field: "str", msg: "string"},
		{name: "unknown field", body: "{\"name\":\"a\"}\n{\"name\":\"a\",\"colour\":1}", index: 1, field: "colour", msg: "unknown"},
		{name: "source control", body: `{"name":"a","source":{"device":"a\u0001"}}`, field: "source.device", msg: "control"},
		{name: "id long", body: `{"name":"a","id":"` + strings.Repeat("x", 65) + `"}`, field: "id", msg: "longer"},
		{name: "truncated", body: `[{"name":"a"},{"name":`, index: 1, msg: "end of body"},
		{name: "after array", body: `[{"name":"a"}] {}`, index: 1, msg: "after the array"},
		{name: "too many", body: strings.Repeat(`{"name":"a"}`, 4), index: 3, msg: "more than 3"},
		{name: "syntax", body: `{"name":"a"} x`, index: 1, msg: "bad JSON"},
	}
	decoders := map[string]func(string) ([]Event, error){
		"Decode":      func(b string) ([]Event, error) { return Decode(nil, strings.NewReader(b), now, 3) },
		"DecodeBytes": func(b string) ([]Event, error) { return DecodeBytes(nil, []byte(b), now, 3) },
	}
	for _, tt := range tests {
		for dname, decode := range decoders {
			t.Run(tt.name+"/"+dname, func(t *testing.T) {
				evs, err := decode(tt.body)
				if tt.msg == "" {
					if err != nil {
						t.Fatalf("Decode: %v", err)
					}
					if len(evs) != tt.n {
						t.Fatalf("got %d events, want %d", len(evs), tt.n)
					}
					for _, ev := range evs {
						if ev.ID == "" || ev.Time <= 0 {
							t.Errorf("id or time not filled: %+v", ev)
						}
					}
					return
				}
				var ve *ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("got %v, want a ValidationError", err)
				}
				if ve.Index != tt.index || ve.Field != tt.field || !strings.Contains(ve.Error(), tt.msg) {
					t.Errorf("got index %d field %q %q, want %d %q containing %q", ve.Index, ve.Field, ve.Error(), tt.index, tt.field, tt.msg)
				}
			})
		}
	}
}

func TestDecodeDefaults(t *testing.T) {
	evs, err := Decode(nil, strings.NewReader(`{"name":"a"}`), 42, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := evs[0]; got.Time != 42 || len(got.ID) != 32 {
		t.Errorf("got time %d id %q, want 42 and 32 hex digits", got.Time, got.ID)
	}
}

func TestAppendJSONRoundTrip(t *testing.T) {
	const body = `{"id":"x1","time":17,"name":"door.open","source":{"device":"d<","session":"s"},"num":{"b":2,"a":-1.25e-7},"str":{"who":"bob\n\"q\""}}`
	evs, err := Decode(nil, strings.NewReader(body), 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	line := AppendJSON(nil, &evs[0])
	const want = `{"id":"x1","time":17,"name":"door.open","source":{"device":"d\u003c","session":"s"},"num":{"a":-1.25e-07,"b":2},"str":{"who":"bob\n\"q\""}}` + "\n"
	if string(line) != want {
		t.Fatalf("got  %s\nwant %s", line, want)
	}
	again, err := Decode(nil, strings.NewReader(string(line)), 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendJSON(nil, &again[0]); string(got) != want {
		t.Errorf("second round: got %s", got)
	}
}
