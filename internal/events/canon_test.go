package events

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// canonTests are edge cases of the canonical decoder: fast says whether
// it takes the body itself (else batch.decode falls back to the slow
// path), bad whether Decode refuses the body. checkCanon compares each
// with Decode and AppendJSON; FuzzCanon starts from them.
var canonTests = []struct {
	name string
	body string
	fast bool
	bad  bool
}{
	{name: "plain", body: `{"id":"a1","time":1700000000000,"name":"app.start","source":{"device":"pi-7","client":"android/3.2","session":"s-19"},"num":{"rssi":-67,"battery":0.82},"str":{"os":"14","lang":"hu"}}`, fast: true},
	{name: "array", body: ` [ {"name":"a"} , {"name":"b","time":5} ] `, fast: true},
	{name: "ndjson", body: "{\"name\":\"a\"}\n{\"name\":\"b\"}\r\n\n{\"name\":\"c\"}\n", fast: true},
	{name: "objects back to back", body: `{"name":"a"}{"name":"b"}`, fast: true},
	{name: "time absent", body: `{"name":"a"}`, fast: true},
	{name: "time 0", body: `{"name":"a","time":0}`, bad: true},
	{name: "time negative", body: `{"name":"a","time":-5}`, bad: true},
	{name: "time -0", body: `{"name":"a","time":-0}`, bad: true},
	{name: "time max", body: `{"name":"a","time":9223372036854775807}`, fast: true},
	{name: "time overflow", body: `{"name":"a","time":9223372036854775808}`, bad: true},
	{name: "time 20 digits", body: `{"name":"a","time":10000000000000000000}`, bad: true},
	{name: "time float", body: `{"name":"a","time":1.0}`, bad: true},
	{name: "time exponent", body: `{"name":"a","time":1e3}`, bad: true},
	{name: "time null", body: `{"name":"a","time":null}`},
	{name: "id absent", body: `{"name":"a","num":{"x":1}}`, fast: true},
	{name: "id empty", body: `{"id":"","name":"a"}`, fast: true},
	{name: "id 64 bytes", body: `{"id":"` + strings.Repeat("i", 64) + `","name":"a"}`, fast: true},
	{name: "id 65 bytes", body: `{"id":"` + strings.Repeat("i", 65) + `","name":"a"}`, bad: true},
	{name: "id DEL", body: "{\"id\":\"a\x7f\",\"name\":\"a\"}", bad: true},
	{name: "id markup", body: `{"id":"<a&b>","name":"a"}`, fast: true},
	{name: "ids repeated", body: `[{"id":"x","name":"a"},{"name":"b"},{"id":"x","name":"c"},{"id":"y","name":"c"}]`, fast: true},
	{name: "name missing", body: `{"id":"x"}`, bad: true},
	{name: "name empty", body: `{"name":""}`, bad: true},
	{name: "name bad byte", body: `{"name":"a b"}`, bad: true},
	{name: "name dot", body: `{"name":"a."}`, bad: true},
	{name: "name unicode", body: `{"name":"é"}`, bad: true},
	{name: "name 128", body: `{"name":"` + strings.Repeat("n", 128) + `"}`, fast: true},
	{name: "name 129", body: `{"name":"` + strings.Repeat("n", 129) + `"}`, bad: true},
	{name: "duplicate key", body: `{"name":"a","name":"b"}`},
	{name: "duplicate num", body: `{"name":"a","num":{"x":1},"num":{"y":2}}`},
	{name: "duplicate num key", body: `{"name":"a","num":{"x":1,"x":2}}`},
	{name: "duplicate str key", body: `{"name":"a","str":{"k":"1","j":"0","k":"2"}}`},
	{name: "duplicate source key", body: `{"name":"a","source":{"device":"1","device":"2"}}`},
	{name: "same key num and str", body: `{"name":"a","num":{"k":1},"str":{"k":"v"}}`, fast: true},
	{name: "upper-case key", body: `{"Name":"a"}`},
	{name: "unknown key", body: `{"name":"a","colour":"red"}`, bad: true},
	{name: "unknown source key", body: `{"name":"a","source":{"host":"h"}}`, bad: true},
	{name: "escape", body: `{"name":"a","str":{"k":"\u00e9\n"}}`},
	{name: "escaped key", body: `{"n\u0061me":"a"}`},
	{name: "null str", body: `{"name":"a","str":null}`},
	{name: "null value", body: `{"name":"a","str":{"k":null}}`},
	{name: "unicode", body: `{"name":"a","source":{"device":"föhn"},"str":{"város":"Győr 😀","sep":"a` + "\u2028" + `b"}}`, fast: true},
	{name: "invalid UTF-8", body: "{\"name\":\"a\",\"str\":{\"k\":\"\xff\"}}"},
	{name: "markup", body: `{"name":"a","str":{"<k>":"a&b<c>"}}`, fast: true},
	{name: "DEL in value", body: "{\"name\":\"a\",\"str\":{\"k\":\"\x7f\"}}", fast: true},
	{name: "control byte", body: "{\"name\":\"a\",\"str\":{\"k\":\"\x01\"}}", bad: true},
	{name: "big numbers", body: `{"name":"a","num":{"a":12345678901234567890,"b":-999999999999999,"c":1000000000000000,"d":1e21,"e":1E+20,"f":123456789012345678901234567890}}`, fast: true},
	{name: "6 and 7 digits", body: `{"name":"a","num":{"a":999999,"b":-999999,"c":1000000,"d":-1000000,"e":100000,"f":1200000}}`, fast: true},
	{name: "small numbers", body: `{"name":"a","num":{"a":1e-400,"b":-1.25e-7,"c":0.1,"d":5e-324,"e":0.30000000000000004}}`, fast: true},
	{name: "1e400", body: `{"name":"a","num":{"x":1e400}}`, bad: true},
	{name: "-1e400", body: `{"name":"a","num":{"x":-1e400}}`, bad: true},
	{name: "-0", body: `{"name":"a","num":{"x":-0,"y":-0.0,"z":0e5}}`, fast: true},
	{name: "leading zero", body: `{"name":"a","num":{"x":01}}`, bad: true},
	{name: "number string", body: `{"name":"a","num":{"x":"1"}}`, bad: true},
	{name: "string number", body: `{"name":"a","str":{"x":1}}`, bad: true},
	{name: "empty attrs", body: `{"name":"a","num":{},"str":{},"source":{}}`, fast: true},
	{name: "empty source fields", body: `{"name":"a","source":{"device":"","session":"s"}}`, fast: true},
	{name: "empty key", body: `{"name":"a","num":{"":1}}`, bad: true},
	{name: "key 128", body: `{"name":"a","str":{"` + strings.Repeat("k", 128) + `":"v"}}`, fast: true},
	{name: "key 129", body: `{"name":"a","str":{"` + strings.Repeat("k", 129) + `":"v"}}`, bad: true},
	{name: "value 4096", body: `{"name":"a","str":{"k":"` + strings.Repeat("v", 4096) + `"}}`, fast: true},
	{name: "value 4097", body: `{"name":"a","str":{"k":"` + strings.Repeat("v", 4097) + `"}}`, bad: true},
	{name: "source 257", body: `{"name":"a","source":{"client":"` + strings.Repeat("c", 257) + `"}}`, bad: true},
	{name: "64 attrs", body: `{"name":"a","num":{` + attrList(40, "%d") + `},"str":{` + attrList(24, `"%d"`) + `}}`, fast: true},
	{name: "65 attrs", body: `{"name":"a","num":{` + attrList(40, "%d") + `},"str":{` + attrList(25, `"%d"`) + `}}`, bad: true},
	{name: "65 attrs with a repeated key", body: `{"name":"a","num":{"k0":1,` + attrList(64, "%d") + `}}`},
	{name: "nested junk", body: `{"name":"a","num":{"x":{"y":[1,2,{"z":null}]}}}`, bad: true},
	{name: "array in event", body: `{"name":["a"]}`, bad: true},
	{name: "true", body: `{"name":"a","num":{"x":true}}`, bad: true},
	{name: "nested array", body: `[[{"name":"a"}]]`, bad: true},
	{name: "empty", body: " \n", bad: true},
	{name: "empty array", body: "[]", bad: true},
	{name: "empty object", body: "{}", bad: true},
	{name: "trailing comma", body: `[{"name":"a"},]`, bad: true},
	{name: "trailing comma in object", body: `{"name":"a",}`, bad: true},
	{name: "after array", body: `[{"name":"a"}] {"name":"b"}`, bad: true},
	{name: "junk after", body: `{"name":"a"} x`, bad: true},
	{name: "NUL after", body: "{\"name\":\"a\"}\x00", bad: true},
	{name: "truncated", body: `[{"name":"a"},{"name":`, bad: true},
	{name: "unterminated string", body: `{"name":"a`, bad: true},
	{name: "5 events", body: strings.Repeat(`{"name":"a"}`, 5), fast: true},
	{name: "6 events", body: strings.Repeat(`{"name":"a"}`, 6), bad: true},
	{name: "6 events in an array", body: "[" + strings.Repeat(`{"name":"a"},`, 5) + `{"name":"a"}]`, bad: true},
}

// attrList returns n attributes "k<i>": value (valueFmt of i), comma
// separated.
func attrList(n int, valueFmt string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":`+valueFmt, i, i)
	}
	return b.String()
}

func TestCanon(t *testing.T) {
	for _, tt := range canonTests {
		t.Run(tt.name, func(t *testing.T) {
			fast := checkCanon(t, []byte(tt.body))
			if fast != tt.fast {
				t.Errorf("canonical path taken: %v, want %v", fast, tt.fast)
			}
			_, err := Decode(nil, strings.NewReader(tt.body), 1, 5)
			if (err != nil) != tt.bad {
				t.Errorf("Decode error %v, want an error: %v", err, tt.bad)
			}
		})
	}
}

// TestCanonLines pins a few canonical lines byte for byte.
func TestCanonLines(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"id":"x","time":17,"name":"n","num":{"b":2,"a":-0,"c":1e-400,"d":12345678901234567890,"e":1e21}}`,
			`{"id":"x","time":17,"name":"n","source":{},"num":{"a":-0,"b":2,"c":0,"d":1.2345678901234567e+19,"e":1e+21}}`},
		{`{"id":"<&>","time":1,"name":"n","source":{"session":"s","device":"d"},"str":{"é":"a` + "\u2028" + `","a":"<"}}`,
			`{"id":"\u003c\u0026\u003e","time":1,"name":"n","source":{"device":"d","session":"s"},"str":{"a":"\u003c","é":"a\u2028"}}`},
	}
	for _, tt := range tests {
		var d canonDecoder
		lines, _, ok := d.appendCanon(nil, nil, []byte(tt.body), 1, 10)
		if !ok {
			t.Errorf("%s: canonical path not taken", tt.body)
			continue
		}
		if got := strings.TrimSuffix(string(lines), "\n"); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}

// TestCanonAllocs checks that a body of 14 events in the plain shape
// costs no allocation once the batch is warm and the name known, and one
// for all of its client ids.
func TestCanonAllocs(t *testing.T) {
	names := map[string]string{"app.click": "app.click"}
	var withIDs strings.Builder
	for i := range 14 {
		fmt.Fprintf(&withIDs, "{\"id\":\"c-%d\",\"name\":\"app.click\",\"num\":{\"x\":%d}}\n", i, i)
	}
	for _, tt := range []struct {
		body string
		want float64
	}{{batchBody(14), 0}, {withIDs.String(), 1}} {
		var b batch
		body := []byte(tt.body)
		if err := b.decode(body, 1, 100, names); err != nil {
			t.Fatal(err)
		}
		got := testing.AllocsPerRun(100, func() {
			if err := b.decode(body, 1, 100, names); err != nil {
				t.Fatal(err)
			}
		})
		if got > tt.want {
			t.Errorf("%d allocations per body, want %v:\n%s", int(got), tt.want, body)
		}
	}
}

// TestRingKeepsRecent adds lines of varied lengths to rings and checks
// after each that the ring holds the newest lines, unchanged and in
// order: all of the last n when they fit in half the ring's bound, and
// never more bytes of blocks than the bound.
func TestRingKeepsRecent(t *testing.T) {
	for _, n := range []int{1, 3, 10, 100, 1000} {
		r := newRing(n)
		var added [][]byte
		for i := range 2000 {
			// Mostly short lines, now and then one of up to 4 times the
			// budget per line, and one longer than the whole arena.
			size := 1 + (i*37)%200
			if i%97 == 0 {
				size = (i * 13) % (4 * recentLineBytes)
			}
			if i == 1500 {
				size = r.maxBytes + 1
			}
			line := bytes.Repeat([]byte{byte('a' + i%26)}, size)
			line = append(line, fmt.Sprint(i)...)
			r.add(line)
			if len(line) <= r.maxBytes {
				added = append(added, line)
			}
			if r.bytes > r.maxBytes {
				t.Fatalf("n=%d after %d lines: blocks of %d bytes, bound %d", n, i+1, r.bytes, r.maxBytes)
			}
			var got [][]byte
			r.each(func(l []byte) bool {
				got = append(got, bytes.Clone(l))
				return true
			})
			if len(got) > n {
				t.Fatalf("n=%d: %d lines held", n, len(got))
			}
			fit, bytesN := 0, 0
			for j := len(added) - 1; j >= 0 && fit < n && bytesN+len(added[j]) <= r.maxBytes/2; j-- {
				bytesN += len(added[j])
				fit++
			}
			if len(got) < fit {
				t.Fatalf("n=%d after %d lines: %d lines held, want at least %d", n, i+1, len(got), fit)
			}
			for j, l := range got {
				if want := added[len(added)-1-j]; !bytes.Equal(l, want) {
					t.Fatalf("n=%d after %d lines: line %d is %.20q..., want %.20q...", n, i+1, j, l, want)
				}
			}
		}
		// The blocks follow the lines they must hold, not the bound.
		if n == 1000 && r.bytes > r.maxBytes/2 {
			t.Errorf("n=%d: blocks of %d bytes, bound %d", n, r.bytes, r.maxBytes)
		}
	}
}
