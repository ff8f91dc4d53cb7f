package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/model"
)

// goldenDataDir is a backup (so a data directory plus BACKUP) written by
// format version 1. Every later Pith must restore and open it with the
// same answers; `PITH_UPDATE_GOLDEN=1 go test -run TestGoldenDataDir
// ./internal/store` rewrites it, which is only right when FormatVersion is
// still 1 (a new version adds a new folder and keeps this one).
const goldenDataDir = "testdata/format/datadir-v1"

// goldenDirPoints are the points of the golden data directory: two days in
// runs (one flush each), then a few points left in the WAL.
func goldenDirPoints() (runs1, runs2, walOnly []model.Point) {
	base := 19_700 * dayMs
	for i := range 40 {
		runs1 = append(runs1, model.Point{Tag: "site.pump.flow", T: base + int64(i)*60_000, V: float64(i) / 4})
		runs1 = append(runs1, model.Point{Tag: "site.pump.state", T: base + int64(i)*600_000, V: float64(i % 2), Q: model.QualityUncertain})
	}
	for i := range 30 {
		runs2 = append(runs2, model.Point{Tag: "site.pump.flow", T: base + dayMs + int64(i)*60_000, V: 100 + float64(i)})
	}
	walOnly = []model.Point{
		{Tag: "site.pump.flow", T: base + dayMs + 31*60_000, V: 7.5},
		{Tag: "site.tank.level", T: base + dayMs + 5_000, V: -3.25, Q: model.QualityBad},
	}
	return
}

func TestGoldenDataDir(t *testing.T) {
	if os.Getenv("PITH_UPDATE_GOLDEN") != "" {
		if FormatVersion != 1 {
			t.Fatalf("FormatVersion is %d: add a new golden folder, keep %s", FormatVersion, goldenDataDir)
		}
		writeGoldenDataDir(t, goldenDataDir)
	}
	checkGoldenDataDir(t, goldenDataDir)
}

// archDataDirs hold the golden points written by this format version on
// each architecture Pith ships for, so that each opens what each other
// wrote (byte order, word size, alignment). CI runs this test on amd64
// and, under qemu-user, on linux/arm64 and linux/arm (32-bit). To write
// the folder of one, on that architecture or emulated:
//
//	PITH_UPDATE_ARCH_GOLDEN=1 GOARCH=arm GOARM=7 go test -exec qemu-arm -run TestArchDataDirs ./internal/store
//
// A new FormatVersion adds a new set of folders and keeps these.
const archDataDirVersion = 2

var archDataDirs = map[string]string{
	"amd64": "testdata/format/datadir-v2-amd64",
	"arm64": "testdata/format/datadir-v2-arm64",
	"arm":   "testdata/format/datadir-v2-arm",
}

func TestArchDataDirs(t *testing.T) {
	if os.Getenv("PITH_UPDATE_ARCH_GOLDEN") != "" {
		dir, ok := archDataDirs[runtime.GOARCH]
		if !ok {
			t.Fatalf("no golden folder for GOARCH %s", runtime.GOARCH)
		}
		if FormatVersion != archDataDirVersion {
			t.Fatalf("FormatVersion is %d: add a new set of folders, keep %s", FormatVersion, dir)
		}
		writeGoldenDataDir(t, dir)
	}
	for arch, dir := range archDataDirs {
		t.Run("written on "+arch, func(t *testing.T) { checkGoldenDataDir(t, dir) })
	}
}

// checkGoldenDataDir verifies the golden backup in dir, restores and
// opens it, and expects the golden points.
func checkGoldenDataDir(t *testing.T, dir string) {
	t.Helper()
	rep, err := Verify(dir)
	if err != nil || !rep.OK() || !rep.Backup {
		t.Fatalf("verify golden: %v %+v", err, rep)
	}
	dst := filepath.Join(t.TempDir(), "d")
	if _, err := Restore(dir, dst, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dst, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := naive{}
	a, b, c := goldenDirPoints()
	m.write(a)
	m.write(b)
	m.write(c)
	sameRaw(t, db, m, "site.pump.flow", "site.pump.state", "site.tank.level")
}

// writeGoldenDataDir makes the golden directory with this code.
func writeGoldenDataDir(t *testing.T, goldenDataDir string) {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, b, c := goldenDirPoints()
	ctx := context.Background()
	for _, pts := range [][]model.Point{a, b} {
		if err := db.Write(ctx, pts); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Write(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(goldenDataDir); err != nil {
		t.Fatal(err)
	}
	if _, err := db.backup(ctx, goldenDataDir, false); err != nil {
		t.Fatal(err)
	}
}

// TestNewerFormatRefused checks that data written by a newer Pith (one
// format version up) is refused with a clear message, not misread.
func TestNewerFormatRefused(t *testing.T) {
	newer := FormatVersion + 1
	t.Run("manifest", func(t *testing.T) {
		dir, _ := buildCorruptStore(t)
		m := &manifest{Version: newer, NextSeq: 1}
		if err := os.WriteFile(filepath.Join(dir, "MANIFEST"), encodeManifest(m), 0o644); err != nil {
			t.Fatal(err)
		}
		// A newer series file must not be what stops it: the version is
		// checked first.
		if err := os.WriteFile(filepath.Join(dir, "series.dat"), []byte("PITHSER2 something new"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, testOptions())
		want := fmt.Sprintf("data directory format %d is newer than this Pith supports (%d); upgrade Pith", newer, FormatVersion)
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrNewerFormat) {
			t.Fatalf("open: %v, want %q", err, want)
		}
		rep, err := Verify(dir)
		if err != nil || rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), want) {
			t.Fatalf("verify: %v %+v", err, rep)
		}
	})
	t.Run("wal segment", func(t *testing.T) {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "wal"), 0o755)
		h := []byte("PWAL")
		h = append(h, byte(newer), 0, 0, 0)
		h = binary.LittleEndian.AppendUint32(h, 1)
		h = binary.LittleEndian.AppendUint32(h, crc32c.Checksum(h))
		h = append(h, make([]byte, 40)...) // records of a format we cannot know
		if err := os.WriteFile(filepath.Join(dir, "wal", "00000001.wal"), h, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(dir, testOptions())
		if err == nil || !strings.Contains(err.Error(), "upgrade Pith") {
			t.Fatalf("open: %v, want a refusal saying upgrade Pith", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "wal", "00000001.wal")); err != nil {
			t.Errorf("the newer segment was removed: %v", err)
		}
	})
	t.Run("backup", func(t *testing.T) {
		b := copyDir(t, goldenDataDir)
		m := readBackupManifest(t, b)
		m.Format = BackupFormat + 1
		if err := os.WriteFile(filepath.Join(b, backupManifestName), encodeBackupManifest(m), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Restore(b, filepath.Join(t.TempDir(), "d"), RestoreOptions{})
		want := "backup format 2 is newer than this Pith supports (1); upgrade Pith"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("restore: %v, want %q", err, want)
		}
	})
}

// FuzzBackupManifest feeds the BACKUP decoder arbitrary bytes; it must
// never panic, and what it accepts must encode back to a decodable form.
func FuzzBackupManifest(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(goldenDataDir, backupManifestName)); err == nil {
		f.Add(b)
	}
	f.Add([]byte("{}\ncrc32c 00000000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeBackupManifest(b)
		if err != nil {
			return
		}
		if _, err := decodeBackupManifest(encodeBackupManifest(m)); err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
	})
}

// TestDeleteRaisesVersion: a directory stays at version 1, readable by a
// Pith older than deletes, until its first delete makes it version 2; the
// first data record (packed) makes it formatPacked. The first write is a
// bulk load, which writes no WAL record.
func TestDeleteRaisesVersion(t *testing.T) {
	dir := t.TempDir()
	opts := DefaultOptions()
	opts.BulkPoints = 1
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	version := func() int {
		t.Helper()
		buf, err := os.ReadFile(filepath.Join(dir, "MANIFEST"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := decodeManifest(buf)
		if err != nil {
			t.Fatal(err)
		}
		return m.Version
	}
	ctx := context.Background()
	pts := []model.Point{{Tag: "a.b", T: 1000, V: 1}, {Tag: "a.b", T: 2000, V: 2}}
	if err := db.Write(ctx, pts); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != 1 {
		t.Fatalf("version before any delete = %d, want 1", v)
	}
	if n, err := db.Delete(ctx, "a.b", 1500, 2500); err != nil || n != 1 {
		t.Fatalf("delete: %d, %v", n, err)
	}
	if v := version(); v != formatDeletes {
		t.Fatalf("version after a delete = %d, want %d", v, formatDeletes)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Write(ctx, []model.Point{{Tag: "a.b", T: 3000, V: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != formatChained {
		t.Fatalf("version after a small write = %d, want %d", v, formatChained)
	}
}
