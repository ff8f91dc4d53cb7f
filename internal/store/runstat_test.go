package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// TestRunStats prints where the bytes of a data directory's runs go:
// PITH_RUNSTAT=DIR go test -run TestRunStats -v ./internal/store
func TestRunStats(t *testing.T) {
	dir := os.Getenv("PITH_RUNSTAT")
	if dir == "" {
		t.Skip("set PITH_RUNSTAT to a data directory")
	}
	files, _ := filepath.Glob(filepath.Join(dir, "runs", "*.run"))
	var chunkB, tierB, size, pts, nchunks int64
	tierByLevel := make([]int64, numTiers)
	for _, f := range files {
		r, err := openRun(vfs.OS{}, f)
		if err != nil {
			t.Fatal(err)
		}
		size += r.size
		for _, s := range r.index() {
			pts += s.n
			for _, c := range s.chunks {
				chunkB += int64(c.len)
				nchunks++
			}
			if s.fine != noTier {
				for l := int(s.fine); l < numTiers; l++ {
					tierB += int64(s.tier(l).len)
					tierByLevel[l] += int64(s.tier(l).len)
				}
			}
		}
		r.close()
	}
	t.Logf("runs %d, points %d, bytes %d (%.3f B/pt): chunks %.3f B/pt (%d chunks, %.0f pts each), tiers %.3f B/pt %v, index+other %.3f B/pt",
		len(files), pts, size, float64(size)/float64(pts), float64(chunkB)/float64(pts), nchunks, float64(pts)/float64(nchunks),
		float64(tierB)/float64(pts), tierByLevel, float64(size-chunkB-tierB)/float64(pts))
}
