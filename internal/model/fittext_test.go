package model

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFitText(t *testing.T) {
	long := strings.Repeat("a", MaxTextLen-4) + "€€" // the first € ends past the cut
	for _, tt := range []struct {
		name, in, want string
		cut            bool
	}{
		{"plain", "Running", "Running", false},
		{"empty", "", "", false},
		{"exactly the limit", strings.Repeat("x", MaxTextLen), strings.Repeat("x", MaxTextLen), false},
		{"lines", "line 1\r\nline 2\nline 3\rend", "line 1 line 2 line 3 end", false},
		{"blank lines", "a\n\nb", "a  b", false},
		{"invalid utf-8", "ok\xff\xfeok", "ok\uFFFDok", true},
		{"one byte over", strings.Repeat("x", MaxTextLen+1), strings.Repeat("x", MaxTextLen-3) + "…", true},
		{"cut at a rune boundary", long, strings.Repeat("a", MaxTextLen-4) + "…", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := FitText(tt.in)
			if got != tt.want || cut != tt.cut {
				t.Errorf("FitText(%.40q) = %.40q (%d bytes), %v; want %.40q, %v", tt.in, got, len(got), cut, tt.want, tt.cut)
			}
			if err := CheckText(got); err != nil {
				t.Errorf("FitText gave text CheckText refuses: %v", err)
			}
		})
	}
}

// FuzzFitText checks FitText against its contract on any input: the
// result is always storable, text that was storable is kept as it is,
// and nothing is cut from text that fits once its line breaks are spaces.
// Run: go test -fuzz FuzzFitText ./internal/model/
func FuzzFitText(f *testing.F) {
	f.Add("Running")
	f.Add("a\r\nb")
	f.Add(strings.Repeat("é", 600))
	f.Add("\xff")
	f.Fuzz(func(t *testing.T, s string) {
		got, cut := FitText(s)
		if err := CheckText(got); err != nil {
			t.Fatalf("FitText(%q) = %q: %v", s, got, err)
		}
		if CheckText(s) == nil && (got != s || cut) {
			t.Fatalf("FitText changed storable %q to %q", s, got)
		}
		spaced := strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
		if utf8.ValidString(s) && len(spaced) <= MaxTextLen && (cut || got != spaced) {
			t.Fatalf("FitText(%q) = %q, %v; want %q uncut", s, got, cut, spaced)
		}
	})
}
