package store

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// readFile reads a whole file through fs.
func readFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := vfs.Open(fs, path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	n, err := f.Size()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, 0); err != nil && err != io.EOF {
		return nil, err
	}
	return buf, nil
}

// writeFileAtomic writes data so that path holds either its old or its new
// contents after a crash: tmp file, fsync, rename, fsync of the directory.
func writeFileAtomic(fs vfs.FS, path string, data []byte) error {
	return writeFileAtomicFunc(fs, path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// writeFileAtomicFunc is writeFileAtomic for contents that write writes,
// so that a large file need not be held in memory whole.
func writeFileAtomicFunc(fs vfs.FS, path string, write func(io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		fs.Remove(tmp) // a full disk must not keep a partial copy
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		fs.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, path); err != nil {
		return err
	}
	return fs.SyncDir(filepath.Dir(path))
}

// isOS reports whether fs is the real filesystem, where run files are
// memory-mapped and a batch of them can be synced with one syncfs.
func isOS(fs vfs.FS) bool {
	_, ok := fs.(vfs.OS)
	return ok
}

// lockDir takes an exclusive lock on dir/LOCK so that a second process
// cannot open the same store; the lock goes with the file's descriptor,
// so a crash releases it.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock data directory %s: another process has it open (%w)", dir, err)
	}
	return f, nil
}
