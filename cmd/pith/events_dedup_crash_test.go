package main

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestKillKeepsEventDedup posts events with client ids to the real pith
// binary, SIGKILLs it, restarts it and retries the same requests, twice
// over, then stops it cleanly: every retry must be answered as
// duplicates, every new id stored, and the sink files must hold each id
// exactly once. -short skips it.
//
//	go test -run TestKillKeepsEventDedup -v ./cmd/pith
func TestKillKeepsEventDedup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pith and kills it; skipped with -short")
	}
	bin := buildPith(t)
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data")
	config := filepath.Join(tmp, "pith.toml")
	if err := os.WriteFile(config, []byte("[events]\nenabled = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	postRange := func(base string, from, to int, want string) {
		t.Helper()
		for i := from; i < to; i += 10 {
			var body strings.Builder
			for j := i; j < i+10; j++ {
				fmt.Fprintf(&body, "{\"id\":\"dedup-%d\",\"name\":\"crash.dedup\",\"num\":{\"i\":%d}}\n", j, j)
			}
			resp, err := http.Post(base+"/api/v1/events", "application/x-ndjson", strings.NewReader(body.String()))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(got)) != want {
				t.Fatalf("post dedup-%d..: got %d %s, want %s", i, resp.StatusCode, got, want)
			}
		}
	}
	const news, dups = `{"accepted":10,"duplicates":0}`, `{"accepted":0,"duplicates":10}`
	srv := startPith(t, bin, data, config, filepath.Join(tmp, "pith-0.log"))
	postRange(srv.base, 0, 100, news)
	srv.kill(t)
	srv = startPith(t, bin, data, config, filepath.Join(tmp, "pith-1.log"))
	postRange(srv.base, 0, 100, dups)
	postRange(srv.base, 100, 200, news)
	srv.kill(t)
	srv = startPith(t, bin, data, config, filepath.Join(tmp, "pith-2.log"))
	postRange(srv.base, 0, 200, dups)
	srv.stop(t)

	seen := map[string]int{}
	root := filepath.Join(data, "events-collector", "events")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, string(filepath.Separator)+".tmp"+string(filepath.Separator)) {
			return err
		}
		for _, id := range eventIDs(t, p) {
			seen[id]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if n := seen[fmt.Sprintf("dedup-%d", i)]; n != 1 {
			t.Errorf("dedup-%d is in the sink files %d times, want once", i, n)
		}
	}
	if len(seen) != 200 {
		t.Errorf("%d ids in the sink files, want 200", len(seen))
	}
}
