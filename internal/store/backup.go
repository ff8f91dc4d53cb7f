package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
)

// A backup is a directory laid out like a data directory (MANIFEST,
// series.dat, series.copy.dat, runs/, wal/) plus a BACKUP manifest that
// lists every file with its size and CRC-32C. BACKUP is written last, by an
// atomic rename, and BACKUP.incomplete marks a backup being written, so an
// interrupted backup is detectably incomplete. See docs/backup.md.
const (
	backupManifestName = "BACKUP"
	backupMarkerName   = "BACKUP.incomplete"
	// BackupFormat is the version of the BACKUP manifest this code writes
	// and reads.
	BackupFormat = 1
	// copyBuffer is the buffer of one file copy.
	copyBuffer = 1 << 20
)

// ErrLocked is returned (wrapped) by BackupDir when another process holds
// the data directory: back up through that process instead.
var ErrLocked = errors.New("data directory is in use by another process")

// BackupStats says what one backup did. Files and Bytes count the whole
// backup; the other fields split it by how each file got there.
type BackupStats struct {
	Files        int           `json:"files"`         // files in the backup
	Bytes        int64         `json:"bytes"`         // their total size
	Copied       int           `json:"copied"`        // files written by copying
	CopiedBytes  int64         `json:"copied_bytes"`  // bytes written by copying
	Linked       int           `json:"linked"`        // run files hard-linked into DEST
	LinkedBytes  int64         `json:"linked_bytes"`  // their size
	Skipped      int           `json:"skipped"`       // files already in DEST with the same size and CRC-32C
	SkippedBytes int64         `json:"skipped_bytes"` // their size
	Removed      int           `json:"removed"`       // stale files of an earlier backup removed from DEST
	WALEnd       string        `json:"wal_end"`       // WAL position the snapshot ends at, "segment:offset"
	Duration     time.Duration `json:"duration_ns"`
	LockHeld     time.Duration `json:"lock_held_ns"` // how long flushes and merges waited for the capture
}

// backupFile is one file of a backup.
type backupFile struct {
	Path   string `json:"path"`   // relative, slash-separated
	Size   int64  `json:"size"`   // bytes
	CRC32C string `json:"crc32c"` // 8 lowercase hex digits
}

// backupManifest is the BACKUP file.
type backupManifest struct {
	Format       int          `json:"format"`        // BackupFormat
	StoreVersion int          `json:"store_version"` // data directory format (MANIFEST version)
	Created      string       `json:"created"`       // RFC 3339, UTC
	WALEnd       string       `json:"wal_end"`       // "segment:offset" the snapshot ends at
	Files        []backupFile `json:"files"`         // sorted by path
}

// The BACKUP file is encoded like MANIFEST: indented JSON, then a line
// with the CRC-32C of the JSON bytes.
func encodeBackupManifest(m *backupManifest) []byte { return encodeChecked(m) }

func decodeBackupManifest(buf []byte) (*backupManifest, error) {
	var m backupManifest
	if err := decodeChecked(buf, "", &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// snapItem is one file of a snapshot: small live files are captured in
// memory, the others as an open descriptor and a length, so that a run
// removed by a merge after the capture, or a WAL segment growing, changes
// nothing in the backup.
type snapItem struct {
	rel  string   // relative path in the data directory, slash-separated
	data []byte   // contents of a small live file, or nil
	f    *os.File // open run or WAL segment when data is nil
	src  string   // path of f, for a hard link
	size int64    // bytes of f to take
	link bool     // immutable (a run): may be hard-linked
}

type snapshot struct {
	items   []snapItem
	version int    // MANIFEST version, FormatVersion when there is none
	walEnd  string // "segment:offset"
}

func (s *snapshot) close() {
	for _, it := range s.items {
		if it.f != nil {
			it.f.Close()
		}
	}
}

// Backup writes a consistent snapshot of the running store to dest: the
// state after every write acknowledged before the call, as a crash at that
// instant would leave it, minus nothing. Run files are immutable and are
// hard-linked when dest is on the same filesystem, else copied; MANIFEST,
// the series files and the WAL tail are captured at one instant. Files a
// previous backup left in dest with the same size and CRC-32C are kept, so
// a second backup into the same dest writes only what changed.
//
// The capture holds the flush lock for as long as it takes to read the
// small files and open the others (no flush, merge, retention or bulk
// commit runs meanwhile; writes go on); the copy runs after it. Backups of
// one store run one at a time: a second call waits for the first.
func (db *DB) Backup(ctx context.Context, dest string) (BackupStats, error) {
	return db.backup(ctx, dest, true)
}

// backup is Backup; without link every file is copied.
func (db *DB) backup(ctx context.Context, dest string, link bool) (BackupStats, error) {
	start := time.Now()
	if db.closed.Load() {
		return BackupStats{}, ErrClosed
	}
	if !isOS(db.fs) {
		return BackupStats{}, errors.New("backup: the store is not on the real filesystem")
	}
	// Backups write fixed names into their destination (BACKUP.incomplete,
	// NAME.tmp for each file) and remove what they do not list: two at
	// once into one destination would undo each other, so they queue.
	db.backupMu.Lock()
	defer db.backupMu.Unlock()
	if err := checkBackupDest(db.dir, dest); err != nil {
		return BackupStats{}, err
	}
	db.flushMu.Lock()
	locked := time.Now()
	snap, err := captureDir(db.dir, db.wal.Written)
	held := time.Since(locked)
	if err == nil {
		db.keepReplacedRuns()
		defer db.removeKeptRuns()
	}
	db.flushMu.Unlock()
	if err != nil {
		return BackupStats{}, fmt.Errorf("backup: %w", err)
	}
	defer snap.close()
	st, err := writeBackup(ctx, dest, snap, link)
	st.Duration, st.LockHeld = time.Since(start), held
	if err == nil {
		db.log.Info("backup written", "dest", dest, "files", st.Files, "bytes", st.Bytes,
			"copied_bytes", st.CopiedBytes, "linked", st.Linked, "skipped", st.Skipped,
			"lock_held", st.LockHeld, "took", st.Duration.Round(time.Millisecond))
	}
	return st, err
}

// keepReplacedRuns makes installs keep the names of the runs they
// replace until removeKeptRuns: a merge or a flush that replaces runs
// while a backup runs (the merge loop does so as soon as a day has too
// many) would otherwise remove names the backup is about to hard-link,
// and it would copy those runs instead, writing them to the disk again.
// The caller holds flushMu, so no install is half done. A crash meanwhile
// leaves the kept files unlisted in MANIFEST, and Open removes them.
func (db *DB) keepReplacedRuns() {
	db.mu.Lock()
	db.backups++
	db.mu.Unlock()
}

// removeKeptRuns ends keepReplacedRuns; the last backup to end removes
// the runs kept.
func (db *DB) removeKeptRuns() {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.backups--; db.backups > 0 {
		return
	}
	for _, path := range db.backupKept {
		db.fs.Remove(path)
	}
	db.backupKept = nil
}

// BackupDir backs up the data directory dir of a store that no process has
// open, holding its lock for the whole copy. It returns an error wrapping
// ErrLocked when another process holds the directory.
func BackupDir(ctx context.Context, dir, dest string) (BackupStats, error) {
	start := time.Now()
	if _, err := os.Stat(filepath.Join(dir, "MANIFEST")); err != nil {
		if _, err2 := os.Stat(filepath.Join(dir, "wal")); err2 != nil {
			return BackupStats{}, fmt.Errorf("backup %s: not a Pith data directory (no MANIFEST and no wal/)", dir)
		}
	}
	if err := checkBackupDest(dir, dest); err != nil {
		return BackupStats{}, err
	}
	lock, err := lockDir(dir)
	if err != nil {
		return BackupStats{}, fmt.Errorf("%w: %w", ErrLocked, err)
	}
	defer lock.Close()
	snap, err := captureDir(dir, func(from uint32) ([]wal.Extent, error) { return walFiles(dir, from) })
	if err != nil {
		return BackupStats{}, fmt.Errorf("backup: %w", err)
	}
	defer snap.close()
	st, err := writeBackup(ctx, dest, snap, true)
	st.Duration = time.Since(start)
	return st, err
}

// walFiles lists the whole segments of a closed WAL from segment from on.
func walFiles(dir string, from uint32) ([]wal.Extent, error) {
	ents, err := os.ReadDir(filepath.Join(dir, "wal"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list wal: %w", err)
	}
	var out []wal.Extent
	for _, e := range ents {
		n, ok := wal.ParseSegmentName(e.Name())
		if !ok || n < from {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("stat wal segment: %w", err)
		}
		out = append(out, wal.Extent{Segment: n, Size: info.Size()})
	}
	return out, nil
}

// captureDir captures the files of a consistent state of dir. The caller
// keeps flushes away (flush lock or directory lock) until it returns.
// sideDirs are folders other parts keep in the data directory, backed up
// and restored with the store: the dashboards, process pictures, people's
// accounts and the audit journal. Their files are small or append-only and are read whole
// into the snapshot at the capture instant; LOCK files and temporary files
// stay out.
var sideDirs = []string{"dashboards", "pictures", "users", "audit"}

func captureDir(dir string, walExtents func(from uint32) ([]wal.Extent, error)) (_ *snapshot, err error) {
	snap := &snapshot{version: FormatVersion}
	defer func() {
		if err != nil {
			snap.close()
		}
	}()
	var m *manifest
	buf, err := os.ReadFile(filepath.Join(dir, "MANIFEST"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		m = &manifest{Version: FormatVersion}
	case err != nil:
		return nil, fmt.Errorf("read manifest: %w", err)
	default:
		if m, err = decodeManifest(buf); err != nil {
			return nil, &CorruptionError{File: filepath.Join(dir, "MANIFEST"), Err: err}
		}
		if err := checkFormatVersion(m.Version); err != nil {
			return nil, err
		}
		snap.version = m.Version
		snap.items = append(snap.items, snapItem{rel: "MANIFEST", data: buf})
	}
	for _, name := range seriesFiles {
		buf, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read series file: %w", err)
		}
		snap.items = append(snap.items, snapItem{rel: name, data: buf})
	}
	for _, d := range sideDirs {
		ents, err := os.ReadDir(filepath.Join(dir, d))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", d, err)
		}
		for _, e := range ents {
			if !e.Type().IsRegular() || e.Name() == "LOCK" || strings.Contains(e.Name(), ".tmp") {
				continue
			}
			buf, err := os.ReadFile(filepath.Join(dir, d, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", d, err)
			}
			snap.items = append(snap.items, snapItem{rel: d + "/" + e.Name(), data: buf})
		}
	}
	files := map[string]bool{}
	for _, entry := range m.Runs {
		name, _, _, _, err := parseListName(entry)
		if err != nil {
			return nil, &CorruptionError{File: filepath.Join(dir, "MANIFEST"), Err: err}
		}
		if files[name] {
			continue // a pack, listed once for each of its runs
		}
		files[name] = true
		path := filepath.Join(dir, "runs", name)
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open run listed in manifest: %w", err)
		}
		snap.items = append(snap.items, snapItem{rel: "runs/" + name, f: f, src: path, link: true})
		st, err := f.Stat()
		if err != nil {
			return nil, fmt.Errorf("stat run: %w", err)
		}
		snap.items[len(snap.items)-1].size = st.Size()
	}
	exts, err := walExtents(m.Checkpoint)
	if err != nil {
		return nil, fmt.Errorf("capture wal: %w", err)
	}
	snap.walEnd = fmt.Sprintf("%d:0", m.Checkpoint)
	for _, e := range exts {
		path := filepath.Join(dir, "wal", e.Name())
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open wal segment: %w", err)
		}
		snap.items = append(snap.items, snapItem{rel: "wal/" + e.Name(), f: f, src: path, size: e.Size})
		snap.walEnd = fmt.Sprintf("%d:%d", e.Segment, e.Size)
	}
	return snap, nil
}

// checkBackupDest refuses a destination inside the data directory or
// holding it, and a non-empty directory that is not a backup.
func checkBackupDest(dataDir, dest string) error {
	if dest == "" {
		return errors.New("backup: no destination directory")
	}
	if err := checkApart("destination", dest, "data directory", dataDir); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	ents, err := os.ReadDir(dest)
	if errors.Is(err, os.ErrNotExist) || len(ents) == 0 {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup: read destination: %w", err)
	}
	for _, e := range ents {
		if e.Name() == backupManifestName || e.Name() == backupMarkerName {
			return nil
		}
	}
	return fmt.Errorf("backup: destination %s is not empty and holds no Pith backup; choose an empty or new directory", dest)
}

// checkApart refuses two directories (named what and what2 in the error)
// of which one is, or holds, the other.
func checkApart(what, a, what2, b string) error {
	ra, err := realPath(a)
	if err != nil {
		return err
	}
	rb, err := realPath(b)
	if err != nil {
		return err
	}
	switch {
	case ra == rb:
		return fmt.Errorf("%s %s is the %s itself", what, a, what2)
	case within(ra, rb):
		return fmt.Errorf("%s %s is inside the %s %s", what, a, what2, b)
	case within(rb, ra):
		return fmt.Errorf("%s %s is inside the %s %s", what2, b, what, a)
	}
	return nil
}

// realPath returns the absolute path of p with symbolic links resolved in
// its longest existing prefix.
func realPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest), nil
		}
		if filepath.Dir(cur) == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// within reports whether path p is dir or inside it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// writeBackup writes snap into dest and its BACKUP manifest last.
func writeBackup(ctx context.Context, dest string, snap *snapshot, link bool) (BackupStats, error) {
	st := BackupStats{WALEnd: snap.walEnd}
	for _, d := range append([]string{".", "runs", "wal"}, sideDirs...) {
		if err := os.MkdirAll(filepath.Join(dest, d), 0o755); err != nil {
			return st, fmt.Errorf("backup: create destination: %w", err)
		}
	}
	// The marker goes down before the old BACKUP goes away: from here to
	// the new BACKUP, the destination reads as incomplete.
	if err := writeAtomicOS(filepath.Join(dest, backupMarkerName), []byte("a backup is being written here; without BACKUP this directory is incomplete\n")); err != nil {
		return st, fmt.Errorf("backup: %w", err)
	}
	if err := os.Remove(filepath.Join(dest, backupManifestName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return st, fmt.Errorf("backup: remove old manifest: %w", err)
	}
	if err := syncDirOS(dest); err != nil {
		return st, fmt.Errorf("backup: %w", err)
	}
	m := backupManifest{Format: BackupFormat, StoreVersion: snap.version, Created: time.Now().UTC().Format(time.RFC3339), WALEnd: snap.walEnd}
	keep := map[string]bool{}
	for i := range snap.items {
		if err := ctx.Err(); err != nil {
			return st, fmt.Errorf("backup: %w", err)
		}
		it := &snap.items[i]
		crc, err := putItem(dest, it, link, &st)
		if err != nil {
			return st, fmt.Errorf("backup %s: %w", it.rel, err)
		}
		size := it.size
		if it.data != nil {
			size = int64(len(it.data))
		}
		m.Files = append(m.Files, backupFile{Path: it.rel, Size: size, CRC32C: fmt.Sprintf("%08x", crc)})
		keep[it.rel] = true
		st.Files++
		st.Bytes += size
	}
	for _, d := range append([]string{"runs", "wal"}, sideDirs...) {
		if err := syncDirOS(filepath.Join(dest, d)); err != nil {
			return st, fmt.Errorf("backup: %w", err)
		}
	}
	// Files of an earlier backup that this one does not list (runs merged
	// away, old WAL segments) go; unknown files are left alone.
	for _, d := range append([]string{"runs", "wal"}, sideDirs...) {
		ents, err := os.ReadDir(filepath.Join(dest, d))
		if err != nil {
			return st, fmt.Errorf("backup: list destination: %w", err)
		}
		for _, e := range ents {
			rel := d + "/" + e.Name()
			if !keep[rel] && !e.IsDir() {
				if err := os.Remove(filepath.Join(dest, d, e.Name())); err != nil {
					return st, fmt.Errorf("backup: remove stale file: %w", err)
				}
				st.Removed++
			}
		}
	}
	for _, name := range append([]string{"MANIFEST"}, seriesFiles[:]...) {
		if !keep[name] {
			if err := os.Remove(filepath.Join(dest, name)); err == nil {
				st.Removed++
			}
		}
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Path < m.Files[j].Path })
	if err := writeAtomicOS(filepath.Join(dest, backupManifestName), encodeBackupManifest(&m)); err != nil {
		return st, fmt.Errorf("backup: write manifest: %w", err)
	}
	if err := os.Remove(filepath.Join(dest, backupMarkerName)); err != nil {
		return st, fmt.Errorf("backup: remove marker: %w", err)
	}
	if err := syncDirOS(dest); err != nil {
		return st, fmt.Errorf("backup: %w", err)
	}
	return st, nil
}

// putItem makes dest/it.rel hold the item's bytes and returns their
// CRC-32C: kept when already there, else hard-linked or copied.
func putItem(dest string, it *snapItem, link bool, st *BackupStats) (uint32, error) {
	target := filepath.Join(dest, filepath.FromSlash(it.rel))
	if it.data != nil {
		crc := crc32c.Checksum(it.data)
		if old, err := os.ReadFile(target); err == nil && bytes.Equal(old, it.data) {
			st.Skipped++
			st.SkippedBytes += int64(len(it.data))
			return crc, nil
		}
		if err := writeAtomicOS(target, it.data); err != nil {
			return 0, err
		}
		st.Copied++
		st.CopiedBytes += int64(len(it.data))
		return crc, nil
	}
	if info, err := os.Stat(target); err == nil && info.Size() == it.size {
		if src, err := it.f.Stat(); err == nil && os.SameFile(src, info) {
			crc, err := crcOf(it.f, it.size)
			if err == nil {
				st.Skipped++
				st.SkippedBytes += it.size
			}
			return crc, err
		}
		crc, err := crcOf(it.f, it.size)
		if err != nil {
			return 0, err
		}
		if old, err := crcFile(target, it.size); err == nil && old == crc {
			st.Skipped++
			st.SkippedBytes += it.size
			return crc, nil
		}
	}
	tmp := target + ".tmp"
	os.Remove(tmp)
	crc, linked, err := linkOrCopy(it, tmp, it.link && link)
	if err == nil {
		err = os.Rename(tmp, target)
	}
	if err != nil {
		os.Remove(tmp)
		return 0, err
	}
	if linked {
		st.Linked++
		st.LinkedBytes += it.size
	} else {
		st.Copied++
		st.CopiedBytes += it.size
	}
	return crc, nil
}

// linkOrCopy makes tmp hold the first it.size bytes of it's file: a hard
// link when link is set and the link is that very file at that size,
// else a copy. It returns their CRC-32C and whether tmp is a link.
func linkOrCopy(it *snapItem, tmp string, link bool) (crc uint32, linked bool, err error) {
	if link {
		if err := os.Link(it.src, tmp); err == nil {
			info, err1 := os.Stat(tmp)
			src, err2 := it.f.Stat()
			// The name might be a different file by now (it never is:
			// run names are not reused), so the link is checked.
			if err1 == nil && err2 == nil && os.SameFile(info, src) && info.Size() == it.size {
				crc, err := crcOf(it.f, it.size)
				return crc, true, err
			}
			os.Remove(tmp)
		}
	}
	crc, err = copyPrefix(it.f, it.size, tmp)
	return crc, false, err
}

// copyPrefix copies the first n bytes of src into a new file at path,
// fsyncs it and returns the CRC-32C of the bytes.
func copyPrefix(src io.ReaderAt, n int64, path string) (uint32, error) {
	out, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	h := crc32c.New()
	_, err = io.CopyBuffer(io.MultiWriter(out, h), io.NewSectionReader(src, 0, n), make([]byte, copyBuffer))
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("copy: %w", err)
	}
	return h.Sum32(), nil
}

// crcOf returns the CRC-32C of the first n bytes of r; fewer bytes is an
// error.
func crcOf(r io.ReaderAt, n int64) (uint32, error) {
	h := crc32c.New()
	m, err := io.CopyBuffer(h, io.NewSectionReader(r, 0, n), make([]byte, copyBuffer))
	if err != nil {
		return 0, fmt.Errorf("read: %w", err)
	}
	if m != n {
		return 0, fmt.Errorf("read: %d bytes of %d", m, n)
	}
	return h.Sum32(), nil
}

// crcFile returns the CRC-32C of the first n bytes of the file at path.
func crcFile(path string, n int64) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return crcOf(f, n)
}

// writeAtomicOS is writeFileAtomic on the real filesystem.
func writeAtomicOS(path string, data []byte) error { return writeFileAtomic(vfs.OS{}, path, data) }

// syncDirOS fsyncs a directory so that its entries survive a power cut.
func syncDirOS(dir string) error { return vfs.OS{}.SyncDir(dir) }
