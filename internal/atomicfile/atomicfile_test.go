package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	for _, want := range []string{"one", "two, longer"} {
		if err := Write(path, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries left in the directory, want 1 (no temporary file)", len(ents))
	}
	if err := Write(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}

// TestWriteFSFaults checks the guarantee on a filesystem that fails or
// loses power: path holds the old or the new contents, never a mix, and a
// failed write leaves no temporary file.
func TestWriteFSFaults(t *testing.T) {
	const path = "/d/f"
	setup := func(t *testing.T) *vfs.FaultFS {
		fsys := vfs.NewFaultFS()
		if err := fsys.MkdirAll("/d", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		if err := WriteFS(fsys, path, []byte("old"), 0o644); err != nil {
			t.Fatal(err)
		}
		return fsys
	}
	read := func(t *testing.T, fsys *vfs.FaultFS) string {
		f, err := vfs.Open(fsys, path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 64)
		n, _ := f.ReadAt(b, 0)
		return string(b[:n])
	}
	errDisk := errors.New("injected")
	for _, tt := range []struct {
		name   string
		inject func(*vfs.FaultFS)
		want   string
	}{
		{"sync fails", func(f *vfs.FaultFS) { f.FailSync(0, errDisk) }, "old"},
		{"write fails", func(f *vfs.FaultFS) { f.FailWrite(0, errDisk) }, "old"},
		{"disk full", func(f *vfs.FaultFS) { f.SetCapacity(4) }, "old"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys := setup(t)
			tt.inject(fsys)
			if err := WriteFS(fsys, path, []byte("new contents"), 0o644); err == nil {
				t.Fatal("write succeeded, want the injected failure")
			}
			if got := read(t, fsys); got != tt.want {
				t.Errorf("after a failed write %q, want %q", got, tt.want)
			}
			if names, _ := fsys.ReadDir("/d"); len(names) != 1 {
				t.Errorf("entries %v, want only f", names)
			}
		})
	}
	t.Run("power cut after write", func(t *testing.T) {
		fsys := setup(t)
		if err := WriteFS(fsys, path, []byte("new"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := read(t, fsys.Crash(vfs.CrashOptions{})); got != "new" {
			t.Errorf("after a power cut %q, want %q", got, "new")
		}
	})
}
