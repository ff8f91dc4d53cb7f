package alarm

import (
	"bytes"
	"testing"
)

// FuzzReadEvents feeds arbitrary bytes to the alarm log reader (it reads
// a file from disk that a power cut may have torn): it must never fail or
// panic, and every event it returns must be complete.
func FuzzReadEvents(f *testing.F) {
	f.Add([]byte(`{"seq":1,"t":5,"alarm":"a","event":"raised","state":"active","type":"hi","severity":"major","message":"m","value":3}` + "\n"))
	f.Add([]byte(`{"seq":2,"t":6,"alarm":"a","event":"acknowledged","state":"acknowledged","who":"bob"}` + "\n" + `{"seq":3,"t":7,"ala`))
	f.Add([]byte("\n\n{}\n[1,2]\nnull\n"))
	f.Add(bytes.Repeat([]byte("x"), 70<<10))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		skipped, err := readEvents(bytes.NewReader(data), func(ev Event) {
			n++
			if ev.Alarm == "" || ev.Event == "" {
				t.Fatalf("incomplete event %+v", ev)
			}
			if _, ok := parseState(ev.State); !ok {
				t.Fatalf("bad state %q", ev.State)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if lines := bytes.Count(data, []byte("\n")) + 1; n+skipped > lines {
			t.Fatalf("%d events + %d skipped from %d lines", n, skipped, lines)
		}
	})
}
