package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/model"
)

// TestRestoreRefusesEscapingPaths rewrites a good backup's BACKUP
// manifest (with a valid checksum) so that it lists a file outside the
// backup: "../", an absolute path, a backslash. Verify reports it, Restore
// refuses it, and nothing is written outside the data directory.
func TestRestoreRefusesEscapingPaths(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	db, err := Open(data, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(context.Background(), []model.Point{{Tag: "a", T: 1000, V: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	payload := []byte("escaped")
	sum := fmt.Sprintf("%08x", crc32c.Checksum(payload))
	for _, evil := range []string{"../escaped", "runs/../../escaped", "/tmp/escaped-abs", `runs\..\..\escaped`} {
		t.Run(strings.ReplaceAll(evil, "/", "_"), func(t *testing.T) {
			bak := filepath.Join(t.TempDir(), "bak")
			if _, err := BackupDir(context.Background(), data, bak); err != nil {
				t.Fatal(err)
			}
			buf, err := os.ReadFile(filepath.Join(bak, backupManifestName))
			if err != nil {
				t.Fatal(err)
			}
			m, err := decodeBackupManifest(buf)
			if err != nil {
				t.Fatal(err)
			}
			// The file the manifest names exists where the path points,
			// relative to the backup, so only the path check can stop it.
			if !filepath.IsAbs(evil) && !strings.Contains(evil, `\`) {
				os.WriteFile(filepath.Join(bak, evil), payload, 0o644)
			}
			m.Files = append(m.Files, backupFile{Path: evil, Size: int64(len(payload)), CRC32C: sum})
			if err := os.WriteFile(filepath.Join(bak, backupManifestName), encodeBackupManifest(m), 0o644); err != nil {
				t.Fatal(err)
			}
			if rep, err := Verify(bak); err == nil && rep.OK() {
				t.Errorf("verify accepted a manifest listing %q", evil)
			}
			dst := filepath.Join(t.TempDir(), "d1", "d2", "restored")
			if _, err := Restore(bak, dst, RestoreOptions{}); err == nil {
				t.Fatalf("restore accepted a manifest listing %q", evil)
			}
			for _, p := range []string{filepath.Join(dst, "..", "escaped"), filepath.Join(dst, "..", "..", "escaped"), filepath.Join(dst, ".restore", "..", "..", "escaped")} {
				if _, err := os.Stat(p); err == nil {
					t.Errorf("restore wrote %s outside the data directory", p)
				}
			}
		})
	}
}
