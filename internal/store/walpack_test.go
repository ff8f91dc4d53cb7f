package store

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store/vfs"
)

// idTag is how these tests name a point written by series id: the tag
// "#N" is series N, known to packIDs; any other tag is written by name.
func packIDs(tag string) (uint32, bool) {
	if !strings.HasPrefix(tag, "#") {
		return 0, false
	}
	n, err := strconv.ParseUint(tag[1:], 10, 32)
	return uint32(n), err == nil
}

// goldenPackedRecord is the golden packed record: the golden points (raw,
// decimal and integer values, names, late and pre-1970 times), a live
// batch by id (one time, ids in order, one decimal exponent across
// integers) and the golden text points, as a replica of transaction 0.
func goldenPackedRecord() []byte {
	pts := append([]model.Point(nil), goldenPoints...)
	pts = append(pts, model.Point{Tag: "plant.x", T: 3, V: math.Copysign(0, -1)})
	for i := range 12 {
		pts = append(pts, model.Point{Tag: "#" + strconv.Itoa(1000+i), T: 1_700_000_002_000, V: float64(573+i) / 10})
	}
	return appendPackedRecord(nil, recPacked, txnAuto, pts, goldenTextPoints, make(map[string]int), nil, packIDs)
}

// decodeTagged decodes a data record of either layout into its numeric
// and text points; a point keyed by series id gets the tag "#id".
func decodeTagged(rec []byte) ([]model.Point, []model.TextPoint, error) {
	return decodeMixed(rec)
}

func samePoints(t *testing.T, what string, got, want []model.Point) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d points, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Tag != w.Tag || g.T != w.T || g.Q != w.Q || math.Float64bits(g.V) != math.Float64bits(w.V) {
			t.Fatalf("%s: point %d is %+v (bits %#x), want %+v (bits %#x)", what, i, g, math.Float64bits(g.V), w, math.Float64bits(w.V))
		}
	}
}

func sameTexts(t *testing.T, what string, got, want []model.TextPoint) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d text points, want %d", what, len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: text point %d is %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

// TestPackedFormatGolden pins the bytes of a packed data record
// (testdata/format/packed_record.bin; PITH_UPDATE_GOLDEN=1 rewrites it)
// and what it decodes to.
func TestPackedFormatGolden(t *testing.T) {
	b := readGolden(t, "packed_record.bin")
	if !bytes.Equal(b, goldenPackedRecord()) {
		t.Fatal("the packed record encoder no longer writes the golden bytes")
	}
	pts, texts, err := decodeTagged(b)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]model.Point(nil), goldenPoints...)
	want = append(want, model.Point{Tag: "plant.x", T: 3, V: math.Copysign(0, -1)})
	for i := range 12 {
		want = append(want, model.Point{Tag: "#" + strconv.Itoa(1000+i), T: 1_700_000_002_000, V: float64(573+i) / 10})
	}
	samePoints(t, "golden", pts, want)
	sameTexts(t, "golden", texts, goldenTextPoints)
}

// randomValue draws a value of every form the encoder knows: integers,
// decimals of 1 to 4 (and more) decimals, -0, tiny, huge and random bits.
func randomValue(r *rand.Rand) float64 {
	switch r.Intn(9) {
	case 0:
		return float64(r.Int63n(2000) - 1000)
	case 1:
		return float64(r.Int63n(1<<53)) * float64(1-2*r.Intn(2))
	case 2:
		e := 1 + r.Intn(4)
		return float64(r.Int63n(200000)-100000) / pow10[e]
	case 3:
		return float64(r.Int63n(1000000)) / pow10[5+r.Intn(6)]
	case 4:
		return math.Copysign(0, -1)
	case 5:
		return []float64{math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 1 << 53, 1<<53 + 2, -(1 << 60), 0.1 + 0.2}[r.Intn(7)]
	case 6:
		for {
			v := math.Float64frombits(r.Uint64())
			if model.CheckValue(v) == nil {
				return v
			}
		}
	case 7:
		return float64(r.Intn(1000)) / 10 // a live batch's steps
	default:
		return r.NormFloat64() * 100
	}
}

func randomPackText(r *rand.Rand) string {
	alphabet := []string{"a", "Z", " ", "é", "€", "😀", ",", "\"", "\t"}
	var b strings.Builder
	for n := r.Intn(12); n > 0; n-- {
		b.WriteString(alphabet[r.Intn(len(alphabet))])
	}
	if r.Intn(20) == 0 {
		return strings.Repeat("x", model.MaxTextLen)
	}
	return b.String()
}

// randomRecordPoints draws the points of one record: tags by name or by id,
// repeated tags and times (the record's order must survive), times in
// order, equal, backwards or at random, every quality and value form.
func randomRecordPoints(r *rand.Rand) ([]model.Point, []model.TextPoint) {
	tags := make([]string, 1+r.Intn(20))
	for i := range tags {
		if r.Intn(2) == 0 {
			tags[i] = "#" + strconv.Itoa(r.Intn(1<<16))
		} else {
			tags[i] = "t." + strconv.Itoa(i)
		}
	}
	if r.Intn(8) == 0 {
		// The largest series id a key holds: 2^32-1, or on a 32-bit
		// board what fits an int beside the record's names.
		tags[0] = "#" + strconv.FormatUint(min(math.MaxUint32, uint64(math.MaxInt)-64), 10)
	}
	t := r.Int63n(1<<45) - 1<<44
	times := r.Intn(4)
	nextT := func(i int) int64 {
		switch times {
		case 0: // one time for all: a live batch
		case 1:
			t += int64(r.Intn(1000))
		case 2:
			t -= int64(r.Intn(3))
		default:
			t = r.Int63() - r.Int63()
		}
		return t
	}
	pts := make([]model.Point, r.Intn(300))
	seq := r.Intn(2) == 0 // ids in order, as a batch of all tags
	for i := range pts {
		tag := tags[r.Intn(len(tags))]
		if seq {
			tag = "#" + strconv.Itoa(100+i)
		}
		pts[i] = model.Point{Tag: tag, T: nextT(i), V: randomValue(r), Q: model.Quality(r.Intn(3))}
		if r.Intn(10) == 0 && i > 0 {
			pts[i].Tag, pts[i].T = pts[i-1].Tag, pts[i-1].T // same tag and time again: the last wins
		}
	}
	var tpts []model.TextPoint
	if r.Intn(3) == 0 {
		tpts = make([]model.TextPoint, r.Intn(20))
		for i := range tpts {
			tpts[i] = model.TextPoint{Tag: tags[r.Intn(len(tags))], T: nextT(i), Text: randomPackText(r), Q: model.Quality(r.Intn(3))}
		}
	}
	return pts, tpts
}

// TestPackedRoundTrip encodes random points as packed records and checks
// that they decode to the same points in the same order, float64 bits
// included, and to what the 'D' layout of the same points decodes to (but
// -0, which the 'D' layout writes as 0).
func TestPackedRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	names := make(map[string]int)
	for iter := 0; iter < 3000; iter++ {
		pts, tpts := randomRecordPoints(r)
		typ := []byte{recPacked, recPackedReplica}[r.Intn(2)]
		txn := uint64(r.Intn(3))
		rec := appendPackedRecord(nil, typ, txn, pts, tpts, names, nil, packIDs)
		var d dataRecord
		if err := decodeDataRecord(rec, &d); err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		if d.txn != txn || isReplicaRecord(rec[0]) != (typ == recPackedReplica) {
			t.Fatalf("iteration %d: txn %d, type %c", iter, d.txn, rec[0])
		}
		got, gotText, err := decodeTagged(rec)
		if err != nil {
			t.Fatalf("iteration %d: %v", iter, err)
		}
		what := fmt.Sprintf("iteration %d", iter)
		samePoints(t, what, got, pts)
		sameTexts(t, what, gotText, tpts)

		old, oldText, err := decodeTagged(appendMixedRecord(nil, txn, pts, tpts, names, nil, packIDs))
		if err != nil {
			t.Fatal(err)
		}
		for i := range old {
			if old[i].V == 0 && math.Signbit(pts[i].V) {
				old[i].V = pts[i].V
			}
		}
		samePoints(t, what+" against the D layout", got, old)
		sameTexts(t, what+" against the D layout", gotText, oldText)
	}
}

// TestPackedSmaller checks the point of the layout on a live batch: 10,000
// tags by id at one time, values stepping by 0.1.
func TestPackedSmaller(t *testing.T) {
	pts := livePoints(10000, 0, 1_700_000_000_000)
	d := appendMixedRecord(nil, txnAuto, pts, nil, make(map[string]int), nil, packIDs)
	p := appendPackedRecord(nil, recPacked, txnAuto, pts, nil, make(map[string]int), nil, packIDs)
	t.Logf("live batch of %d points: D %.2f B/point, P %.2f B/point", len(pts), float64(len(d))/float64(len(pts)), float64(len(p))/float64(len(pts)))
	if len(p)*3 > len(d) {
		t.Fatalf("packed record %d bytes, D record %d: want at most a third", len(p), len(d))
	}
}

// livePoints is one batch of the live test of `pith bench scale`: every
// tag's value at time t, tag i stepping by 0.1 and wrapping at 100.
func livePoints(tags, k int, t int64) []model.Point {
	pts := make([]model.Point, tags)
	for i := range pts {
		pts[i] = model.Point{Tag: "#" + strconv.Itoa(i), T: t, V: float64((i+k)%1000) / 10}
	}
	return pts
}

// FuzzPackedRecord feeds arbitrary bytes to the packed record decoder: it
// must not panic, and what it accepts must encode and decode again to the
// same points. Seeded with the golden record and random ones.
func FuzzPackedRecord(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join(goldenDir, "packed_record.bin")); err == nil {
		f.Add(b)
	}
	r := rand.New(rand.NewSource(2))
	for range 8 {
		pts, tpts := randomRecordPoints(r)
		f.Add(appendPackedRecord(nil, recPacked, txnAuto, pts, tpts, make(map[string]int), nil, packIDs))
	}
	f.Add(appendPackedRecord(nil, recPackedReplica, 7, livePoints(50, 3, 1), nil, make(map[string]int), nil, packIDs))
	f.Add([]byte{recPacked})
	f.Fuzz(func(t *testing.T, rec []byte) {
		if len(rec) == 0 || (rec[0] != recPacked && rec[0] != recPackedReplica) {
			return
		}
		pts, tpts, err := decodeTagged(rec)
		if err != nil {
			return
		}
		var d dataRecord
		if err := decodeDataRecord(rec, &d); err != nil {
			t.Fatal(err)
		}
		for _, n := range d.names {
			if strings.HasPrefix(string(n), "#") {
				return // a name the test's id function would read as an id
			}
		}
		again := appendPackedRecord(nil, rec[0], d.txn, pts, tpts, make(map[string]int), nil, packIDs)
		pts2, tpts2, err := decodeTagged(again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		samePoints(t, "re-encoded", pts2, pts)
		sameTexts(t, "re-encoded", tpts2, tpts)
	})
}

// BenchmarkPackedRecord encodes and decodes one live batch (10,000 tags
// by id, one time) in each layout:
//
//	go test -run '^$' -bench PackedRecord ./internal/store
func BenchmarkPackedRecord(b *testing.B) {
	pts := livePoints(10000, 0, 1_700_000_000_000)
	for _, l := range []struct {
		name string
		enc  func(dst []byte) []byte
	}{
		{"D", func(dst []byte) []byte {
			return appendMixedRecord(dst, txnAuto, pts, nil, make(map[string]int), nil, packIDs)
		}},
		{"P", func(dst []byte) []byte {
			return appendPackedRecord(dst, recPacked, txnAuto, pts, nil, make(map[string]int), nil, packIDs)
		}},
	} {
		b.Run("encode/"+l.name, func(b *testing.B) {
			b.ReportAllocs()
			var rec []byte
			for b.Loop() {
				rec = l.enc(rec[:0])
			}
			b.ReportMetric(float64(len(rec))/float64(len(pts)), "B/point")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pts)), "ns/point")
		})
		b.Run("decode/"+l.name, func(b *testing.B) {
			b.ReportAllocs()
			rec := l.enc(nil)
			var d dataRecord
			for b.Loop() {
				if err := decodeDataRecord(rec, &d); err != nil {
					b.Fatal(err)
				}
				for range d.n {
					if _, _, _, _, err := d.next(); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pts)), "ns/point")
		})
	}
}

// TestPackedAfterLegacyRecords: a WAL written by the previous build ('D'
// and 'R' records) and then by this one (packed records), cut by a power
// failure, replays every acknowledged point, and a follower delivers each
// record once with the same points and replica marks.
func TestPackedAfterLegacyRecords(t *testing.T) {
	fs := vfs.NewFaultFS()
	opts := followOptions(fs)
	opts.HeadMaxSamples = 1 << 20
	db, err := Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Follow("f", FollowOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	old := []model.Point{{Tag: "a", T: 1, V: 1.5}, {Tag: "b", T: 1, V: -2, Q: model.QualityBad}}
	oldReplica := []model.Point{{Tag: "a", T: 2, V: math.Copysign(0, 1)}}
	// Records as the previous build wrote them, appended as it did.
	for _, r := range []struct {
		typ byte
		pts []model.Point
	}{{recData, old}, {recReplica, oldReplica}} {
		rec := appendMixedRecord(nil, txnAuto, r.pts, nil, make(map[string]int), nil, nil)
		rec[0] = r.typ
		if err := db.commit(rec, func() error { _, err := db.applyPoints(r.pts); return err }); err != nil {
			t.Fatal(err)
		}
	}
	newPts := []model.Point{{Tag: "a", T: 3, V: 57.3}, {Tag: "c", T: 3, V: math.Copysign(0, -1)}, {Tag: "a", T: 3, V: 58}}
	if err := db.Write(ctx, newPts); err != nil {
		t.Fatal(err)
	}
	newReplica := []model.Point{{Tag: "b", T: 4, V: 1e300}}
	if err := db.WriteReplica(ctx, newReplica); err != nil {
		t.Fatal(err)
	}
	after := fs.Crash(vfs.CrashOptions{})
	opts.FS = after
	db, err = Open("/data", opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want := map[string][]model.Sample{
		"a": {{T: 1, V: 1.5}, {T: 2, V: 0}, {T: 3, V: 58}},
		"b": {{T: 1, V: -2, Q: model.QualityBad}, {T: 4, V: 1e300}},
		"c": {{T: 3, V: math.Copysign(0, -1)}},
	}
	for tag, w := range want {
		got, err := db.Raw(tag, 0, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(w) {
			t.Fatalf("%s after replay: %+v, want %+v", tag, got, w)
		}
		for i := range w {
			if got[i].T != w[i].T || got[i].Q != w[i].Q || math.Float64bits(got[i].V) != math.Float64bits(w[i].V) {
				t.Fatalf("%s after replay: %+v, want %+v", tag, got, w)
			}
		}
	}
	f, err := db.Follow("f", FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var entries []Entry
	for len(entries) < 4 {
		b, err := f.Next(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range b.Entries {
			if e.Kind == EntryPoints {
				entries = append(entries, e)
			}
		}
	}
	wantEntries := []struct {
		pts     []model.Point
		replica bool
	}{{old, false}, {oldReplica, true}, {newPts, false}, {newReplica, true}}
	for i, w := range wantEntries {
		if entries[i].Replica != w.replica {
			t.Fatalf("entry %d replica %v, want %v", i, entries[i].Replica, w.replica)
		}
		samePoints(t, fmt.Sprintf("entry %d", i), entries[i].Points, w.pts)
	}
}
