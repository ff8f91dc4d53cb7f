package walcursor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
)

var update = flag.Bool("update", false, "rewrite testdata/pwc1 from the encoder")

// golden is the cursor the files under testdata hold.
var golden = Cursor{Pos: wal.Pos{Segment: 7, Offset: 123456}, Seq: 17}

// TestGolden pins the encoding: a change that alters the bytes of the
// committed file breaks cursors already on disk.
func TestGolden(t *testing.T) {
	path := filepath.Join("testdata", "pwc1")
	got := Append(nil, golden)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Append = %x, want %x", got, want)
	}
	if c, err := Decode(want); err != nil || c != golden {
		t.Errorf("Decode = %+v, %v, want %+v", c, err, golden)
	}
}

// TestLegacy reads the files the forward queue and the events collector
// wrote before they shared this format; the fixtures are byte for byte
// what those releases wrote.
func TestLegacy(t *testing.T) {
	for _, tt := range []struct {
		file string
		want Cursor
	}{
		{"forward-pfc1", Cursor{Pos: golden.Pos}},
		{"events-v1", Cursor{Pos: wal.Pos{Segment: 3, Offset: 4096}, Seq: 17}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			c, ok, err := Read(vfs.OS{}, filepath.Join("testdata", "legacy", tt.file))
			if err != nil || !ok || c != tt.want {
				t.Errorf("Read = %+v, %v, %v, want %+v", c, ok, err, tt.want)
			}
		})
	}
}

func TestDecodeCorrupt(t *testing.T) {
	good := Append(nil, golden)
	flip := bytes.Clone(good)
	flip[9] ^= 1
	// A checksum that matches does not make an impossible offset good.
	badOffset := bytes.Clone(good[:Size-4])
	binary.LittleEndian.PutUint64(badOffset[8:], 1<<63)
	badOffset = binary.LittleEndian.AppendUint32(badOffset, crc32c.Checksum(badOffset))
	legacy, err := os.ReadFile(filepath.Join("testdata", "legacy", "forward-pfc1"))
	if err != nil {
		t.Fatal(err)
	}
	legacyFlip := bytes.Clone(legacy)
	legacyFlip[5] ^= 0x80
	for _, tt := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"bit flip", flip},
		{"short", good[:Size-1]},
		{"long", append(bytes.Clone(good), 0)},
		{"offset out of range", badOffset},
		{"unknown magic", []byte("XXXX0000000000000000000000000000")},
		{"legacy forward bit flip", legacyFlip},
		{"legacy forward short", legacy[:len(legacy)-1]},
		{"legacy events torn", []byte("v1 3 40")},
		{"legacy events negative", []byte("v1 3 -1 2\n")},
		{"legacy events fields", []byte("v1 3 4\n")},
		{"legacy events spaces", []byte("v1  3 4 5\n")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := Decode(tt.in); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Decode = %+v, %v, want ErrCorrupt", c, err)
			}
		})
	}
}

// TestReadWrite checks the file round trip, that a missing file is no
// cursor rather than an error, and that a damaged file is an error naming
// it.
func TestReadWrite(t *testing.T) {
	fsys := vfs.NewFaultFS()
	if err := fsys.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	const path = "/d/cursor"
	if c, ok, err := Read(fsys, path); err != nil || ok {
		t.Fatalf("Read of a missing file = %+v, %v, %v, want not ok and no error", c, ok, err)
	}
	for _, want := range []Cursor{golden, {Pos: wal.Pos{Segment: 1 << 31, Offset: 1 << 40}, Seq: 1<<64 - 1}} {
		if err := Write(fsys, path, want); err != nil {
			t.Fatal(err)
		}
		if c, ok, err := Read(fsys, path); err != nil || !ok || c != want {
			t.Errorf("Read = %+v, %v, %v, want %+v", c, ok, err, want)
		}
	}
	f, err := fsys.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, 10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, _, err = Read(fsys, path)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("Read of a damaged file: %v, want ErrCorrupt naming %s", err, path)
	}
}
