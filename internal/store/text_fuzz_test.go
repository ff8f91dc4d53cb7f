package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store/vfs"
)

// goldenTextPoints are the text points of the golden text record and run.
var goldenTextPoints = []model.TextPoint{
	{Tag: "line.state", T: int64(goldenPart)*partitionMs + 1000, Text: "RUN"},
	{Tag: "line.state", T: int64(goldenPart)*partitionMs + 61_000, Text: "STOP", Q: model.QualityUncertain},
	{Tag: "line.batch", T: int64(goldenPart)*partitionMs + 2000, Text: "B-2026-000117"},
	{Tag: "line.operator", T: int64(goldenPart)*partitionMs + 3000, Text: "Zoë Ångström"},
	{Tag: "line.note", T: int64(goldenPart)*partitionMs + 4000, Text: ""},
	{Tag: "line.note", T: int64(goldenPart)*partitionMs + 5000, Text: strings.Repeat("ab", model.MaxTextLen/2), Q: model.QualityBad},
}

// goldenTextRecord is a data record of two numbers and the text points.
func goldenTextRecord() []byte {
	return appendMixedRecord(nil, txnAuto, goldenPoints[:2], goldenTextPoints, make(map[string]int), nil, nil)
}

// goldenTextInputs are the series of the golden text run: one numeric
// series and text series, one of them longer than a chunk.
func goldenTextInputs() []runInput {
	t0 := int64(goldenPart) * partitionMs
	num := runInput{id: 0}
	for i := 0; i < 100; i++ {
		num.ts = append(num.ts, t0+int64(i)*1000)
		num.vs = append(num.vs, float64(i)/10)
		num.qs = append(num.qs, model.QualityGood)
	}
	state := runInput{id: 1, xs: []string{}}
	for i := 0; i < maxChunk+200; i++ {
		state.ts = append(state.ts, t0+int64(i)*5000)
		state.vs = append(state.vs, 0)
		state.qs = append(state.qs, model.Quality(i/300%3))
		state.xs = append(state.xs, []string{"RUNNING", "STOPPED", "CIP"}[i/77%3])
	}
	batch := runInput{id: 3, xs: []string{}}
	for i := 0; i < 50; i++ {
		batch.ts = append(batch.ts, t0+int64(i)*600_000)
		batch.vs = append(batch.vs, 0)
		batch.qs = append(batch.qs, model.QualityGood)
		batch.xs = append(batch.xs, fmt.Sprintf("B-2026-%06d «%d»", 100+i/2, i))
	}
	return []runInput{num, state, batch}
}

func writeGoldenTextRun(t testing.TB, dir string) []byte {
	t.Helper()
	rw, err := createRun(vfs.OS{}, dir, goldenPart, 42, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range goldenTextInputs() {
		rw.add(&in, false)
	}
	path, err := rw.finish(true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeMixed decodes a data record into its numeric and text points; a
// point keyed by series id gets the tag "#id".
func decodeMixed(rec []byte) ([]model.Point, []model.TextPoint, error) {
	var d dataRecord
	if err := decodeDataRecord(rec, &d); err != nil {
		return nil, nil, err
	}
	var pts []model.Point
	var texts []model.TextPoint
	for i := 0; i < d.n; i++ {
		k, t, v, q, err := d.next()
		if err != nil {
			return nil, nil, err
		}
		tag := fmt.Sprintf("#%d", k-len(d.names))
		if k < len(d.names) {
			tag = string(d.names[k])
		}
		if d.isText {
			texts = append(texts, model.TextPoint{Tag: tag, T: t, Text: string(d.text), Q: q})
		} else {
			pts = append(pts, model.Point{Tag: tag, T: t, V: v, Q: q})
		}
	}
	return pts, texts, nil
}

// TestTextFormatGolden pins the text record's bytes and the text run's
// content (testdata/format/text_record.bin, text_run.bin;
// PITH_UPDATE_GOLDEN=1 rewrites them).
func TestTextFormatGolden(t *testing.T) {
	t.Run("record", func(t *testing.T) {
		b := readGolden(t, "text_record.bin")
		if !bytes.Equal(b, goldenTextRecord()) {
			t.Fatal("the data record encoder no longer writes the golden text record")
		}
		pts, texts, err := decodeMixed(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(pts) != 2 || pts[0] != goldenPoints[0] || pts[1] != goldenPoints[1] {
			t.Fatalf("numbers %+v", pts)
		}
		if len(texts) != len(goldenTextPoints) {
			t.Fatalf("%d text points, want %d", len(texts), len(goldenTextPoints))
		}
		for i := range texts {
			if texts[i] != goldenTextPoints[i] {
				t.Fatalf("text point %d: %+v, want %+v", i, texts[i], goldenTextPoints[i])
			}
		}
	})
	t.Run("run", func(t *testing.T) {
		b := readGolden(t, "text_run.bin")
		if v := b[8]; v != runVersionText {
			t.Fatalf("header version %d, want %d", v, runVersionText)
		}
		r, err := openRunBytes(t, b)
		if err != nil {
			t.Fatal(err)
		}
		defer r.close()
		got, bad := decodeRun(r)
		if bad != 0 {
			t.Fatalf("%d damaged blocks", bad)
		}
		for _, w := range goldenTextInputs() {
			g := got[w.id]
			if g == nil || len(g.ts) != len(w.ts) || (g.xs != nil) != (w.xs != nil) {
				t.Fatalf("series %d: %d samples, want %d", w.id, len(g.ts), len(w.ts))
			}
			for i := range w.ts {
				if g.ts[i] != w.ts[i] || g.vs[i] != w.vs[i] || g.qs[i] != w.qs[i] || (w.xs != nil && g.xs[i] != w.xs[i]) {
					t.Fatalf("series %d sample %d differs", w.id, i)
				}
			}
			rs := r.find(w.id)
			if w.xs != nil && (rs.fine != fineText || rs.lastText != w.xs[len(w.xs)-1] || rs.n != int64(len(w.ts))) {
				t.Fatalf("series %d index entry %+v", w.id, rs)
			}
		}
	})
}

// FuzzTextRecord feeds data records with text points to the decoder:
// whatever decodes must be valid and encode again to the same points.
// Run: go test -run '^$' -fuzz FuzzTextRecord -fuzztime 60s ./internal/store/
func FuzzTextRecord(f *testing.F) {
	f.Add(readGolden(f, "text_record.bin"))
	f.Add(appendMixedRecord(nil, 3, nil, goldenTextPoints[:1], make(map[string]int), nil, nil))
	f.Fuzz(func(t *testing.T, rec []byte) {
		pts, texts, err := decodeMixed(rec)
		if err != nil {
			return
		}
		for _, p := range texts {
			if model.CheckText(p.Text) != nil || p.Q > model.QualityUncertain {
				t.Fatalf("decoded an invalid text point %+v", p)
			}
			if strings.HasPrefix(p.Tag, "#") {
				return
			}
		}
		for _, p := range pts {
			if strings.HasPrefix(p.Tag, "#") {
				return
			}
		}
		p2, t2, err := decodeMixed(appendMixedRecord(nil, txnAuto, pts, texts, make(map[string]int), nil, nil))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if len(p2) != len(pts) || len(t2) != len(texts) {
			t.Fatalf("re-encoded record holds %d+%d points, want %d+%d", len(p2), len(t2), len(pts), len(texts))
		}
		for i := range texts {
			if t2[i] != texts[i] {
				t.Fatalf("text point %d: %+v became %+v", i, texts[i], t2[i])
			}
		}
	})
}

// FuzzTextRunFile opens mutated runs holding text series and decodes every
// block: nothing may panic.
// Run: go test -run '^$' -fuzz FuzzTextRunFile -fuzztime 60s ./internal/store/
func FuzzTextRunFile(f *testing.F) {
	golden := readGolden(f, "text_run.bin")
	f.Add(golden)
	blocks, raw := splitGoldenRun(f, golden)
	f.Add(buildRun(blocks, raw[:len(raw)-3]))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := openRunBytes(t, b)
		if err != nil {
			return
		}
		defer r.close()
		decodeRun(r)
	})
}

// FuzzTextRunIndex mutates the raw index of the golden text run behind
// valid checksums, so that parseIndex and the text chunk decoder meet bad
// counts, lengths and last values.
// Run: go test -run '^$' -fuzz FuzzTextRunIndex -fuzztime 60s ./internal/store/
func FuzzTextRunIndex(f *testing.F) {
	blocks, raw := splitGoldenRun(f, readGolden(f, "text_run.bin"))
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	f.Fuzz(func(t *testing.T, idx []byte) {
		r, err := openRunBytes(t, buildRun(blocks, idx))
		if err != nil {
			return
		}
		defer r.close()
		decodeRun(r)
	})
}

// goldenDataDirV4 is a backup written by format version 4: numbers and
// text in two days of runs and a WAL tail. Every later Pith must restore
// and open it with the same answers; `PITH_UPDATE_GOLDEN=1 go test -run
// TestGoldenDataDirV4 ./internal/store` rewrites it while FormatVersion
// is 4.
const goldenDataDirV4 = "testdata/format/datadir-v4"

func goldenDirTexts() (runs1, runs2, walOnly []model.TextPoint) {
	base := 19_700 * dayMs
	for i := range 40 {
		runs1 = append(runs1, model.TextPoint{Tag: "site.pump.mode", T: base + int64(i)*600_000, Text: []string{"AUTO", "MANUAL", "OFF"}[i%3]})
	}
	for i := range 10 {
		runs2 = append(runs2, model.TextPoint{Tag: "site.batch", T: base + dayMs + int64(i)*3_600_000, Text: fmt.Sprintf("B-%04d", i), Q: model.Quality(i % 3)})
	}
	walOnly = []model.TextPoint{{Tag: "site.pump.mode", T: base + dayMs + 7, Text: "fault: «dry run»", Q: model.QualityBad}}
	return
}

func TestGoldenDataDirV4(t *testing.T) {
	if os.Getenv("PITH_UPDATE_GOLDEN") != "" {
		writeGoldenTextDir(t, goldenDataDirV4, 4)
	}
	checkGoldenTextDir(t, goldenDataDirV4)
}

// goldenDataDirV5 is a backup written by format version 5, the points and
// texts of goldenDataDirV4 with its WAL tail in packed data records.
// `PITH_UPDATE_GOLDEN=1 go test -run TestGoldenDataDirV5 ./internal/store`
// rewrites it while FormatVersion is 5.
const goldenDataDirV5 = "testdata/format/datadir-v5"

func TestGoldenDataDirV5(t *testing.T) {
	if os.Getenv("PITH_UPDATE_GOLDEN") != "" {
		writeGoldenTextDir(t, goldenDataDirV5, 5)
	}
	checkGoldenTextDir(t, goldenDataDirV5)
}

// checkGoldenTextDir verifies, restores and opens the golden backup in dir
// written by writeGoldenTextDir, and expects its points and texts.
func checkGoldenTextDir(t *testing.T, dir string) {
	t.Helper()
	rep, err := Verify(dir)
	if err != nil || !rep.OK() || !rep.Backup {
		t.Fatalf("verify golden: %v %+v", err, rep)
	}
	dst := t.TempDir() + "/d"
	if _, err := Restore(dir, dst, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dst, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m, mt := naive{}, naiveText{}
	a, b, c := goldenDirPoints()
	m.write(a)
	m.write(b)
	m.write(c)
	ta, tb, tc := goldenDirTexts()
	mt.write(ta)
	mt.write(tb)
	mt.write(tc)
	for _, tag := range []string{"site.pump.flow", "site.pump.state", "site.tank.level"} {
		got, err := db.Raw(tag, 0, 1<<62, 0)
		if err != nil || len(got) != len(m.sorted(tag)) {
			t.Fatalf("%s: %d samples, %v", tag, len(got), err)
		}
	}
	for _, tag := range []string{"site.pump.mode", "site.batch"} {
		got, err := db.RawText(tag, 0, 1<<62, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := mt.sorted(tag, 0, 1<<62)
		if len(got) != len(want) {
			t.Fatalf("%s: %d values, want %d", tag, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s value %d: %+v, want %+v", tag, i, got[i], want[i])
			}
		}
	}
}

// writeGoldenTextDir writes the golden backup of format version into dir:
// numbers and texts in two days of runs and a WAL tail.
func writeGoldenTextDir(t *testing.T, dir string, version int) {
	t.Helper()
	if FormatVersion != version {
		t.Fatalf("FormatVersion is %d: add a new golden folder, keep %s", FormatVersion, dir)
	}
	db, err := Open(t.TempDir(), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, b, c := goldenDirPoints()
	ta, tb, tc := goldenDirTexts()
	ctx := context.Background()
	for i, pts := range [][]model.Point{a, b} {
		if err := db.Write(ctx, pts); err != nil {
			t.Fatal(err)
		}
		if err := db.WriteText(ctx, [][]model.TextPoint{ta, tb}[i]); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Write(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := db.WriteText(ctx, tc); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := db.backup(ctx, dir, false); err != nil {
		t.Fatal(err)
	}
}

// goldenDataDirV2 is a backup written by the Pith before text values
// (format version 2: the points of goldenDirPoints, then a delete of
// site.pump.flow in [base+10 min, base+20 min) while the WAL tail was
// still unwritten). This code must restore and open it unchanged, and
// leave its version alone until it writes text.
const goldenDataDirV2 = "testdata/format/datadir-v2"

func TestGoldenDataDirV2(t *testing.T) {
	rep, err := Verify(goldenDataDirV2)
	if err != nil || !rep.OK() || !rep.Backup {
		t.Fatalf("verify golden: %v %+v", err, rep)
	}
	dst := t.TempDir() + "/d"
	if _, err := Restore(goldenDataDirV2, dst, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	db, err := Open(dst, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	m := naive{}
	a, b, c := goldenDirPoints()
	m.write(a)
	m.write(b)
	base := 19_700 * dayMs
	for ts := range m["site.pump.flow"] {
		if ts >= base+10*60_000 && ts < base+20*60_000 {
			delete(m["site.pump.flow"], ts)
		}
	}
	m.write(c)
	sameRaw(t, db, m, "site.pump.flow", "site.pump.state", "site.tank.level")
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if v := readManifest(t, dst).Version; v != 2 {
		t.Fatalf("version %d after opening and flushing, want 2 (unchanged)", v)
	}
	if err := db.WriteText(context.Background(), []model.TextPoint{{Tag: "site.pump.mode", T: base, Text: "AUTO"}}); err != nil {
		t.Fatal(err)
	}
	// The text write's WAL record is a packed one, so the directory goes
	// past formatText to formatPacked.
	if v := readManifest(t, dst).Version; v != formatPacked {
		t.Fatalf("version %d after text, want %d", v, formatPacked)
	}
	db.Close()
}
