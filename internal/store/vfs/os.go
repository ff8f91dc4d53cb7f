package vfs

import (
	"fmt"
	"os"
	"sort"
)

// OS is the real filesystem of the host.
type OS struct{}

var _ FS = OS{}

// osFile adapts *os.File to File.
type osFile struct {
	*os.File
}

var _ File = osFile{}

// Size returns the file's size from fstat.
func (f osFile) Size() (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// OpenFile opens a real file.
func (OS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

// Remove deletes a real file.
func (OS) Remove(name string) error { return os.Remove(name) }

// Rename renames a real file.
func (OS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// MkdirAll creates real directories.
func (OS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

// ReadDir lists a real directory, sorted by name.
func (OS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir fsyncs a directory so that entries created, renamed or removed
// in it survive a power cut.
func (OS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir: %w", err)
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return fmt.Errorf("sync dir %s: %w", dir, serr)
	}
	return cerr
}
