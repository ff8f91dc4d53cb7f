package web

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pith-historian/pith/internal/jsonenc"
	"github.com/pith-historian/pith/internal/model"
)

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain.tag", `<img src=x onerror=alert(1)>`, "quote\" back\\slash", "ctl\x00\x1f\n\r\t",
		"ünïcødé ✓", "\u2028\u2029", "bad\xffutf8", "&amp;"} {
		b := jsonenc.AppendString(nil, s)
		if strings.ContainsAny(string(b), "<>&\n\u2028") {
			t.Errorf("jsonenc.AppendString(%q) = %s keeps an unescaped character", s, b)
		}
		var got string
		if err := json.Unmarshal(b, &got); err != nil {
			t.Errorf("jsonenc.AppendString(%q) = %s: invalid JSON: %v", s, b, err)
			continue
		}
		want := strings.ToValidUTF8(s, "\ufffd")
		if got != want {
			t.Errorf("jsonenc.AppendString(%q) round-trips to %q", s, got)
		}
	}
}

func TestAppendEvent(t *testing.T) {
	got := string(appendEvent(nil, "update", 42, []liveValue{
		{Tag: "a", T: 1, V: 1.5, Has: true},
		{Tag: "b", T: 2, Q: model.QualityBad},
		{Tag: "c", T: 3, V: math.Inf(1), Has: true},
	}))
	want := "event: update\ndata: {\"now\":42,\"values\":[[\"a\",1,1.5,\"good\"],[\"b\",2,null,\"bad\"],[\"c\",3,null,\"good\"]]}\n\n"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// FuzzAppendString checks that any tag name, however hostile, becomes
// one line of valid JSON that decodes to the name (invalid UTF-8 replaced)
// and carries no raw markup characters. Seeded with the browser test's
// hostile names.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"<img src=x onerror=alert(1)>", "live.<img/src=x/onerror=alert(2)>", "a\"b\\c\n", "\xff\xfe", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := appendEvent(nil, "snapshot", 1, []liveValue{{Tag: s, Has: true}})
		line, ok := strings.CutPrefix(string(b), "event: snapshot\ndata: ")
		if !ok || strings.Count(line, "\n") != 2 || !strings.HasSuffix(line, "\n\n") {
			t.Fatalf("event is not one data line: %q", b)
		}
		if strings.ContainsAny(line, "<>&") {
			t.Fatalf("raw markup character in %q", line)
		}
		var d struct{ Values [][]any }
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("invalid JSON %q: %v", line, err)
		}
		if got := d.Values[0][0].(string); got != strings.ToValidUTF8(s, "\ufffd") && utf8.ValidString(s) {
			t.Fatalf("name %q decoded as %q", s, got)
		}
	})
}

// BenchmarkAppendEvent measures the live stream's encoder on one update
// of 1,000 tags, the size of the live page's target (README.md,
// "Performance").
// Run: go test -run ^$ -bench AppendEvent ./internal/web/
func BenchmarkAppendEvent(b *testing.B) {
	vals := make([]liveValue, 1000)
	for i := range vals {
		vals[i] = liveValue{Tag: fmt.Sprintf("site.area%d.pump%03d.flow", i%7, i), T: 1_700_000_000_000 + int64(i), V: 1234.5678 + float64(i), Has: true}
	}
	buf := appendEvent(nil, "update", 1, vals)
	b.ReportAllocs()
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for b.Loop() {
		buf = appendEvent(buf[:0], "update", 1, vals)
	}
	b.ReportMetric(float64(b.N)*float64(len(vals))/b.Elapsed().Seconds(), "values/s")
	b.ReportMetric(float64(len(buf))/float64(len(vals)), "B/value")
}

// TestAppendEventText: a text tag's value is a JSON string in the stream.
func TestAppendEventText(t *testing.T) {
	b := appendEvent(nil, "update", 5, []liveValue{
		{Tag: "line.state", T: 1, IsText: true, Text: `RUN "<b>"`, Has: true},
		{Tag: "line.speed", T: 2, V: 1.5, Has: true, Q: model.QualityBad},
	})
	data := strings.TrimSuffix(strings.SplitN(string(b), "data: ", 2)[1], "\n\n")
	var got struct {
		Values [][]any `json:"values"`
	}
	if err := json.Unmarshal([]byte(data), &got); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if got.Values[0][2] != `RUN "<b>"` || got.Values[1][2] != 1.5 || got.Values[1][3] != "bad" {
		t.Fatalf("values %v", got.Values)
	}
}
