package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// naiveText is the reference for text tags: every value in a map, last
// write wins.
type naiveText map[string]map[int64]model.TextSample

func (m naiveText) write(pts []model.TextPoint) {
	for _, p := range pts {
		if m[p.Tag] == nil {
			m[p.Tag] = make(map[int64]model.TextSample)
		}
		m[p.Tag][p.T] = model.TextSample{T: p.T, Text: p.Text, Q: p.Q}
	}
}

func (m naiveText) sorted(tag string, from, to int64) []model.TextSample {
	var out []model.TextSample
	for _, s := range m[tag] {
		if s.T >= from && s.T < to {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].T < out[j].T })
	return out
}

func randomText(rnd *rand.Rand) string {
	switch rnd.Intn(5) {
	case 0:
		return []string{"RUN", "STOP", "CIP", ""}[rnd.Intn(4)]
	case 1:
		return fmt.Sprintf("B-%06d", rnd.Intn(100))
	case 2:
		return strings.Repeat("x", rnd.Intn(model.MaxTextLen+1))
	default:
		return fmt.Sprintf("operator %c%d «ü»", 'A'+rnd.Intn(26), rnd.Intn(9))
	}
}

// TestTextMatchesModel writes random text, late, repeated and out of
// order, with numbers beside it, through small writes and bulk
// transactions, flushing, merging, deleting and reopening at random, and
// checks raw reads, first/last/count buckets and Latest against the model.
func TestTextMatchesModel(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { testTextAgainstModel(t, seed) })
	}
}

func testTextAgainstModel(t *testing.T, seed int64) {
	rnd := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	db, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	ctx := context.Background()
	m := naiveText{}
	nm := naive{}
	tags := []string{"line.state", "line.batch"}
	const day = partitionMs
	t0 := int64(1_700_000_000_000)
	clock := t0
	for step := 0; step < 50; step++ {
		var pts []model.TextPoint
		var nums []model.Point
		n := 1 + rnd.Intn(300)
		for i := 0; i < n; i++ {
			var ts int64
			switch r := rnd.Intn(10); {
			case r < 6:
				clock += int64(500 + rnd.Intn(1000))
				ts = clock
			case r < 8:
				ts = clock - rnd.Int63n(2*day)
			default:
				ts = clock - int64(rnd.Intn(5))*1000
			}
			pts = append(pts, model.TextPoint{Tag: tags[rnd.Intn(len(tags))], T: ts, Text: randomText(rnd), Q: model.Quality(rnd.Intn(3))})
			nums = append(nums, model.Point{Tag: "line.speed", T: ts, V: float64(rnd.Intn(100))})
		}
		switch rnd.Intn(4) {
		case 0: // one transaction of numbers and text, in pieces
			tx := db.Begin()
			for len(pts) > 0 {
				k := 1 + rnd.Intn(len(pts))
				if err := tx.AddText(pts[:k]); err != nil {
					t.Fatal(err)
				}
				if err := tx.Add(nums[:k]); err != nil {
					t.Fatal(err)
				}
				m.write(pts[:k])
				nm.write(nums[:k])
				pts, nums = pts[k:], nums[k:]
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		case 1:
			tx := db.Begin()
			if err := tx.AddText(pts); err != nil {
				t.Fatal(err)
			}
			tx.Rollback()
		default:
			if err := db.WriteText(ctx, pts); err != nil {
				t.Fatal(err)
			}
			m.write(pts)
		}
		switch rnd.Intn(10) {
		case 0:
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if db, err = Open(dir, testOptions()); err != nil {
				t.Fatal(err)
			}
		case 2:
			tag := tags[rnd.Intn(len(tags))]
			from := clock - rnd.Int63n(day)
			to := from + rnd.Int63n(3_600_000)
			if _, err := db.Delete(ctx, tag, from, to); err != nil {
				t.Fatal(err)
			}
			for ts := range m[tag] {
				if ts >= from && ts < to {
					delete(m[tag], ts)
				}
			}
		}
		checkText(t, rnd, db, m, tags, t0-2*day, clock+1000)
	}
	if got, err := db.Raw("line.speed", t0-2*day, clock+1000, 0); err != nil || len(got) != len(nm.sorted("line.speed")) {
		t.Fatalf("numbers beside text: %d samples, %v; want %d", len(got), err, len(nm.sorted("line.speed")))
	}
}

func checkText(t *testing.T, rnd *rand.Rand, db *DB, m naiveText, tags []string, lo, hi int64) {
	t.Helper()
	for _, tag := range tags {
		if len(m[tag]) == 0 {
			continue
		}
		from := lo + rnd.Int63n(hi-lo)
		to := from + 1 + rnd.Int63n(hi-from)
		if rnd.Intn(3) == 0 {
			from, to = lo, hi
		}
		want := m.sorted(tag, from, to)
		got, err := db.RawText(tag, from, to, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("raw %s [%d,%d): %d values, want %d", tag, from, to, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("raw %s value %d: %+v, want %+v", tag, i, got[i], want[i])
			}
		}
		nb := 1 + rnd.Intn(50)
		bb := newBounds(from, to, nb)
		for _, agg := range []model.Agg{model.AggFirst, model.AggLast} {
			bs, err := db.AggregateText(tag, from, to, nb, agg)
			if err != nil {
				t.Fatal(err)
			}
			wb := make([]TextBucket, nb)
			for i := range wb {
				wb[i].T = bb.start(i)
			}
			for _, s := range want {
				b := &wb[bb.index(s.T)]
				if agg == model.AggLast || !b.OK {
					b.Text, b.Q, b.OK = s.Text, s.Q, true
				}
			}
			for i := range wb {
				if bs[i] != wb[i] {
					t.Fatalf("%s %s bucket %d: %+v, want %+v", agg, tag, i, bs[i], wb[i])
				}
			}
		}
		cs, err := db.Aggregate(tag, from, to, nb, model.AggCount)
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]float64, nb)
		for _, s := range want {
			counts[bb.index(s.T)]++
		}
		for i := range counts {
			if counts[i] != cs[i].V || (counts[i] > 0) != cs[i].OK {
				t.Fatalf("count %s bucket %d: %+v, want %v", tag, i, cs[i], counts[i])
			}
		}
		all := m.sorted(tag, -1<<62, 1<<62)
		l, err := db.Latest(tag)
		if err != nil {
			t.Fatal(err)
		}
		if w := all[len(all)-1]; !l[0].IsText || l[0].Text != w.Text || l[0].T != w.T || l[0].Q != w.Q {
			t.Fatalf("latest %s: %+v, want %+v", tag, l[0], w)
		}
	}
}

// TestTextRefusals: text and numbers do not mix in one tag, text is
// bounded, and numeric aggregates of text name the tag.
func TestTextRefusals(t *testing.T) {
	db, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.Write(ctx, []model.Point{{Tag: "n", T: 1, V: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := db.WriteText(ctx, []model.TextPoint{{Tag: "s", T: 1, Text: "on"}}); err != nil {
		t.Fatal(err)
	}
	var pe *model.PointError
	if err := db.WriteText(ctx, []model.TextPoint{{Tag: "n", T: 2, Text: "x"}}); !errors.Is(err, ErrKind) || !errors.As(err, &pe) || pe.Tag != "n" {
		t.Fatalf("text to a numeric tag: %v", err)
	}
	if err := db.Write(ctx, []model.Point{{Tag: "s", T: 2, V: 1}}); !errors.Is(err, ErrKind) {
		t.Fatalf("number to a text tag: %v", err)
	}
	long := strings.Repeat("a", model.MaxTextLen+1)
	if err := db.WriteText(ctx, []model.TextPoint{{Tag: "s", T: 3, Text: long}}); err == nil || !strings.Contains(err.Error(), "longer than 1024") {
		t.Fatalf("long text: %v", err)
	}
	if err := db.WriteText(ctx, []model.TextPoint{{Tag: "s", T: 3, Text: "\xff"}}); err == nil {
		t.Fatal("invalid UTF-8 accepted")
	}
	for _, agg := range []model.Agg{model.AggMean, model.AggMin, model.AggMax, model.AggSum} {
		_, err := db.Aggregate("s", 0, 10, 1, agg)
		if !errors.Is(err, model.ErrTextAgg) || !strings.Contains(err.Error(), `"s"`) {
			t.Fatalf("%s of text: %v", agg, err)
		}
	}
	if _, err := db.Raw("s", 0, 10, 0); !errors.Is(err, ErrKind) {
		t.Fatalf("raw numbers of text: %v", err)
	}
	if _, err := db.RawText("n", 0, 10, 0); !errors.Is(err, ErrKind) {
		t.Fatalf("raw text of numbers: %v", err)
	}
	got, err := db.RawText("s", 0, 10, 0)
	if err != nil || len(got) != 1 || got[0].Text != "on" {
		t.Fatalf("text after refusals: %+v, %v", got, err)
	}
}

// TestTextRaisesVersion: the first text write raises the data directory
// to format 4 (and, its WAL record being packed, 5) before its WAL record,
// so that an older Pith refuses it. The numbers before it are a bulk load,
// which writes no WAL record and so leaves the directory at 1.
func TestTextRaisesVersion(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions()
	opts.BulkPoints = 1
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(context.Background(), []model.Point{{Tag: "n", T: 1, V: 1}, {Tag: "n", T: 2, V: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	m := readManifest(t, dir)
	if m.Version != 1 {
		t.Fatalf("version %d before text, want 1", m.Version)
	}
	if db, err = Open(dir, testOptions()); err != nil {
		t.Fatal(err)
	}
	if err := db.WriteText(context.Background(), []model.TextPoint{{Tag: "s", T: 1, Text: "on"}}); err != nil {
		t.Fatal(err)
	}
	if m := readManifest(t, dir); m.Version != formatPacked {
		t.Fatalf("version %d after text, want %d", m.Version, formatPacked)
	}
	db.Close()
}

func readManifest(t *testing.T, dir string) *manifest {
	t.Helper()
	buf, err := os.ReadFile(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := decodeManifest(buf)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
