// Package atomicfile replaces small files so that a crash or power cut
// leaves either the old or the new contents, never a mix.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// maxTempTries bounds the search for an unused temporary name; a clash
// needs another writer of the same path at the same moment.
const maxTempTries = 100

// Write writes data to path on the host's filesystem with mode perm; see
// WriteFS.
func Write(path string, data []byte, perm os.FileMode) error {
	return WriteFS(vfs.OS{}, path, data, perm)
}

// WriteFS writes data to path with mode perm through a synced temporary
// file in the same directory (path + ".tmp" + a random number) and a
// rename, then syncs the directory. On error the temporary file is removed
// and path is unchanged. A crash may leave a temporary file behind, never a
// partial path. The mode is applied exactly, umask aside, when the file
// system supports it.
func WriteFS(fsys vfs.FS, path string, data []byte, perm os.FileMode) error {
	f, tmp, err := createTemp(fsys, path, perm)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if c, ok := f.(interface{ Chmod(os.FileMode) error }); ok && err == nil {
		err = c.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// createTemp creates a new file next to path, never opening one that
// exists, and returns it with its name.
func createTemp(fsys vfs.FS, path string, perm os.FileMode) (vfs.File, string, error) {
	for range maxTempTries {
		name := path + ".tmp" + strconv.FormatUint(uint64(rand.Uint32()), 10)
		f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("create temporary file for %s: %d names taken", path, maxTempTries)
}
