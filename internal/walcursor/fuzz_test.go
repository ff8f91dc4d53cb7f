package walcursor

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode checks that Decode never panics, that it either decodes or
// reports ErrCorrupt, and that what it decodes re-encodes to a cursor that
// decodes the same. Seeded with the golden and legacy files:
//
//	go test -fuzz=FuzzDecode ./internal/walcursor
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"pwc1", "legacy/forward-pfc1", "legacy/events-v1"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Decode error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if c.Pos.Offset < 0 {
			t.Fatalf("Decode = %+v, a negative offset", c)
		}
		again, err := Decode(Append(nil, c))
		if err != nil || again != c {
			t.Fatalf("round trip of %+v = %+v, %v", c, again, err)
		}
	})
}
