package wal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// buildLog writes 3 segments of 3 records each and returns the filesystem
// and the position of every record by name.
func buildLog(t *testing.T) (*vfs.FaultFS, []string, map[string]Pos) {
	t.Helper()
	fs := vfs.NewFaultFS()
	w := openWAL(t, fs, "wal", nil)
	var names []string
	pos := map[string]Pos{}
	for s := 1; s <= 3; s++ {
		for r := range 3 {
			name := fmt.Sprintf("s%dr%d-payload", s, r)
			p, err := w.Commit(context.Background(), []byte(name))
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
			pos[name] = p
		}
		if s < 3 {
			if _, err := w.Cut(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return fs, names, pos
}

// flip xors one byte of a file of fs in place, as bit rot would.
func flip(t *testing.T, fs vfs.FS, name string, off int64, mask byte) {
	t.Helper()
	f, err := fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	b[0] ^= mask
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// TestCorruption flips a byte of every field class (segment header magic
// and checksum; record length, checksum, type, payload) in the first,
// middle and last record of the first, middle and last segment, and checks
// what strict and skipping replays return.
func TestCorruption(t *testing.T) {
	type class struct {
		name   string
		header bool  // the byte is in the segment header
		at     int64 // offset within the header or record
		mask   byte
	}
	classes := []class{
		{"header magic", true, 1, 0x20},
		{"header checksum", true, 12, 0x01},
		{"header segment number", true, 8, 0x02},
		{"length low byte", false, 0, 0x01},
		{"length high byte", false, 3, 0x80},
		{"checksum", false, 5, 0x10},
		{"type", false, 8, 0x03},
		{"payload", false, recHeaderSize + 4, 0x40},
	}
	for _, c := range classes {
		for seg := uint32(1); seg <= 3; seg++ {
			recsInCase := []int{0, 1, 2}
			if c.header {
				recsInCase = []int{-1}
			}
			for _, r := range recsInCase {
				name := fmt.Sprintf("%s/seg%d", c.name, seg)
				if r >= 0 {
					name += fmt.Sprintf("/rec%d", r)
				}
				t.Run(name, func(t *testing.T) {
					fs, all, pos := buildLog(t)
					file := "wal/" + segmentName(seg)
					var damaged []string // records the damage destroys
					var off int64
					if c.header {
						off = c.at
						for _, n := range all {
							if pos[n].Segment == seg {
								damaged = append(damaged, n)
							}
						}
					} else {
						n := fmt.Sprintf("s%dr%d-payload", seg, r)
						off = pos[n].Offset + c.at
						damaged = []string{n}
					}
					flip(t, fs, file, off, c.mask)
					torn := !c.header && seg == 3 && r == 2
					want := slices.DeleteFunc(slices.Clone(all), func(n string) bool { return slices.Contains(damaged, n) })

					// Strict: an error naming the file and offset, unless
					// the damage is a torn tail.
					fs = fs.Crash(vfs.CrashOptions{})
					w := openWAL(t, fs, "wal", nil)
					got, err := replayAll(t, w)
					w.Close()
					if torn {
						if err != nil || fmt.Sprint(recs(got)) != fmt.Sprint(want) {
							t.Fatalf("torn tail: got %v, %v; want %v", recs(got), err, want)
						}
						return
					}
					var cerr *CorruptionError
					if !errors.As(err, &cerr) {
						t.Fatalf("strict replay: got %v, want a CorruptionError", err)
					}
					wantOff := int64(0)
					if !c.header {
						wantOff = off - c.at
					}
					if cerr.File != file || cerr.Offset != wantOff {
						t.Fatalf("corruption at %s:%d, want %s:%d (%v)", cerr.File, cerr.Offset, file, wantOff, err)
					}

					// Skipping: everything but the damaged records.
					w = openWAL(t, fs, "wal", func(o *Options) { o.SkipCorrupt = true })
					got, err = replayAll(t, w)
					w.Close()
					if err != nil || fmt.Sprint(recs(got)) != fmt.Sprint(want) {
						t.Fatalf("skipping replay: got %v, %v; want %v", recs(got), err, want)
					}
					if w.Stats().CorruptSkipped == 0 {
						t.Errorf("skipped damage not counted")
					}
				})
			}
		}
	}
}

func TestMissingSegment(t *testing.T) {
	fs, all, _ := buildLog(t)
	if err := fs.Remove("wal/" + segmentName(2)); err != nil {
		t.Fatal(err)
	}
	w := openWAL(t, fs, "wal", nil)
	_, err := replayAll(t, w)
	w.Close()
	if !errors.Is(err, ErrMissingSegment) {
		t.Fatalf("got %v, want ErrMissingSegment", err)
	}
	w = openWAL(t, fs, "wal", func(o *Options) { o.SkipCorrupt = true })
	defer w.Close()
	got, err := replayAll(t, w)
	want := slices.Concat(all[:3], all[6:])
	if err != nil || fmt.Sprint(recs(got)) != fmt.Sprint(want) {
		t.Fatalf("skipping: got %v, %v", recs(got), err)
	}
}

func TestTornHeaderSegmentRemoved(t *testing.T) {
	fs, all, _ := buildLog(t)
	// A power cut right after a new segment's directory entry became
	// durable but before its header did.
	f, err := vfs.Create(fs, "wal/"+segmentName(9))
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 7))
	f.Close()
	w := openWAL(t, fs, "wal", nil)
	defer w.Close()
	got, err := replayAll(t, w)
	if err != nil || fmt.Sprint(recs(got)) != fmt.Sprint(all) {
		t.Fatalf("got %v, %v", recs(got), err)
	}
	if names, _ := fs.ReadDir("wal"); slices.Contains(names, segmentName(9)) {
		t.Fatalf("torn segment kept: %v", names)
	}
}
