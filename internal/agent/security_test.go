package agent

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/config"
)

// TestBackupDestTraversal sends the backup endpoint destinations that
// would reach where a backup must not go: a relative path, the data
// directory itself or a folder inside it (through ".."), and a folder
// holding something else. Each is refused and nothing is written there.
func TestBackupDestTraversal(t *testing.T) {
	root := t.TempDir()
	cfg, err := config.Parse([]byte("[http]\nlisten = \"127.0.0.1:0\"\n[log]\nlevel = \"error\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data")
	cfg.Store.Dir = data
	base := startServe(t, context.Background(), cfg).URL
	other := filepath.Join(root, "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, dest   string
		mustNotExist string // a path the refused backup must not create
	}{
		{"relative", "../" + filepath.Base(root) + "/rel", filepath.Join(root, "rel")},
		{"data dir", data, ""},
		{"inside data dir", root + "/other/../data/inner", filepath.Join(data, "inner")},
		{"foreign folder", other, filepath.Join(other, "BACKUP")},
	} {
		body := `{"dest": "` + tt.dest + `"}`
		resp, err := http.Post(base+"/api/v1/admin/backup", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("%s: backup to %s accepted: %s", tt.name, tt.dest, b)
		}
		if tt.mustNotExist != "" {
			if _, err := os.Stat(tt.mustNotExist); err == nil {
				t.Errorf("%s: refused backup still created %s", tt.name, tt.mustNotExist)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(other, "keep.txt")); err != nil || string(b) != "mine" {
		t.Errorf("the foreign folder's file was touched: %q, %v", b, err)
	}
}

// TestStaticTraversal asks the dashboard's file server for paths that
// climb out of it, raw and escaped: none answers with a file from disk.
func TestStaticTraversal(t *testing.T) {
	cfg, err := config.Parse([]byte("[http]\nlisten = \"127.0.0.1:0\"\n[log]\nlevel = \"error\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.Dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(cfg.Store.Dir, "secret.txt"), []byte("SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := startServe(t, context.Background(), cfg).URL
	for _, p := range []string{"/../secret.txt", "/..%2fsecret.txt", "/%2e%2e/%2e%2e/etc/passwd", "/js/../../go.mod", "/js/..%2f..%2fgo.mod", "//etc/passwd"} {
		// A raw request line: the client would clean the path first.
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET "+p+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		b, _ := io.ReadAll(c)
		c.Close()
		if s := string(b); strings.Contains(s, "SECRET") || strings.Contains(s, "root:") || strings.Contains(s, "module github.com") {
			t.Errorf("GET %s served a file from disk:\n%.300s", p, s)
		}
	}
}
