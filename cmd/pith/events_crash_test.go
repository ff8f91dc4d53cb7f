package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/pith-historian/pith/internal/events"
)

// TestKillDuringEvents builds the real pith binary, posts events to
// /api/v1/events from several clients, SIGKILLs the server at random
// moments and restarts it (rounds alternate NDJSON+gzip and CSV+zstd
// sink files), then stops it cleanly and checks that every acknowledged
// event is in the sink files exactly once, and that no event is there
// twice. -short skips it.
//
//	go test -run TestKillDuringEvents -v ./cmd/pith
func TestKillDuringEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds pith and kills it repeatedly; skipped with -short")
	}
	bin := buildPith(t)
	tmp := t.TempDir()
	data := filepath.Join(tmp, "data")
	configs := make([]string, 2)
	for i, f := range [][2]string{{"ndjson", "gzip"}, {"csv", "zstd"}} {
		configs[i] = filepath.Join(tmp, f[0]+".toml")
		cfg := fmt.Sprintf("[events]\nformat = %q\ncompression = %q\n", f[0], f[1])
		if err := os.WriteFile(configs[i], []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	var mu sync.Mutex
	acked := map[string]bool{}
	const kills = 3
	for round := 0; round <= kills; round++ {
		srv := startPith(t, bin, data, configs[round%2], filepath.Join(tmp, fmt.Sprintf("pith-%d.log", round)))
		if round == kills {
			srv.stop(t)
			break
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &http.Client{Timeout: 30 * time.Second}
				for n := 0; ctx.Err() == nil; n++ {
					size := 1
					if w > 0 {
						size = 50
					}
					ids := make([]string, size)
					var body bytes.Buffer
					for i := range ids {
						ids[i] = fmt.Sprintf("r%d-w%d-%d-%d", round, w, n, i)
						fmt.Fprintf(&body, `{"id":%q,"name":"crash.test","num":{"i":%d}}`+"\n", ids[i], i)
					}
					req, err := http.NewRequestWithContext(ctx, "POST", srv.base+"/api/v1/events", &body)
					if err != nil {
						return
					}
					resp, err := client.Do(req)
					if err != nil {
						return // the server is gone: unacknowledged
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						mu.Lock()
						for _, id := range ids {
							acked[id] = true
						}
						mu.Unlock()
					}
				}
			}()
		}
		time.Sleep(time.Duration(500+rnd.IntN(1000)) * time.Millisecond)
		srv.kill(t)
		cancel()
		wg.Wait()
	}
	seen := map[string]int{}
	root := filepath.Join(data, "events-collector", "events")
	nfiles := 0
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.Contains(p, string(filepath.Separator)+".tmp"+string(filepath.Separator)) {
			return nil
		}
		nfiles++
		for _, id := range eventIDs(t, p) {
			seen[id]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	missing, dups := 0, 0
	for id := range acked {
		if seen[id] == 0 {
			missing++
			if missing <= 5 {
				t.Errorf("acknowledged event %s is not in the sink files", id)
			}
		}
	}
	for id, n := range seen {
		if n > 1 {
			dups++
			if dups <= 5 {
				t.Errorf("event %s is in the sink files %d times", id, n)
			}
		}
	}
	if len(acked) == 0 {
		t.Fatal("no event was acknowledged")
	}
	t.Logf("%d kills: %d events acknowledged, %d in %d sink files, %d missing, %d duplicated",
		kills, len(acked), len(seen), nfiles, missing, dups)
}

// eventIDs returns the ids of the events in one sink file.
func eventIDs(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader
	if strings.HasSuffix(path, ".zst") {
		z, err := zstd.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer z.Close()
		r = z
	} else {
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		r = z
	}
	var ids []string
	if strings.Contains(filepath.Base(path), ".csv.") {
		idCol := slices.Index(events.CSVColumns, "id")
		cr := csv.NewReader(r)
		cr.Comma = '\x01'
		rows, err := cr.ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, row := range rows {
			ids = append(ids, row[idCol])
		}
		return ids
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev struct{ ID string }
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ids = append(ids, ev.ID)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return ids
}
