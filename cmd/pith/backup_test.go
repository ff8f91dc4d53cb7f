package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/store"
)

// TestBackupEndpoint runs `pith serve` in-process, backs it up over HTTP
// (admin key only), and restores and verifies the backup with the CLI.
func TestBackupEndpoint(t *testing.T) {
	admin, adminHash := api.GenerateKey()
	reader, readerHash := api.GenerateKey()
	cfg := config.Default()
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.HTTP.Keys = []config.APIKey{{Name: "admin", Hash: adminHash, Scope: "admin"}, {Name: "reader", Hash: readerHash, Scope: "read"}}
	cfg.Log.Level = "warn"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base := startServe(t, ctx, cfg).URL
	now := time.Now().UnixMilli()
	req, _ := http.NewRequest("POST", base+"/api/v1/import", strings.NewReader("site.a,"+itoa(now)+",1.5\nsite.a,"+itoa(now+1000)+",2.5\n"))
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("import: %d %s", resp.StatusCode, b)
	}

	dest := filepath.Join(t.TempDir(), "backup")
	url := base + backupPath
	if _, err := remoteBackup(ctx, url, reader, false, dest); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("backup with a read key: %v, want 403", err)
	}
	if _, err := remoteBackup(ctx, url, admin, false, "relative/dir"); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("backup into a relative path: %v, want a refusal", err)
	}
	if _, err := remoteBackup(ctx, url, admin, false, cfg.Store.Dir); err == nil || !strings.Contains(err.Error(), "is the data directory itself") {
		t.Errorf("backup into the data directory: %v, want a refusal", err)
	}
	if err := runBackup([]string{"--url", base, "--key", admin, dest}); err != nil {
		t.Fatal(err)
	}
	st, err := remoteBackup(ctx, url, admin, false, dest)
	if err != nil {
		t.Fatal(err)
	}
	// The server archives its own system tags meanwhile, so the WAL tail
	// may have grown; the incremental rules are tested in internal/store.
	if st.Files == 0 || st.Copied+st.Linked+st.Skipped != st.Files {
		t.Errorf("second backup: %+v", st)
	}
	if err := runVerify([]string{dest}); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "restored")
	if err := runRestore([]string{dest, data}); err != nil {
		t.Fatal(err)
	}
	if err := runRestore([]string{dest, data}); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("second restore without --force: %v", err)
	}
	if err := runRestore([]string{"--force", dest, data}); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(data, store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Raw("site.a", 0, now+2000, 0)
	if err != nil || len(got) != 2 || got[0].V != 1.5 || got[1].V != 2.5 {
		t.Errorf("restored site.a: %v %v", got, err)
	}
}

func TestServerURL(t *testing.T) {
	for _, c := range []struct {
		http config.HTTP
		want string
	}{
		{config.HTTP{Listen: "127.0.0.1:8080"}, "http://127.0.0.1:8080"},
		{config.HTTP{Listen: ":9000"}, "http://127.0.0.1:9000"},
		{config.HTTP{Listen: "0.0.0.0:9000", TLS: "auto"}, "https://127.0.0.1:9000"},
		{config.HTTP{Listen: "[::]:9000"}, "http://127.0.0.1:9000"},
		{config.HTTP{Listen: "[::1]:9000", TLSCert: "c.pem"}, "https://[::1]:9000"},
	} {
		if got := serverURL(c.http); got != c.want {
			t.Errorf("serverURL(%q): %q, want %q", c.http.Listen, got, c.want)
		}
	}
}
