package store

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/pith-historian/pith/internal/store/wal"
)

// goldenCursor is the state in testdata/format/follower.cur.
var goldenCursor = cursorState{
	Cursor:  Position{Segment: 12, Offset: 4096, Part: 3},
	Hold:    wal.Pos{Segment: 11, Offset: 16},
	Dropped: Dropped{Events: 2, Records: 170, Points: 17_000},
	Token:   987_654_321,
}

// TestCursorGolden pins the bytes of a follower's cursor file
// (docs/format/store.md); PITH_UPDATE_GOLDEN=1 rewrites it.
func TestCursorGolden(t *testing.T) {
	path := filepath.Join(goldenDir, "follower.cur")
	buf := encodeCursor(goldenCursor)
	if os.Getenv("PITH_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, want) {
		t.Fatalf("cursor encoding changed:\n got %x\nwant %x", buf, want)
	}
	got, err := decodeCursor(want)
	if err != nil || got != goldenCursor {
		t.Fatalf("decode golden cursor: %+v, %v", got, err)
	}
	for i := range want {
		bad := bytes.Clone(want)
		bad[i] ^= 0x10
		if _, err := decodeCursor(bad); err == nil {
			t.Fatalf("flipped byte %d accepted", i)
		}
	}
}

// TestCursorV1 reads the cursor file of earlier releases
// (testdata/format/follower-v1.cur, "PITHFOL1", without the upstream
// token): the same state, token 0.
func TestCursorV1(t *testing.T) {
	buf, err := os.ReadFile(filepath.Join(goldenDir, "follower-v1.cur"))
	if err != nil {
		t.Fatal(err)
	}
	want := goldenCursor
	want.Token = 0
	got, err := decodeCursor(buf)
	if err != nil || got != want {
		t.Fatalf("decode v1 cursor: %+v, %v; want %+v", got, err, want)
	}
	for i := range buf {
		bad := bytes.Clone(buf)
		bad[i] ^= 0x10
		if _, err := decodeCursor(bad); err == nil {
			t.Fatalf("flipped byte %d of a v1 cursor accepted", i)
		}
	}
}

func FuzzCursor(f *testing.F) {
	if buf, err := os.ReadFile(filepath.Join(goldenDir, "follower.cur")); err == nil {
		f.Add(buf)
	}
	f.Add(encodeCursor(cursorState{}))
	f.Add([]byte(cursorMagic))
	if buf, err := os.ReadFile(filepath.Join(goldenDir, "follower-v1.cur")); err == nil {
		f.Add(buf)
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		c, err := decodeCursor(buf)
		if err != nil || string(buf[:8]) == cursorMagicV1 {
			return // a v1 file is rewritten as v2 at its next Ack
		}
		if !bytes.Equal(encodeCursor(c), buf) {
			t.Fatalf("round trip of %+v changed the bytes", c)
		}
	})
}

func FuzzTxnRecord(f *testing.F) {
	f.Add(appendTxnRecord(nil, recCommit, 1_700_000_000_000_000_001))
	f.Add(appendTxnRecord(nil, recAbort, 0))
	f.Add([]byte{recCommit})
	f.Fuzz(func(t *testing.T, rec []byte) {
		id, err := decodeTxnRecord(rec)
		if err != nil {
			return
		}
		again, err := decodeTxnRecord(appendTxnRecord(nil, rec[0], id))
		if err != nil || again != id {
			t.Fatalf("round trip of id %d: %d, %v", id, again, err)
		}
	})
}
