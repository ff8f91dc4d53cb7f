package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
)

// VerifyReport is what Verify found. Problems are damage (restore refuses
// a backup with any); Notes are facts that are not damage, such as the torn
// tail of a data directory's last WAL segment after a crash.
type VerifyReport struct {
	Dir      string   `json:"dir"`
	Backup   bool     `json:"backup"` // dir is a backup: it has BACKUP or BACKUP.incomplete, or no LOCK
	Files    int      `json:"files"`  // files checked
	Bytes    int64    `json:"bytes"`  // their size
	Problems []string `json:"problems"`
	Notes    []string `json:"notes"`
}

// OK reports whether no damage was found.
func (r *VerifyReport) OK() bool { return len(r.Problems) == 0 }

func (r *VerifyReport) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

func (r *VerifyReport) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Verify checks every checksum of a backup or of a data directory that no
// process writes: for a backup, the BACKUP manifest and each listed file's
// size and CRC-32C; for both, the MANIFEST, the series files, every block,
// index and footer of every listed run, and every WAL record from the
// checkpoint on. The error is for a directory that cannot be read at all;
// damage goes into the report.
func Verify(dir string) (*VerifyReport, error) {
	rep := &VerifyReport{Dir: dir}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("verify %s: not a directory", dir)
	}
	_, errM := os.Stat(filepath.Join(dir, backupManifestName))
	_, errI := os.Stat(filepath.Join(dir, backupMarkerName))
	// A data directory always has the LOCK file Open creates; a backup
	// never has one. So a directory without BACKUP and without LOCK is
	// taken for a backup whose manifest is missing.
	_, errL := os.Stat(filepath.Join(dir, "LOCK"))
	rep.Backup = errM == nil || errI == nil || errL != nil
	if !rep.Backup || errM != nil && errI != nil {
		_, e1 := os.Stat(filepath.Join(dir, "MANIFEST"))
		_, e2 := os.Stat(filepath.Join(dir, "wal"))
		_, e3 := os.Stat(filepath.Join(dir, seriesFiles[0]))
		if e1 != nil && e2 != nil && e3 != nil {
			return nil, fmt.Errorf("verify %s: neither a Pith backup (no BACKUP) nor a data directory (no MANIFEST, series.dat or wal/)", dir)
		}
	}
	if rep.Backup {
		verifyBackupFiles(dir, rep)
	}
	verifyStore(dir, rep)
	return rep, nil
}

// verifyBackupFiles checks the BACKUP manifest and the files it lists.
func verifyBackupFiles(dir string, rep *VerifyReport) {
	if _, err := os.Stat(filepath.Join(dir, backupMarkerName)); err == nil {
		rep.problem("incomplete backup: %s is present (the backup was interrupted or is still being written; run pith backup again)", backupMarkerName)
	}
	buf, err := os.ReadFile(filepath.Join(dir, backupManifestName))
	if errors.Is(err, os.ErrNotExist) {
		rep.problem("incomplete backup: no %s manifest (a data directory has a LOCK file; this has neither)", backupManifestName)
		return
	}
	if err != nil {
		rep.problem("read %s: %v", backupManifestName, err)
		return
	}
	m, err := decodeBackupManifest(buf)
	if err != nil {
		rep.problem("%s manifest damaged: %v", backupManifestName, err)
		return
	}
	if m.Format > BackupFormat {
		rep.problem("%v", &NewerFormatError{What: "backup", Version: m.Format, Max: BackupFormat})
		return
	}
	if err := checkFormatVersion(m.StoreVersion); err != nil {
		rep.problem("%v", err)
		return
	}
	listed := map[string]bool{backupManifestName: true}
	for _, f := range m.Files {
		listed[f.Path] = true
		if !validRel(f.Path) {
			rep.problem("%s lists a bad path %q", backupManifestName, f.Path)
			continue
		}
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		info, err := os.Stat(path)
		if err != nil {
			rep.problem("%s: missing (%v)", f.Path, errors.Unwrap(err))
			continue
		}
		rep.Files++
		rep.Bytes += info.Size()
		if info.Size() != f.Size {
			rep.problem("%s: size %d, manifest says %d", f.Path, info.Size(), f.Size)
			continue
		}
		crc, err := crcFile(path, f.Size)
		if err != nil {
			rep.problem("%s: %v", f.Path, err)
			continue
		}
		if want := f.CRC32C; fmt.Sprintf("%08x", crc) != want {
			rep.problem("%s: CRC-32C %08x, manifest says %s", f.Path, crc, want)
		}
	}
	// Store files the manifest does not list are not part of the backup.
	for _, d := range append([]string{"runs", "wal"}, sideDirs...) {
		ents, _ := os.ReadDir(filepath.Join(dir, d))
		for _, e := range ents {
			if rel := d + "/" + e.Name(); !listed[rel] {
				rep.note("%s: not listed in %s (ignored by restore)", rel, backupManifestName)
			}
		}
	}
}

// validRel accepts the relative paths a backup holds.
func validRel(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return false
	}
	for _, part := range strings.Split(p, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// verifyStore checks the store files of dir (a data directory or a backup).
func verifyStore(dir string, rep *VerifyReport) {
	m := &manifest{Version: FormatVersion}
	count := func(path string) {
		if info, err := os.Stat(path); err == nil && !rep.Backup {
			rep.Files++
			rep.Bytes += info.Size()
		}
	}
	mpath := filepath.Join(dir, "MANIFEST")
	buf, err := os.ReadFile(mpath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		rep.note("MANIFEST: none (a store that never flushed: everything is in the WAL)")
	case err != nil:
		rep.problem("MANIFEST: %v", err)
		return
	default:
		count(mpath)
		if m, err = decodeManifest(buf); err != nil {
			rep.problem("MANIFEST: damaged: %v", err)
			return
		}
		if err := checkFormatVersion(m.Version); err != nil {
			rep.problem("MANIFEST: %v", err)
			return
		}
	}
	names := -1
	for _, name := range seriesFiles {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		}
		count(path)
		s, err := loadSeriesFile(vfs.OS{}, path)
		if err != nil {
			rep.problem("%s: %v", name, err)
			continue
		}
		names = max(names, len(s.names))
	}
	listed := make(map[string]bool, len(m.Runs))
	for _, name := range m.Runs {
		file, base, size, _, err := parseListName(name)
		if err != nil {
			rep.problem("MANIFEST: %v", err)
			continue
		}
		path := filepath.Join(dir, "runs", file)
		if _, err := os.Stat(path); err != nil {
			rep.problem("runs/%s: listed in MANIFEST but missing", file)
			continue
		}
		if !listed[file] {
			count(path)
		}
		listed[file] = true
		for _, p := range verifyRun(path, base, size, names) {
			rep.problem("runs/%s: %s", name, p)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "runs"))
	for _, e := range ents {
		if !listed[e.Name()] && !rep.Backup {
			rep.note("runs/%s: not listed in MANIFEST (Open removes it)", e.Name())
		}
	}
	verifyWAL(dir, m.Checkpoint, rep, count)
}

// verifyWAL reads every record of the segments from the checkpoint on.
func verifyWAL(dir string, checkpoint uint32, rep *VerifyReport, count func(string)) {
	ents, err := os.ReadDir(filepath.Join(dir, "wal"))
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			rep.problem("wal: %v", err)
		}
		return
	}
	var segs []uint32
	for _, e := range ents {
		if n, ok := wal.ParseSegmentName(e.Name()); ok && n >= checkpoint {
			segs = append(segs, n)
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i] < segs[j] })
	if checkpoint > 0 && (len(segs) == 0 || segs[0] != checkpoint) && !rep.Backup {
		// A store whose last segment was cut and not written to yet has
		// none at the checkpoint after a clean close; that is normal.
		rep.note("wal: no segment %d (the checkpoint); replay starts at the next one", checkpoint)
	}
	for i, n := range segs {
		if i > 0 && n != segs[i-1]+1 {
			rep.problem("wal: segments %d to %d missing", segs[i-1]+1, n-1)
		}
		path := filepath.Join(dir, "wal", wal.Extent{Segment: n}.Name())
		count(path)
		last := i == len(segs)-1
		damage, torn, err := wal.CheckSegment(path, n, last)
		if err != nil {
			rep.problem("wal/%s: %v", filepath.Base(path), err)
			continue
		}
		for _, d := range damage {
			rep.problem("wal/%s: damaged record at offset %d: %v", filepath.Base(path), d.Offset, d.Err)
		}
		if torn >= 0 {
			rep.note("wal/%s: torn tail at offset %d (a crash; Open cuts it)", filepath.Base(path), torn)
		}
	}
}

// verifyRun checks a run's header, both footers, both index copies and
// every block; names is the number of series in the series file, or -1
// when it could not be read.
func verifyRun(path string, base, size int64, names int) []string {
	var out []string
	r, err := openRunAt(vfs.OS{}, path, base, size)
	if err != nil {
		return []string{fmt.Sprintf("unreadable: %v", err)}
	}
	defer r.close()
	d := r.data
	if string(d[:len(runMagic)]) != runMagic {
		out = append(out, "header damaged (bad magic; not used by the reader)")
	} else if v := binary.LittleEndian.Uint32(d[8:]); v > runVersionText {
		out = append(out, fmt.Sprintf("run format %d is newer than this Pith supports (%d); upgrade Pith", v, runVersionText))
	} else if v != runVersion && v != runVersionText {
		out = append(out, fmt.Sprintf("header damaged (version %d)", v))
	}
	var idxCRC uint32
	var idxLen int64
	var idxOffs []int64
	for k, fo := range []int64{r.size - runFooterSize, r.size - 2*runFooterSize} {
		foot := d[fo : fo+runFooterSize]
		if string(foot[28:]) != runFooterMagic || crc32c.Checksum(foot[:24]) != binary.LittleEndian.Uint32(foot[24:]) {
			out = append(out, fmt.Sprintf("footer copy %d at offset %d damaged (the other copy is used)", 2-k, fo))
			continue
		}
		if idxOffs == nil {
			idxLen = int64(binary.LittleEndian.Uint32(foot[8:]))
			idxCRC = binary.LittleEndian.Uint32(foot[12:])
			idxOffs = []int64{int64(binary.LittleEndian.Uint64(foot[0:])), int64(binary.LittleEndian.Uint64(foot[16:]))}
		}
	}
	for k, off := range idxOffs {
		if off < runHeaderSize || off+idxLen > r.size || crc32c.Checksum(d[off:off+idxLen]) != idxCRC {
			out = append(out, fmt.Sprintf("index copy %d at offset %d damaged (the other copy is used)", k+1, off))
		}
	}
	var dc decodedChunk
	for i, ss := 0, r.index(); i < len(ss); i++ {
		s := &ss[i]
		if names >= 0 && int(s.id) >= names {
			out = append(out, fmt.Sprintf("series id %d is not in the series file", s.id))
		}
		for j := range s.chunks {
			if err := r.decodeChunk(&s.chunks[j], &dc); err != nil {
				out = append(out, fmt.Sprintf("chunk block at offset %d: %v", s.chunks[j].off, errors.Unwrap(err)))
			}
		}
		if s.fine == noTier || s.fine == fineText {
			continue
		}
		for l := int(s.fine); l < numTiers; l++ {
			if _, err := r.decodeTier(s, l); err != nil {
				out = append(out, fmt.Sprintf("tier %d block at offset %d: %v", l, s.tier(l).off, errors.Unwrap(err)))
			}
		}
	}
	return out
}
