package events

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/pith-historian/pith/internal/jsonenc"
	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
	"github.com/pith-historian/pith/internal/walcursor"
)

// cursor is how far the sink has durably delivered: every WAL record at or
// before Pos is in a sink file. Seq numbers the sink files.
type cursor struct {
	Valid bool
	Pos   wal.Pos
	Seq   uint64
}

const cursorName = "cursor" // in the collector directory; see docs/format/cursor.md

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
	zw      io.WriteCloser // the compressor, writing to bw
	csv     *csv.Writer    // writing to zw, for FormatCSV
	tmp     string
	opened  time.Time
	raw     int64   // uncompressed NDJSON bytes written (as in the WAL)
	last    wal.Pos // the last record in the file
	records int     // WAL records in the file
	events  int     // events in the file
}

// Formats and compressions of sink files (Options.Format, Options.Compression).
const (
	FormatNDJSON    = "ndjson" // canonical NDJSON lines
	FormatCSV       = "csv"    // Hamustro's CSV columns, then id, time and attrs
	CompressGzip    = "gzip"   // RFC 1952, file name ending .gz
	CompressZstd    = "zstd"   // RFC 8878, file name ending .zst
	csvSeparator    = '\x01'   // Hamustro's field separator
	zstdWindowLog   = 20       // 1 MiB zstd window: bounded memory on a Pi
	sinkBufferBytes = 64 << 10
)

// ext is the file name extension of the sink files of o.
func (o *Options) ext() string {
	e := "." + o.Format
	if o.Compression == CompressZstd {
		return e + ".zst"
	}
	return e + ".gz"
}

// CSVColumns are the columns of a CSV sink file: Hamustro's (device_id,
// client_id and session are the event's source, nr its num.nr, at its
// time in UTC "2006-01-02 15:04:05", event its name, the others its str
// attributes of the same name), then the event id, its time in Unix ms
// and attrs, a JSON object {"num": {...}, "str": {...}} of the attributes
// that have no column ("" when none).
var CSVColumns = []string{
	"device_id", "client_id", "session", "nr", "env", "system_version", "product_version", "at", "timezone",
	"event", "device_make", "device_model", "system", "system_language", "browser", "browser_version",
	"product_git_hash", "product_language", "user_id", "tenant_id", "ip", "country", "parameters",
	"id", "time", "attrs",
}

// csvStrColumn says which str attributes have a column.
var csvStrColumn = func() map[string]int {
	m := map[string]int{}
	for i, c := range CSVColumns {
		switch c {
		case "device_id", "client_id", "session", "nr", "at", "event", "id", "time", "attrs":
		default:
			m[c] = i
		}
	}
	return m
}()

// csvRecord fills row (len(CSVColumns)) with ev's columns.
func csvRecord(row []string, ev *Event) {
	clear(row)
	row[0], row[1], row[2] = ev.Source.Device, ev.Source.Client, ev.Source.Session
	row[7] = time.UnixMilli(ev.Time).UTC().Format(time.DateTime)
	row[9] = ev.Name
	row[23] = ev.ID
	row[24] = strconv.FormatInt(ev.Time, 10)
	var rest Event
	for k, v := range ev.Num {
		if k == "nr" {
			row[3] = string(jsonenc.AppendFloat(nil, v))
			continue
		}
		if rest.Num == nil {
			rest.Num = map[string]float64{}
		}
		rest.Num[k] = v
	}
	for k, v := range ev.Str {
		if i, ok := csvStrColumn[k]; ok {
			row[i] = v
			continue
		}
		if rest.Str == nil {
			rest.Str = map[string]string{}
		}
		rest.Str[k] = v
	}
	if rest.Num != nil || rest.Str != nil {
		row[25] = string(appendAttrs(nil, &rest))
	}
}

// appendAttrs appends {"num":{...},"str":{...}} of ev (either left out
// when empty).
func appendAttrs(b []byte, ev *Event) []byte {
	line := AppendJSON(nil, ev)
	// The canonical line is {"id":..,"time":..,"name":..,"source":{..},"num":..,"str":..}\n:
	// keep what follows the source object.
	i := bytes.Index(line, []byte(`,"source":{`))
	j := i + bytes.IndexByte(line[i:], '}') + 1
	b = append(b, '{')
	return append(b, line[j+1:len(line)-1]...)
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
	// A crash between a file's rename and the cursor's update leaves a
	// complete file numbered cursor.Seq+1 whose records are still after
	// the cursor (the WAL keeps them: segments go only after the cursor
	// is saved). They are written again, so the file goes, and each
	// record ends up in exactly one file.
	files, err := listSinkFiles(fsys, s.root)
	if err != nil {
		return nil, err
	}
	for _, p := range files {
		if seq, ok := fileSeq(p); ok && seq == s.cursor.Seq+1 {
			log.Info("removing an event file completed but not recorded before a crash; its events are written again", "file", p)
			if err := fsys.Remove(p); err != nil {
				return nil, fmt.Errorf("remove unrecorded sink file: %w", err)
			}
			if err := fsys.SyncDir(filepath.Dir(p)); err != nil {
				return nil, fmt.Errorf("sync sink dir: %w", err)
			}
		}
	}
	return s, nil
}

// fileSeq returns the sequence number in a sink file's name
// (HHMMSS-<seq>.<ext>).
func fileSeq(path string) (uint64, bool) {
	base := filepath.Base(path)
	_, rest, ok := strings.Cut(base, "-")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, ".")
	seq, err := strconv.ParseUint(num, 10, 64)
	return seq, err == nil
}

// write appends the NDJSON lines of a WAL record at pos to the open file,
// opening one when none is.
func (s *fileSink) write(pos wal.Pos, lines []byte, now time.Time) error {
	if s.cur == nil {
		s.cursor.Seq++
		tmp := filepath.Join(s.tmpDir, strconv.FormatUint(s.cursor.Seq, 10)+s.opts.ext())
		f, err := s.fs.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("create sink file: %w", err)
		}
		c := &sinkFile{f: f, bw: bufio.NewWriterSize(f, sinkBufferBytes), tmp: tmp, opened: now}
		if s.opts.Compression == CompressZstd {
			// The fastest level compresses these lines as well as the
			// default one (the random ids dominate), at half the CPU and
			// a third of the memory.
			c.zw, err = zstd.NewWriter(c.bw, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<zstdWindowLog),
				zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithLowerEncoderMem(true))
		} else {
			// klauspost/compress rather than compress/gzip: at level 1
			// it compresses these lines about twice as fast and a little
			// smaller (25.6 rather than 26.9 B/event), in standard gzip.
			c.zw, err = gzip.NewWriterLevel(c.bw, s.opts.GzipLevel)
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("create sink compressor: %w", err)
		}
		if s.opts.Format == FormatCSV {
			c.csv = csv.NewWriter(c.zw)
			c.csv.Comma = csvSeparator
		}
		s.cur = c
	}
	n := bytes.Count(lines, []byte{'\n'})
	if s.cur.csv != nil {
		// The canonical lines always decode; an error means a damaged
		// record, which fails the delivery (and is retried) rather than
		// dropping events silently.
		evs, err := DecodeBytes(nil, lines, 1, math.MaxInt)
		if err != nil {
			return fmt.Errorf("decode events record at %v for csv: %w", pos, err)
		}
		row := make([]string, len(CSVColumns))
		for i := range evs {
			csvRecord(row, &evs[i])
			s.cur.csv.Write(row)
		}
		s.cur.csv.Flush()
		if err := s.cur.csv.Error(); err != nil {
			return fmt.Errorf("write sink file: %w", err)
		}
	} else if _, err := s.cur.zw.Write(lines); err != nil {
		return fmt.Errorf("write sink file: %w", err)
	}
	s.cur.raw += int64(len(lines))
	s.cur.last = pos
	s.cur.records++
	s.cur.events += n
	return nil
}

// due reports whether the open file should be closed by size or age.
func (s *fileSink) due(now time.Time) bool {
	return s.cur != nil && (s.cur.raw >= s.opts.MaxFileBytes || now.Sub(s.cur.opened) >= s.opts.RotateEvery)
}

// commit completes the open file, moves it into place and saves the
// cursor past its last record; only then are its records delivered.
// It returns the file's path, or "" when no file was open.
func (s *fileSink) commit() (string, error) {
	c := s.cur
	if c == nil {
		return "", nil
	}
	if err := c.zw.Close(); err != nil {
		return "", fmt.Errorf("compress sink file: %w", err)
	}
	if err := c.bw.Flush(); err != nil {
		return "", fmt.Errorf("write sink file: %w", err)
	}
	if err := c.f.Sync(); err != nil {
		return "", fmt.Errorf("fsync sink file: %w", err)
	}
	if err := c.f.Close(); err != nil {
		return "", fmt.Errorf("close sink file: %w", err)
	}
	c.f = nil
	t := c.opened.UTC()
	day := filepath.Join(s.root, t.Format("2006"), t.Format("01"), t.Format("02"))
	if err := mkdirDurable(s.fs, day); err != nil {
		return "", err
	}
	final := filepath.Join(day, fmt.Sprintf("%s-%06d%s", t.Format("150405"), s.cursor.Seq, s.opts.ext()))
	if err := s.fs.Rename(c.tmp, final); err != nil {
		return "", fmt.Errorf("move sink file into place: %w", err)
	}
	if err := s.fs.SyncDir(day); err != nil {
		return "", fmt.Errorf("sync sink dir: %w", err)
	}
	next := cursor{Valid: true, Pos: c.last, Seq: s.cursor.Seq}
	if err := writeCursor(s.fs, s.dir, next); err != nil {
		return "", err
	}
	s.cursor = next
	s.cur = nil
	return final, nil
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
	c, ok, err := walcursor.Read(fsys, path)
	if err != nil {
		return cursor{}, fmt.Errorf("read events cursor: %w", err)
	}
	return cursor{Valid: ok, Pos: c.Pos, Seq: c.Seq}, nil
}

// writeCursor replaces the cursor file atomically: a crash leaves the old
// or the new cursor, never a mix.
func writeCursor(fsys vfs.FS, dir string, c cursor) error {
	if err := walcursor.Write(fsys, filepath.Join(dir, cursorName), walcursor.Cursor{Pos: c.Pos, Seq: c.Seq}); err != nil {
		return fmt.Errorf("write events cursor: %w", err)
	}
	return nil
}
