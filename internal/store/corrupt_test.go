package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
)

// The corruption suite flips one byte of one file of a closed store, reopens
// it and checks what the store promises for that kind of damage. The table
// in TestCorruptOneByte is the list of those promises.

// logCapture is a slog.Handler that keeps every record, so tests can check
// that damage was reported with a typed error naming file and offset.
type logCapture struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (c *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *logCapture) WithGroup(string) slog.Handler            { return c }
func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	c.recs = append(c.recs, r.Clone())
	c.mu.Unlock()
	return nil
}

// corruption returns the first logged *CorruptionError about file.
func (c *logCapture) corruption(file string) *CorruptionError {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.recs {
		var found *CorruptionError
		r.Attrs(func(a slog.Attr) bool {
			if err, ok := a.Value.Any().(error); ok {
				var ce *CorruptionError
				if errors.As(err, &ce) && ce.File == file {
					found = ce
					return false
				}
			}
			return true
		})
		if found != nil {
			return found
		}
	}
	return nil
}

// walDamage returns the offset of the first logged WAL damage in file.
func (c *logCapture) walDamage(file string) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.recs {
		if r.Message != "skipping damaged wal data" {
			continue
		}
		var f string
		var off int64 = -1
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "file":
				f = a.Value.String()
			case "offset":
				off = a.Value.Int64()
			}
			return true
		})
		if f == file {
			return off, true
		}
	}
	return 0, false
}

func (c *logCapture) dump() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, r := range c.recs {
		fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		b.WriteByte('\n')
	}
	return b.String()
}

// corruptDays are the two day partitions of the corruption store.
var corruptDays = [2]int64{19691, 19692} // 2023-11-30 and 2023-12-01: months of one day each stay unpacked

var corruptTags = []string{"a.temp", "b.flow", "c.level"}

// corruptPoints returns the data of the corruption store: each tag has
// 4000 one-second samples on each of two days, so every series has rollup
// tiers and many chunks.
func corruptPoints() []model.Point {
	var pts []model.Point
	for _, day := range corruptDays {
		t0 := day*partitionMs + 3_600_000
		for k, tag := range corruptTags {
			for i := 0; i < 4000; i++ {
				pts = append(pts, model.Point{Tag: tag, T: t0 + int64(i)*1000, V: float64((i*7+k*1000)%1000) / 10, Q: model.Quality(i % 3)})
			}
		}
	}
	return pts
}

func quietOptions(h slog.Handler) Options {
	o := DefaultOptions()
	if h == nil {
		h = &logCapture{}
	}
	o.Logger = slog.New(h)
	return o
}

// buildCorruptStore writes corruptPoints and closes the store, which leaves
// exactly one run file per day and an empty WAL.
func buildCorruptStore(t *testing.T) (string, naive) {
	t.Helper()
	dir := t.TempDir()
	db, err := Open(dir, quietOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	pts := corruptPoints()
	m := naive{}
	for len(pts) > 0 {
		n := min(1000, len(pts))
		if err := db.Write(context.Background(), pts[:n]); err != nil {
			t.Fatal(err)
		}
		m.write(pts[:n])
		pts = pts[n:]
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// copyDir copies a data directory (files and subdirectories).
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 || off >= int64(len(b)) {
		t.Fatalf("flip offset %d outside %s (%d bytes)", off, path, len(b))
	}
	b[off] ^= 0x5a
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// runOf returns the path of the only run file of day p.
func runOf(t *testing.T, dir string, p int64) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "runs", fmt.Sprintf("p%d-*.run", p)))
	if len(m) != 1 {
		t.Fatalf("want one run of day %d, found %v", p, m)
	}
	return m[0]
}

// runLayout is where the pieces of a run file are.
type runLayout struct {
	size       int64
	idx1, idx2 int64 // the two index copies
	idxLen     int64
	series     map[uint32]runSeries
}

func layoutOf(t *testing.T, path string) runLayout {
	t.Helper()
	r, err := openRun(vfs.OS{}, path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	foot := r.data[r.size-runFooterSize:]
	l := runLayout{
		size:   r.size,
		idx1:   int64(binary.LittleEndian.Uint64(foot[0:])),
		idxLen: int64(binary.LittleEndian.Uint32(foot[8:])),
		idx2:   int64(binary.LittleEndian.Uint64(foot[16:])),
		series: make(map[uint32]runSeries),
	}
	for _, s := range r.index() {
		l.series[s.id] = s
	}
	return l
}

// lostRange is data a case is allowed (and expected) to lose.
type lostRange struct {
	tag    string
	lo, hi int64 // inclusive
}

// corruptCase is one kind of damage and what the store promises for it.
type corruptCase struct {
	name string
	// guarantee says in words what the case checks.
	guarantee string
	// damage flips bytes in dir and returns the damaged file and offset
	// and the data that is lost.
	damage func(t *testing.T, dir string) (file string, off int64, lost []lostRange)
	// openFails: Open must fail with a *CorruptionError naming the file.
	openFails bool
	// reported: the damage must be logged as a *CorruptionError naming
	// the file and the damaged block's offset when the data is read.
	reported bool
	// exactAggregates: bucketed queries must still equal the model.
	exactAggregates bool
}

// chunkOf returns the middle chunk of tag's series (id) in the run.
func chunkOf(l runLayout, id uint32) chunkRef {
	s := l.series[id]
	return s.chunks[len(s.chunks)/2]
}

func TestCorruptOneByte(t *testing.T) {
	base, m := buildCorruptStore(t)
	dayA := corruptDays[0]
	// Series ids follow first use: a.temp 0, b.flow 1, c.level 2.
	cases := []corruptCase{
		{
			name:      "run header",
			guarantee: "the 16-byte header is not read back; every sample stays readable",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := runOf(t, dir, dayA)
				flipByte(t, p, 3)
				return p, 3, nil
			},
			exactAggregates: true,
		},
		{
			name:      "run chunk block payload",
			guarantee: "only that chunk's samples are lost; queries report it with file and offset and return all else",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := runOf(t, dir, dayA)
				c := chunkOf(layoutOf(t, p), 1)
				flipByte(t, p, int64(c.off)+int64(c.len)/2)
				return p, int64(c.off), []lostRange{{"b.flow", c.minT, c.maxT}}
			},
			reported: true,
		},
		{
			name:      "run chunk block checksum",
			guarantee: "as a payload flip: that chunk only",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := runOf(t, dir, dayA)
				c := chunkOf(layoutOf(t, p), 0)
				flipByte(t, p, int64(c.off)+1)
				return p, int64(c.off), []lostRange{{"a.temp", c.minT, c.maxT}}
			},
			reported: true,
		},
		{
			name:      "run tier block",
			guarantee: "no sample is lost: bucketed queries fall back to raw chunks and stay exact; the damage is reported",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := runOf(t, dir, dayA)
				s := layoutOf(t, p).series[2]
				if s.fine == noTier {
					t.Fatal("series has no tiers")
				}
				tr := *s.tier(int(s.fine))
				flipByte(t, p, int64(tr.off)+int64(tr.len)-1)
				return p, int64(tr.off), nil
			},
			reported:        true,
			exactAggregates: true,
		},
		{
			name:      "run index copy 1",
			guarantee: "the second copy is used; nothing is lost",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := runOf(t, dir, dayA)
				l := layoutOf(t, p)
				flipByte(t, p, l.idx1+l.idxLen/2)
				return p, l.idx1, nil
			},
			exactAggregates: true,
		},
		{
			name:      "run index copy 2",
			guarantee: "the first copy is used; nothing is lost",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := runOf(t, dir, dayA)
				l := layoutOf(t, p)
				flipByte(t, p, l.idx2+l.idxLen-1)
				return p, l.idx2, nil
			},
			exactAggregates: true,
		},
		{
			name:      "run last footer",
			guarantee: "the footer before it is used; nothing is lost",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := runOf(t, dir, dayA)
				l := layoutOf(t, p)
				flipByte(t, p, l.size-runFooterSize+2)
				return p, l.size - runFooterSize, nil
			},
			exactAggregates: true,
		},
		{
			name:      "run last footer magic",
			guarantee: "the footer before it is used; nothing is lost",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := runOf(t, dir, dayA)
				l := layoutOf(t, p)
				flipByte(t, p, l.size-1)
				return p, l.size - runFooterSize, nil
			},
			exactAggregates: true,
		},
		{
			name:      "run first footer",
			guarantee: "the last footer is used; nothing is lost",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := runOf(t, dir, dayA)
				l := layoutOf(t, p)
				flipByte(t, p, l.size-2*runFooterSize+20)
				return p, l.size - 2*runFooterSize, nil
			},
			exactAggregates: true,
		},
		{
			name:      "series file name byte",
			guarantee: "the copy (series.copy.dat) is used; nothing is lost",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := filepath.Join(dir, "series.dat")
				flipByte(t, p, int64(len(seriesFileMagic))+3)
				return p, 0, nil
			},
			exactAggregates: true,
		},
		{
			name:      "series file and its copy",
			guarantee: "Open fails with a *CorruptionError naming series.dat (ids cannot be trusted, so nothing is guessed)",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := filepath.Join(dir, "series.dat")
				flipByte(t, p, int64(len(seriesFileMagic))+3)
				flipByte(t, filepath.Join(dir, "series.copy.dat"), int64(len(seriesFileMagic))+3)
				return p, 0, nil
			},
			openFails: true,
		},
		{
			name:      "series file checksum",
			guarantee: "the copy (series.copy.dat) is used; nothing is lost",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := filepath.Join(dir, "series.dat")
				st, _ := os.Stat(p)
				flipByte(t, p, st.Size()-1)
				return p, st.Size() - 4, nil
			},
			exactAggregates: true,
		},
		{
			name:      "manifest syntax",
			guarantee: "Open fails with a *CorruptionError naming MANIFEST",
			damage: func(t *testing.T, dir string) (string, int64, []lostRange) {
				p := filepath.Join(dir, "MANIFEST")
				flipByte(t, p, 0)
				return p, 0, nil
			},
			openFails: true,
		},
	}
	var table strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&table, "| %s | %s |\n", c.name, c.guarantee)
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, base)
			file, off, lost := c.damage(t, dir)
			lc := &logCapture{}
			db, err := Open(dir, quietOptions(lc))
			if c.openFails {
				var ce *CorruptionError
				if !errors.As(err, &ce) || filepath.Base(ce.File) != filepath.Base(file) {
					if db != nil {
						db.Close()
					}
					t.Fatalf("Open: got %v, want a *CorruptionError naming %s", err, file)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer db.Close()
			checkAllBut(t, db, m, lost)
			if c.exactAggregates {
				checkAggregates(t, db, m)
			}
			if c.reported {
				ce := lc.corruption(file)
				if ce == nil {
					t.Fatalf("damage at %s:%d not reported as *CorruptionError; log:\n%s", file, off, lc.dump())
				}
				if ce.Offset != off {
					t.Fatalf("reported offset %d, want %d", ce.Offset, off)
				}
				if db.Stats().CorruptBlocks.Load() == 0 {
					t.Fatal("CorruptBlocks counter not raised")
				}
			}
		})
	}
	t.Logf("guarantees:\n| damage | guarantee |\n|---|---|\n%s", table.String())
}

// checkAllBut checks that every sample of the model is stored, except those
// in lost, which must be gone (a damaged block is never half-read).
func checkAllBut(t *testing.T, db *DB, m naive, lost []lostRange) {
	t.Helper()
	for tag := range m {
		want := m.sorted(tag)
		var keep []model.Sample
		for _, s := range want {
			gone := false
			for _, l := range lost {
				if l.tag == tag && s.T >= l.lo && s.T <= l.hi {
					gone = true
				}
			}
			if !gone {
				keep = append(keep, s)
			}
		}
		got, err := db.Raw(tag, want[0].T, want[len(want)-1].T+1, 0)
		if err != nil {
			t.Fatalf("raw %s: %v", tag, err)
		}
		if len(got) != len(keep) {
			t.Fatalf("raw %s: %d samples, want %d (of %d written)", tag, len(got), len(keep), len(want))
		}
		for i := range got {
			if got[i] != keep[i] {
				t.Fatalf("raw %s sample %d: got %+v want %+v", tag, i, got[i], keep[i])
			}
		}
	}
}

// checkAggregates compares bucketed queries over both days with the model.
func checkAggregates(t *testing.T, db *DB, m naive) {
	t.Helper()
	from, to := corruptDays[0]*partitionMs, (corruptDays[1]+1)*partitionMs
	for tag := range m {
		for _, n := range []int{1, 7, 500, 2000} {
			for agg := model.AggMean; agg < model.AggRaw; agg++ {
				got, err := db.Aggregate(tag, from, to, n, agg)
				if err != nil {
					t.Fatal(err)
				}
				want := m.aggregate(tag, from, to, n, agg)
				for i := range want {
					if got[i].OK != want[i].OK || (want[i].OK && !close1(got[i].V, want[i].V)) {
						t.Fatalf("%s %s n=%d bucket %d: got %+v want %+v", tag, agg, n, i, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestCorruptWAL flips bytes in the WAL of a store that was not closed (as
// after a crash) and checks that one flipped byte costs one record: the
// damage is reported with the segment file and the record's offset, and the
// records after it are replayed.
func TestCorruptWAL(t *testing.T) {
	const nrec = 10
	batch := func(k int) []model.Point {
		var pts []model.Point
		for i := 0; i < 50; i++ {
			pts = append(pts, model.Point{Tag: fmt.Sprintf("w.%d", k%3), T: 1_700_000_000_000 + int64(k*1000+i)*1000, V: float64(k*100 + i)})
		}
		return pts
	}
	dir := t.TempDir()
	db, err := Open(dir, quietOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < nrec; k++ {
		if err := db.Write(context.Background(), batch(k)); err != nil {
			t.Fatal(err)
		}
	}
	// Every write is fsynced: a copy now is what a power cut would leave.
	base := copyDir(t, dir)
	db.Close()

	seg, offs := walRecords(t, base)
	if len(offs) != nrec {
		t.Fatalf("found %d records in %s, want %d", len(offs), seg, nrec)
	}
	cases := []struct {
		name      string
		guarantee string
		off       int64 // byte to flip
		lostRec   []int // records whose points are lost
		reported  bool
	}{
		{"record payload", "that record is skipped and reported; all later ones are replayed", offs[4] + 9 + 20, []int{4}, true},
		{"record length", "that record is skipped (resync finds the next header) and reported", offs[2], []int{2}, true},
		{"record checksum", "that record is skipped and reported", offs[7] + 5, []int{7}, true},
		{"last record", "damage with no valid record after it is a torn tail: cut with a warning (a flipped byte here cannot be told from a torn write)", offs[nrec-1] + 30, []int{nrec - 1}, false},
		{"segment header", "the whole segment is skipped and reported at offset 0: one byte costs one segment (up to 64 MiB of records)", 9, allRecs(nrec), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := copyDir(t, base)
			path := filepath.Join(d, "wal", filepath.Base(seg))
			flipByte(t, path, c.off)
			lc := &logCapture{}
			db, err := Open(d, quietOptions(lc))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			m := naive{}
			for k := 0; k < nrec; k++ {
				lostK := false
				for _, l := range c.lostRec {
					lostK = lostK || l == k
				}
				if !lostK {
					m.write(batch(k))
				}
			}
			for k := 0; k < 3; k++ {
				tag := fmt.Sprintf("w.%d", k)
				got, err := db.Raw(tag, 0, 2_000_000_000_000, 0)
				if err != nil && !errors.Is(err, ErrUnknownTag) {
					t.Fatal(err)
				}
				want := m.sorted(tag)
				if len(got) != len(want) {
					t.Fatalf("%s: %d samples, want %d; log:\n%s", tag, len(got), len(want), lc.dump())
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%s sample %d: got %+v want %+v", tag, i, got[i], want[i])
					}
				}
			}
			if c.reported {
				off, ok := lc.walDamage(path)
				if !ok {
					t.Fatalf("damage not reported; log:\n%s", lc.dump())
				}
				rec := offs[c.lostRec[0]]
				if len(c.lostRec) == nrec {
					rec = 0 // the segment header
				}
				if off != rec {
					t.Fatalf("damage reported at offset %d, want the record's %d", off, rec)
				}
			}
		})
	}
}

func allRecs(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// walRecords returns the WAL segment holding records and their offsets.
func walRecords(t *testing.T, dir string) (string, []int64) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	sort.Strings(segs)
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		var offs []int64
		for off := int64(16); off+9 <= int64(len(b)); {
			n := int64(binary.LittleEndian.Uint32(b[off:]))
			if n == 0 || off+9+n > int64(len(b)) {
				break
			}
			offs = append(offs, off)
			off += 9 + n
		}
		if len(offs) > 0 {
			return seg, offs
		}
	}
	t.Fatal("no WAL segment with records")
	return "", nil
}

// TestCorruptRunBothFooters damages both footers of one day's run: that
// run is unreadable, but Open succeeds, the other day is whole, and the
// damage is reported with the file.
func TestCorruptRunBothFooters(t *testing.T) {
	base, m := buildCorruptStore(t)
	dir := copyDir(t, base)
	p := runOf(t, dir, corruptDays[0])
	l := layoutOf(t, p)
	flipByte(t, p, l.size-1)
	flipByte(t, p, l.size-runFooterSize-1)
	lc := &logCapture{}
	db, err := Open(dir, quietOptions(lc))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if lc.corruption(p) == nil {
		t.Fatalf("unreadable run not reported; log:\n%s", lc.dump())
	}
	var lost []lostRange
	for _, tag := range corruptTags {
		lost = append(lost, lostRange{tag, corruptDays[0] * partitionMs, (corruptDays[0]+1)*partitionMs - 1})
	}
	checkAllBut(t, db, m, lost)
}

// TestCorruptRunKeptForRepair checks that a run the store cannot read is
// not deleted by the store itself: its chunk blocks are intact and a repair
// tool could still recover them. The store skips it at Open; the next
// manifest write must not turn it into an orphan that the next Open
// removes.
func TestCorruptRunKeptForRepair(t *testing.T) {
	base, _ := buildCorruptStore(t)
	dir := copyDir(t, base)
	p := runOf(t, dir, corruptDays[0])
	l := layoutOf(t, p)
	flipByte(t, p, l.size-1)
	flipByte(t, p, l.size-runFooterSize-1)
	for round := 0; round < 2; round++ {
		db, err := Open(dir, quietOptions(nil))
		if err != nil {
			t.Fatal(err)
		}
		// A write to the other day makes the next flush rewrite the manifest.
		if err := db.Write(context.Background(), []model.Point{{Tag: "d.new", T: corruptDays[1]*partitionMs + int64(round), V: 1}}); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the unreadable run %s was deleted by the store: %v", filepath.Base(p), err)
	}
}

// TestCorruptManifestValue flips a digit of the manifest's next_seq, which
// still parses as JSON. A silently accepted lower next_seq makes a later
// flush reuse a live run's file name and overwrite it, so the damage must
// be detected at Open.
func TestCorruptManifestValue(t *testing.T) {
	base, _ := buildCorruptStore(t)
	dir := copyDir(t, base)
	path := filepath.Join(dir, "MANIFEST")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), `"next_seq":`)
	if i < 0 {
		t.Fatalf("no next_seq in %s", b)
	}
	i += len(`"next_seq":`)
	// Change the number's last digit: one byte, still valid JSON.
	j := i
	for j+1 < len(b) && b[j+1] >= '0' && b[j+1] <= '9' {
		j++
	}
	if b[j] == '0' {
		b[j] = '1'
	} else {
		b[j]--
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dir, quietOptions(nil))
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return
	}
	if err != nil {
		t.Fatalf("Open: got %v, want a *CorruptionError naming MANIFEST", err)
	}
	defer db.Close()
	t.Fatalf("a manifest whose next_seq changed to %s opened without error: the manifest has no checksum", b[i:j+1])
}

// TestReplayUndecodableRecordIsAtomic: a WAL record whose checksum is good
// but whose second point does not decode (a writer bug, or a record of an
// older encoding replayed after an upgrade) must be skipped whole. A
// record is one atomic write: applying its first point alone would store
// half a write that was never acknowledged in that form.
func TestReplayUndecodableRecordIsAtomic(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, quietOptions(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	pts := []model.Point{
		{Tag: "atomic.x", T: 1_700_000_000_000, V: 1},
		{Tag: "atomic.x", T: 1_700_000_001_000, V: 0.123456789}, // raw kind: flags, then 8 bytes
	}
	rec := appendDataRecord(nil, txnAuto, pts, make(map[string]int), nil)
	rec[len(rec)-9] = 0xf0 // the second point's flags: an unknown value kind
	w, err := wal.Open(filepath.Join(dir, "wal"), wal.DefaultOptions(), slog.New(&logCapture{}))
	if err != nil {
		t.Fatal(err)
	}
	pos, err := w.Append(rec)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(context.Background(), pos); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lc := &logCapture{}
	db, err = Open(dir, quietOptions(lc))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.Raw("atomic.x", 0, 2_000_000_000_000, 0)
	if err != nil && !errors.Is(err, ErrUnknownTag) {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("replay applied %d point(s) of a record it could not decode: %+v", len(got), got)
	}
}
