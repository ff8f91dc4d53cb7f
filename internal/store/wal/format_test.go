package wal

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// segmentBytes frames recs into the bytes of segment n.
func segmentBytes(n uint32, recs ...[]byte) []byte {
	b := appendSegmentHeader(nil, n)
	for _, r := range recs {
		b = appendRecord(b, r)
	}
	return b
}

func TestRecordFraming(t *testing.T) {
	tests := []struct {
		name string
		recs [][]byte
	}{
		{"empty segment", nil},
		{"empty record", [][]byte{{}}},
		{"one byte", [][]byte{{0x42}}},
		{"zeros payload", [][]byte{make([]byte, 100)}},
		{"several", [][]byte{[]byte("a"), bytes.Repeat([]byte("xy"), 50), {}, []byte("last")}},
		{"larger than read window", [][]byte{bytes.Repeat([]byte{7}, readWindow+3), []byte("after")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := segmentBytes(3, tt.recs...)
			r := newSegmentReader(bytes.NewReader(b), int64(len(b)), DefaultMaxRecordSize)
			if err := r.header(3); err != nil {
				t.Fatalf("header: %v", err)
			}
			for i, want := range tt.recs {
				got, err := r.next()
				if err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("record %d: got %d bytes, want %d", i, len(got), len(want))
				}
			}
			if _, err := r.next(); err != io.EOF {
				t.Fatalf("after last record: got %v, want io.EOF", err)
			}
		})
	}
}

func TestRecordLayout(t *testing.T) {
	got := appendRecord(nil, []byte("hi"))
	// Length 2, CRC-32C over {type 1, 'h', 'i'}, type 1, payload.
	want := []byte{2, 0, 0, 0, 0, 0, 0, 0, 1, 'h', 'i'}
	crc := appendRecord(nil, []byte("hi"))[4:8]
	copy(want[4:8], crc)
	if !bytes.Equal(got, want) {
		t.Fatalf("got % x, want % x", got, want)
	}
	if bytes.Equal(crc, []byte{0, 0, 0, 0}) {
		t.Fatal("crc is zero")
	}
	h := appendSegmentHeader(nil, 0x01020304)
	if len(h) != headerSize || string(h[:4]) != "PWAL" || h[4] != formatVersion || h[8] != 4 || h[11] != 1 {
		t.Fatalf("segment header: % x", h)
	}
}

func TestRecordErrors(t *testing.T) {
	good := segmentBytes(1, []byte("hello"))
	tests := []struct {
		name   string
		mutate func(b []byte) []byte
		maxRec int
		want   error
	}{
		{"short header", func(b []byte) []byte { return b[:headerSize+5] }, 0, ErrShortRecord},
		{"short payload", func(b []byte) []byte { return b[:len(b)-1] }, 0, ErrShortRecord},
		{"zeros", func(b []byte) []byte { return append(b[:headerSize], make([]byte, 20)...) }, 0, ErrZeroRecord},
		{"bad crc", func(b []byte) []byte { b[headerSize+4] ^= 1; return b }, 0, ErrChecksum},
		{"bad payload", func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }, 0, ErrChecksum},
		{"bad type", func(b []byte) []byte { b[headerSize+8] = 2; return b }, 0, ErrChecksum},
		{"too large", func(b []byte) []byte { return b }, 4, ErrRecordTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mutate(append([]byte(nil), good...))
			maxRec := tt.maxRec
			if maxRec == 0 {
				maxRec = DefaultMaxRecordSize
			}
			r := newSegmentReader(bytes.NewReader(b), int64(len(b)), maxRec)
			if _, err := r.next(); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSegmentHeaderErrors(t *testing.T) {
	tests := []struct {
		name string
		at   int
		seg  uint32
		want error
	}{
		{"ok", -1, 5, nil},
		{"magic", 0, 5, ErrBadHeader},
		{"version", 4, 5, ErrBadHeader},
		{"segment number", 8, 5, ErrBadHeader},
		{"crc", 13, 5, ErrBadHeader},
		{"wrong file", -1, 6, ErrBadHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := appendSegmentHeader(nil, 5)
			if tt.at >= 0 {
				h[tt.at] ^= 0x10
			}
			if err := checkSegmentHeader(h, tt.seg); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	if err := checkSegmentHeader(make([]byte, headerSize), 1); !errors.Is(err, ErrZeroRecord) {
		t.Errorf("zero header: got %v", err)
	}
}

func TestSegmentNames(t *testing.T) {
	tests := []struct {
		name string
		n    uint32
		ok   bool
	}{
		{"00000001.wal", 1, true},
		{"00012345.wal", 12345, true},
		{"4294967295.wal", 0, false},
		{"0000001.wal", 0, false},
		{"00000001.wal.tmp", 0, false},
		{"0000000x.wal", 0, false},
	}
	for _, tt := range tests {
		n, ok := parseSegmentName(tt.name)
		if n != tt.n || ok != tt.ok {
			t.Errorf("parse %q: got %d, %v; want %d, %v", tt.name, n, ok, tt.n, tt.ok)
		}
	}
	if got := segmentName(42); got != "00000042.wal" {
		t.Errorf("segmentName(42) = %q", got)
	}
}

func TestPosLess(t *testing.T) {
	tests := []struct {
		p, q Pos
		want bool
	}{
		{Pos{Segment: 1, Offset: 16}, Pos{Segment: 1, Offset: 17}, true},
		{Pos{Segment: 1, Offset: 17}, Pos{Segment: 1, Offset: 16}, false},
		{Pos{Segment: 1, Offset: 100}, Pos{Segment: 2, Offset: 16}, true},
		{Pos{Segment: 2, Offset: 16}, Pos{Segment: 1, Offset: 100}, false},
		{Pos{Segment: 1, Offset: 16}, Pos{Segment: 1, Offset: 16}, false},
	}
	for _, tt := range tests {
		if got := tt.p.Less(tt.q); got != tt.want {
			t.Errorf("%v.Less(%v) = %v", tt.p, tt.q, got)
		}
	}
}
