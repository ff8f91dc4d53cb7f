package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/pith-historian/pith/internal/crc32c"
)

// RestoreOptions configure Restore.
type RestoreOptions struct {
	// Force replaces the store files of a data directory that holds any
	// (MANIFEST, series files, runs/, wal/). Other entries (the event
	// collector's queue, TLS certificates) are kept.
	Force bool
}

// RestoreStats says what Restore wrote.
type RestoreStats struct {
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// restoreStaging is the folder inside the data directory where a restore
// assembles the files before moving them into place.
const restoreStaging = ".restore"

// storeEntries are the names of a data directory that belong to the store.
var storeEntries = append([]string{"MANIFEST", "MANIFEST.tmp", seriesFiles[0], seriesFiles[1], seriesFiles[0] + ".tmp", seriesFiles[1] + ".tmp", "runs", "wal"}, sideDirs...)

// Restore copies the backup src into the data directory dst, which no
// process may hold open. It first verifies every checksum of src and
// refuses a damaged or incomplete backup; it refuses a dst that already
// holds store files unless opts.Force. The files are copied into dst/.restore,
// checked again, and moved into place with MANIFEST last; src is never
// modified. An interrupted restore leaves dst without a valid MANIFEST and
// must be run again.
func Restore(src, dst string, opts RestoreOptions) (RestoreStats, error) {
	var st RestoreStats
	rep, err := Verify(src)
	if err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	if !rep.Backup {
		return st, fmt.Errorf("restore: %s is not a backup (no %s); to use a data directory, copy it while no Pith runs, or back it up with pith backup first", src, backupManifestName)
	}
	if !rep.OK() {
		return st, fmt.Errorf("restore: refusing damaged or incomplete backup %s: %s", src, summarize(rep.Problems))
	}
	buf, err := os.ReadFile(filepath.Join(src, backupManifestName))
	if err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	m, err := decodeBackupManifest(buf)
	if err != nil {
		return st, fmt.Errorf("restore: backup manifest: %w", err)
	}
	if err := checkApart("data directory", dst, "backup", src); err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return st, fmt.Errorf("restore: create data directory: %w", err)
	}
	lock, err := lockDir(dst)
	if err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	defer lock.Close()
	var present []string
	for _, name := range storeEntries {
		if _, err := os.Lstat(filepath.Join(dst, name)); err == nil {
			present = append(present, name)
		}
	}
	if len(present) > 0 && !opts.Force {
		return st, fmt.Errorf("restore: data directory %s is not empty (it holds %s); use --force to replace its store files", dst, strings.Join(present, ", "))
	}
	stage := filepath.Join(dst, restoreStaging)
	if err := os.RemoveAll(stage); err != nil {
		return st, fmt.Errorf("restore: clear staging folder: %w", err)
	}
	for _, d := range append([]string{".", "runs", "wal"}, sideDirs...) {
		if err := os.MkdirAll(filepath.Join(stage, d), 0o755); err != nil {
			return st, fmt.Errorf("restore: create staging folder: %w", err)
		}
	}
	for _, f := range m.Files {
		if err := restoreFile(src, stage, f); err != nil {
			return st, fmt.Errorf("restore %s: %w", f.Path, err)
		}
		st.Files++
		st.Bytes += f.Size
	}
	for _, d := range append(append([]string{"runs", "wal"}, sideDirs...), ".") {
		if err := syncDirOS(filepath.Join(stage, d)); err != nil {
			return st, fmt.Errorf("restore: %w", err)
		}
	}
	// The old MANIFEST goes first, so that a crash from here on leaves no
	// commit point that names a mix of old and new files.
	if err := os.Remove(filepath.Join(dst, "MANIFEST")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("restore: remove old manifest: %w", err)
	}
	if err := syncDirOS(dst); err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	for _, name := range storeEntries {
		if err := os.RemoveAll(filepath.Join(dst, name)); err != nil {
			return st, fmt.Errorf("restore: remove old %s: %w", name, err)
		}
	}
	for _, name := range append(append([]string{seriesFiles[0], seriesFiles[1]}, sideDirs...), "runs", "wal", "MANIFEST") {
		from := filepath.Join(stage, name)
		if _, err := os.Stat(from); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.Rename(from, filepath.Join(dst, name)); err != nil {
			return st, fmt.Errorf("restore: move %s into place: %w", name, err)
		}
		if name == "wal" || name == "MANIFEST" {
			// Everything before the commit point is durable first.
			if err := syncDirOS(dst); err != nil {
				return st, fmt.Errorf("restore: %w", err)
			}
		}
	}
	if err := os.RemoveAll(stage); err != nil {
		return st, fmt.Errorf("restore: remove staging folder: %w", err)
	}
	if err := syncDirOS(dst); err != nil {
		return st, fmt.Errorf("restore: %w", err)
	}
	return st, nil
}

// restoreFile copies one backup file into the staging folder, checking its
// size and CRC-32C again as it goes (the backup may change under us).
func restoreFile(src, stage string, f backupFile) error {
	if !validRel(f.Path) {
		return fmt.Errorf("bad path %q", f.Path)
	}
	in, err := os.Open(filepath.Join(src, filepath.FromSlash(f.Path)))
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(filepath.Join(stage, filepath.FromSlash(f.Path)), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	h := crc32c.New()
	n, err := io.CopyBuffer(io.MultiWriter(out, h), in, make([]byte, copyBuffer))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n != f.Size || fmt.Sprintf("%08x", h.Sum32()) != f.CRC32C {
		return fmt.Errorf("changed while restoring (size %d, CRC-32C %08x; manifest says %d, %s)", n, h.Sum32(), f.Size, f.CRC32C)
	}
	return nil
}

// summarize joins the first problems of a report for one error line.
func summarize(problems []string) string {
	const show = 5
	s := strings.Join(problems[:min(len(problems), show)], "; ")
	if len(problems) > show {
		s += fmt.Sprintf("; and %d more (pith verify lists them)", len(problems)-show)
	}
	return s
}
