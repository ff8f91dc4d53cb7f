package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// readAll returns the content of name, or "<missing>" when it does not exist.
func readAll(t *testing.T, f FS, name string) string {
	t.Helper()
	h, err := Open(f, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "<missing>"
	}
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	b, err := io.ReadAll(h)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustWrite(t *testing.T, h File, s string) {
	t.Helper()
	if _, err := h.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

func TestFaultFSCrashKeepsOnlyDurable(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, f *FaultFS)
		want map[string]string // file -> content after crash
	}{
		{
			name: "unsynced dir entry is lost",
			run: func(t *testing.T, f *FaultFS) {
				h, _ := Create(f, "d/a")
				mustWrite(t, h, "hello")
				h.Sync()
			},
			want: map[string]string{"d/a": "<missing>"},
		},
		{
			name: "synced entry but unsynced data is empty",
			run: func(t *testing.T, f *FaultFS) {
				h, _ := Create(f, "d/a")
				mustWrite(t, h, "hello")
				f.SyncDir("d")
			},
			want: map[string]string{"d/a": ""},
		},
		{
			name: "synced data survives, later append does not",
			run: func(t *testing.T, f *FaultFS) {
				h, _ := Create(f, "d/a")
				mustWrite(t, h, "hello")
				h.Sync()
				f.SyncDir("d")
				mustWrite(t, h, " world")
			},
			want: map[string]string{"d/a": "hello"},
		},
		{
			name: "rename durable only after dir sync",
			run: func(t *testing.T, f *FaultFS) {
				h, _ := Create(f, "d/tmp")
				mustWrite(t, h, "new")
				h.Sync()
				f.SyncDir("d")
				f.Rename("d/tmp", "d/final")
			},
			want: map[string]string{"d/tmp": "new", "d/final": "<missing>"},
		},
		{
			name: "rename then dir sync",
			run: func(t *testing.T, f *FaultFS) {
				h, _ := Create(f, "d/tmp")
				mustWrite(t, h, "new")
				h.Sync()
				f.Rename("d/tmp", "d/final")
				f.SyncDir("d")
			},
			want: map[string]string{"d/tmp": "<missing>", "d/final": "new"},
		},
		{
			name: "remove durable only after dir sync",
			run: func(t *testing.T, f *FaultFS) {
				h, _ := Create(f, "d/a")
				mustWrite(t, h, "x")
				h.Sync()
				f.SyncDir("d")
				f.Remove("d/a")
			},
			want: map[string]string{"d/a": "x"},
		},
		{
			name: "truncate durable after sync",
			run: func(t *testing.T, f *FaultFS) {
				h, _ := Create(f, "d/a")
				mustWrite(t, h, "abcdef")
				h.Sync()
				f.SyncDir("d")
				h.Truncate(2)
				h.Sync()
			},
			want: map[string]string{"d/a": "ab"},
		},
		{
			name: "failed sync loses dirty data for good",
			run: func(t *testing.T, f *FaultFS) {
				h, _ := Create(f, "d/a")
				mustWrite(t, h, "ab")
				h.Sync()
				f.SyncDir("d")
				mustWrite(t, h, "cd")
				f.FailSync(0, syscall.EIO)
				if err := h.Sync(); !errors.Is(err, syscall.EIO) {
					t.Fatalf("sync: got %v, want EIO", err)
				}
				mustWrite(t, h, "ef")
				if err := h.Sync(); err != nil {
					t.Fatal(err)
				}
			},
			want: map[string]string{"d/a": "ab\x00\x00ef"},
		},
		{
			name: "file in unsynced directory is lost",
			run: func(t *testing.T, f *FaultFS) {
				f.MkdirAll("d/e", 0o755)
				h, _ := Create(f, "d/e/a")
				mustWrite(t, h, "x")
				h.Sync()
				f.SyncDir("d/e")
			},
			want: map[string]string{"d/e/a": "<missing>"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFaultFS()
			if err := f.MkdirAll("d", 0o755); err != nil {
				t.Fatal(err)
			}
			f.SyncDir(".")
			tt.run(t, f)
			c := f.Crash(CrashOptions{})
			for name, want := range tt.want {
				if got := readAll(t, c, name); got != want {
					t.Errorf("%s: got %q, want %q", name, got, want)
				}
			}
			if _, err := f.ReadDir("d"); !errors.Is(err, ErrCrashed) {
				t.Errorf("old fs after crash: got %v, want ErrCrashed", err)
			}
		})
	}
}

func TestFaultFSTornTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[int]bool{}
	for range 200 {
		f := NewFaultFS()
		h, _ := Create(f, "a")
		mustWrite(t, h, "sync")
		h.Sync()
		f.SyncDir(".")
		mustWrite(t, h, "tail")
		got := readAll(t, f.Crash(CrashOptions{Rand: rng}), "a")
		if len(got) < 4 || got != "synctail"[:len(got)] {
			t.Fatalf("torn crash: got %q, want a prefix of %q of at least 4 bytes", got, "synctail")
		}
		seen[len(got)] = true
	}
	if len(seen) != 5 {
		t.Errorf("torn lengths seen: %v, want all of 4..8", seen)
	}
	f := NewFaultFS()
	h, _ := Create(f, "a")
	h.Sync()
	f.SyncDir(".")
	mustWrite(t, h, "tail")
	for {
		got := readAll(t, f.Crash(CrashOptions{Rand: rng, ZeroTail: true}), "a")
		if got != "" {
			if got != "\x00\x00\x00\x00"[:len(got)] {
				t.Fatalf("zero tail: got %q", got)
			}
			break
		}
		f.crashed = false
	}
}

func TestFaultFSInjectedErrors(t *testing.T) {
	f := NewFaultFS()
	h, _ := Create(f, "a")
	f.FailWrite(1, syscall.EIO)
	mustWrite(t, h, "1")
	if _, err := h.Write([]byte("2")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("second write: got %v, want EIO", err)
	}
	mustWrite(t, h, "3")
	f.SetCapacity(5)
	n, err := h.Write([]byte("45678"))
	if n != 3 || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past capacity: got %d, %v; want 3, ENOSPC", n, err)
	}
	if got := readAll(t, f, "a"); got != "13456" {
		t.Errorf("content: got %q", got)
	}
	if _, err := f.OpenFile("a", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Errorf("exclusive create of existing: got %v", err)
	}
	if _, err := Open(f, "nope/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open missing: got %v", err)
	}
}

// TestOSSyncDir checks the real implementation's directory handling.
func TestOSSyncDir(t *testing.T) {
	dir := t.TempDir()
	var f FS = OS{}
	h, err := Create(f, filepath.Join(dir, "b"))
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, h, "xy")
	if err := h.Sync(); err != nil {
		t.Fatal(err)
	}
	if n, _ := h.Size(); n != 2 {
		t.Errorf("size: got %d, want 2", n)
	}
	h.Close()
	if err := f.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	names, err := f.ReadDir(dir)
	if err != nil || len(names) != 1 || names[0] != "b" {
		t.Errorf("readdir: got %v, %v", names, err)
	}
}
