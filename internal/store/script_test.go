package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// TestQueryScripts runs the query scripts in testdata/query. A script is a
// list of commands, one per line ('#' starts a comment):
//
//	write TAG T:V T:V ...        store samples (a transaction; later writes win)
//	flush                         write the head to run files
//	reopen                        close and open the store again
//	data TAG FROM TO N AGG        run a bucketed query ...
//	expect T:V T:null ...         ... and compare its buckets
//	raw TAG FROM TO               list the stored samples ...
//	expect T:V ...                ... and compare them
func TestQueryScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/query/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts in testdata/query")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { runScript(t, f) })
	}
}

func runScript(t *testing.T, path string) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	db, err := Open(dir, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	var got []string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = strings.TrimSpace(text[:i])
		}
		if text == "" {
			continue
		}
		fs := strings.Fields(text)
		at := fmt.Sprintf("%s:%d", filepath.Base(path), line)
		num := func(s string) int64 {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("%s: bad number %q", at, s)
			}
			return n
		}
		switch fs[0] {
		case "write":
			var pts []model.Point
			for _, tv := range fs[2:] {
				ts, vs, _ := strings.Cut(tv, ":")
				v, err := strconv.ParseFloat(vs, 64)
				if err != nil {
					t.Fatalf("%s: bad sample %q", at, tv)
				}
				pts = append(pts, model.Point{Tag: fs[1], T: num(ts), V: v})
			}
			if err := db.Write(context.Background(), pts); err != nil {
				t.Fatalf("%s: %v", at, err)
			}
		case "flush":
			if err := db.Flush(); err != nil {
				t.Fatalf("%s: %v", at, err)
			}
		case "reopen":
			if err := db.Close(); err != nil {
				t.Fatalf("%s: %v", at, err)
			}
			if db, err = Open(dir, testOptions()); err != nil {
				t.Fatalf("%s: %v", at, err)
			}
		case "data":
			agg, err := model.ParseAgg(fs[5])
			if err != nil {
				t.Fatalf("%s: %v", at, err)
			}
			bs, err := db.Aggregate(fs[1], num(fs[2]), num(fs[3]), int(num(fs[4])), agg)
			if err != nil {
				t.Fatalf("%s: %v", at, err)
			}
			got = got[:0]
			for _, b := range bs {
				if b.OK {
					got = append(got, fmt.Sprintf("%d:%s", b.T, strconv.FormatFloat(b.V, 'g', -1, 64)))
				} else {
					got = append(got, fmt.Sprintf("%d:null", b.T))
				}
			}
		case "raw":
			ss, err := db.Raw(fs[1], num(fs[2]), num(fs[3]), 0)
			if err != nil {
				t.Fatalf("%s: %v", at, err)
			}
			got = got[:0]
			for _, s := range ss {
				got = append(got, fmt.Sprintf("%d:%s", s.T, strconv.FormatFloat(s.V, 'g', -1, 64)))
			}
		case "expect":
			if want := strings.Join(fs[1:], " "); strings.Join(got, " ") != want {
				t.Errorf("%s:\n got  %s\n want %s", at, strings.Join(got, " "), want)
			}
		default:
			t.Fatalf("%s: unknown command %q", at, fs[0])
		}
	}
}
