// Package vfs is the small filesystem interface the store uses for every
// file operation. Routing all I/O through it lets tests swap the real disk
// for FaultFS, an in-memory filesystem that remembers what was fsynced and
// can simulate a power cut or a failing disk exactly.
package vfs

import (
	"io"
	"os"
)

// FS is a filesystem. Paths use the host separator. Implementations are
// safe for concurrent use by many goroutines.
type FS interface {
	// OpenFile opens or creates name with os.O_* flags, like os.OpenFile.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove deletes a file or an empty directory. The removal is durable
	// only after SyncDir of the parent directory.
	Remove(name string) error
	// Rename moves oldname to newname, replacing newname. It is durable
	// only after SyncDir of both parent directories.
	Rename(oldname, newname string) error
	// ReadDir returns the names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// SyncDir makes the entries of dir (creations, renames, removals)
	// durable, like fsync on a directory.
	SyncDir(dir string) error
}

// File is an open file. A File is not safe for concurrent use, except that
// ReadAt may be called concurrently with other ReadAt calls.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Sync makes the file's data durable (fdatasync or fsync). After a
	// failed Sync the state of unsynced data is unknown: callers must not
	// assume a later successful Sync covers it.
	Sync() error
	// Truncate changes the file's size. It is durable after Sync.
	Truncate(size int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
	// Name returns the name the file was opened with.
	Name() string
}

// Create creates or truncates name for writing, like os.Create.
func Create(fs FS, name string) (File, error) {
	return fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

// Open opens name for reading, like os.Open.
func Open(fs FS, name string) (File, error) {
	return fs.OpenFile(name, os.O_RDONLY, 0)
}
