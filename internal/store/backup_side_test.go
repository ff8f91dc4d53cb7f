package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestBackupCarriesSideDirs: people's accounts and the audit journal,
// kept beside the store in the data directory, are in a backup and come
// back with a restore; LOCK and temporary files stay out.
func TestBackupCarriesSideDirs(t *testing.T) {
	dir := t.TempDir()
	db := buildBackupStore(t, filepath.Join(dir, "data"), 2)
	data := filepath.Join(dir, "data")
	files := map[string]string{"users/accounts.json": "{accounts}\n", "audit/2026-11-25.log": "0000 {}\n"}
	for rel, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(data, rel)), 0o700)
		os.WriteFile(filepath.Join(data, rel), []byte(body), 0o600)
	}
	os.WriteFile(filepath.Join(data, "users", "LOCK"), nil, 0o600)
	os.WriteFile(filepath.Join(data, "users", "accounts.json.tmp123"), []byte("half"), 0o600)
	bak := filepath.Join(dir, "bak")
	if _, err := db.Backup(context.Background(), bak); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if rep, err := Verify(bak); err != nil || !rep.OK() {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	for _, skip := range []string{"users/LOCK", "users/accounts.json.tmp123"} {
		if _, err := os.Stat(filepath.Join(bak, skip)); err == nil {
			t.Errorf("%s is in the backup", skip)
		}
	}
	dst := filepath.Join(dir, "restored")
	if _, err := Restore(bak, dst, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	for rel, want := range files {
		got, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || string(got) != want {
			t.Errorf("restored %s: %q %v, want %q", rel, got, err, want)
		}
	}
}
