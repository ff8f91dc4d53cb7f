package events

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
)

// cursor is how far the sink has durably delivered: every WAL record at or
// before Pos is in a sink file. Seq numbers the sink files.
type cursor struct {
	Valid bool
	Pos   wal.Pos
	Seq   uint64
}

const cursorName = "cursor" // in the collector directory; see docs/format/events.md

// fileSink writes WAL records into gzip-compressed NDJSON files under
// <dir>/events/YYYY/MM/DD/HHMMSS-<seq>.ndjson.gz. A file is written under
// <dir>/events/.tmp and renamed into place only when complete and
// fsynced, so a reader never sees a partial file. It is used by the sink
// loop only and is not safe for concurrent use.
type fileSink struct {
	fs     vfs.FS
	dir    string // collector directory
	root   string // <dir>/events
	tmpDir string
	opts   Options
	log    *slog.Logger
	cursor cursor

	cur *sinkFile // nil when no file is open
}

// sinkFile is the file being filled.
type sinkFile struct {
	f       vfs.File
	bw      *bufio.Writer
	gz      *gzip.Writer
	tmp     string
	opened  time.Time
	raw     int64   // uncompressed bytes written
	last    wal.Pos // the last record in the file
	records int     // WAL records in the file
}

func newFileSink(fsys vfs.FS, dir string, opts Options, log *slog.Logger) (*fileSink, error) {
	s := &fileSink{fs: fsys, dir: dir, root: filepath.Join(dir, "events"), opts: opts, log: log}
	s.tmpDir = filepath.Join(s.root, ".tmp")
	if err := mkdirDurable(fsys, s.tmpDir); err != nil {
		return nil, err
	}
	// A file left in .tmp by a crash was never renamed, so its records
	// are still after the cursor and will be written again.
	names, err := fsys.ReadDir(s.tmpDir)
	if err != nil {
		return nil, fmt.Errorf("list sink tmp dir: %w", err)
	}
	for _, n := range names {
		if err := fsys.Remove(filepath.Join(s.tmpDir, n)); err != nil {
			return nil, fmt.Errorf("remove stale sink file: %w", err)
		}
	}
	if s.cursor, err = readCursor(fsys, filepath.Join(dir, cursorName)); err != nil {
		return nil, err
	}
	return s, nil
}

// write appends the NDJSON lines of a WAL record at pos to the open file,
// opening one when none is.
func (s *fileSink) write(pos wal.Pos, lines []byte, now time.Time) error {
	if s.cur == nil {
		s.cursor.Seq++
		tmp := filepath.Join(s.tmpDir, strconv.FormatUint(s.cursor.Seq, 10)+".ndjson.gz")
		f, err := s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("create sink file: %w", err)
		}
		bw := bufio.NewWriterSize(f, 64<<10)
		gz, _ := gzip.NewWriterLevel(bw, s.opts.GzipLevel)
		s.cur = &sinkFile{f: f, bw: bw, gz: gz, tmp: tmp, opened: now}
	}
	if _, err := s.cur.gz.Write(lines); err != nil {
		return fmt.Errorf("write sink file: %w", err)
	}
	s.cur.raw += int64(len(lines))
	s.cur.last = pos
	s.cur.records++
	return nil
}

// due reports whether the open file should be closed by size or age.
func (s *fileSink) due(now time.Time) bool {
	return s.cur != nil && (s.cur.raw >= s.opts.MaxFileBytes || now.Sub(s.cur.opened) >= s.opts.RotateEvery)
}

// commit completes the open file, moves it into place and saves the
// cursor past its last record; only then are its records delivered.
// It returns false when no file was open.
func (s *fileSink) commit() (bool, error) {
	c := s.cur
	if c == nil {
		return false, nil
	}
	if err := c.gz.Close(); err != nil {
		return false, fmt.Errorf("compress sink file: %w", err)
	}
	if err := c.bw.Flush(); err != nil {
		return false, fmt.Errorf("write sink file: %w", err)
	}
	if err := c.f.Sync(); err != nil {
		return false, fmt.Errorf("fsync sink file: %w", err)
	}
	if err := c.f.Close(); err != nil {
		return false, fmt.Errorf("close sink file: %w", err)
	}
	c.f = nil
	t := c.opened.UTC()
	day := filepath.Join(s.root, t.Format("2006"), t.Format("01"), t.Format("02"))
	if err := mkdirDurable(s.fs, day); err != nil {
		return false, err
	}
	final := filepath.Join(day, fmt.Sprintf("%s-%06d.ndjson.gz", t.Format("150405"), s.cursor.Seq))
	if err := s.fs.Rename(c.tmp, final); err != nil {
		return false, fmt.Errorf("move sink file into place: %w", err)
	}
	if err := s.fs.SyncDir(day); err != nil {
		return false, fmt.Errorf("sync sink dir: %w", err)
	}
	next := cursor{Valid: true, Pos: c.last, Seq: s.cursor.Seq}
	if err := writeCursor(s.fs, s.dir, next); err != nil {
		return false, err
	}
	s.cursor = next
	s.cur = nil
	return true, nil
}

// abort drops the open file after a failure; its records stay after the
// cursor and are written again.
func (s *fileSink) abort() {
	if s.cur == nil {
		return
	}
	if s.cur.f != nil {
		s.cur.f.Close()
	}
	if err := s.fs.Remove(s.cur.tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("remove failed sink file", "file", s.cur.tmp, "err", err)
	}
	s.cur = nil
}

// mkdirDurable creates dir and its missing parents and syncs the parent
// of each one created, so that the directories survive a power cut.
func mkdirDurable(fsys vfs.FS, dir string) error {
	var created []string
	for d := filepath.Clean(dir); filepath.Dir(d) != d; d = filepath.Dir(d) {
		if _, err := fsys.ReadDir(d); err == nil {
			break
		}
		created = append(created, d)
	}
	if len(created) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create dir: %w", err)
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := fsys.SyncDir(filepath.Dir(created[i])); err != nil {
			return fmt.Errorf("sync dir: %w", err)
		}
	}
	return nil
}

// readCursor reads the cursor file; a missing file is the zero cursor.
func readCursor(fsys vfs.FS, path string) (cursor, error) {
	f, err := vfs.Open(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return cursor{}, nil
	}
	if err != nil {
		return cursor{}, fmt.Errorf("open events cursor: %w", err)
	}
	defer f.Close()
	b := make([]byte, 128)
	n, _ := f.ReadAt(b, 0)
	var c cursor
	fields := strings.Fields(string(b[:n]))
	if len(fields) != 4 || fields[0] != "v1" {
		return cursor{}, fmt.Errorf("read events cursor %s: bad content %q", path, b[:n])
	}
	seg, err1 := strconv.ParseUint(fields[1], 10, 32)
	off, err2 := strconv.ParseInt(fields[2], 10, 64)
	seq, err3 := strconv.ParseUint(fields[3], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return cursor{}, fmt.Errorf("read events cursor %s: %w", path, err)
	}
	c.Valid, c.Pos, c.Seq = true, wal.Pos{Segment: uint32(seg), Offset: off}, seq
	return c, nil
}

// writeCursor replaces the cursor file atomically: tmp, fsync, rename,
// fsync dir. The file is rewritten whole, so a crash leaves the old or
// the new cursor, never a mix.
func writeCursor(fsys vfs.FS, dir string, c cursor) error {
	tmp := filepath.Join(dir, cursorName+".tmp")
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create events cursor: %w", err)
	}
	_, err = fmt.Fprintf(f, "v1 %d %d %d\n", c.Pos.Segment, c.Pos.Offset, c.Seq)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write events cursor: %w", err)
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, cursorName)); err != nil {
		return fmt.Errorf("move events cursor into place: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync events dir: %w", err)
	}
	return nil
}
