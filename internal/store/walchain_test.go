package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store/wal"
)

// chainRecords encodes batches as chained records, each appended (as far
// as the encoder knows) to the chain of the one before; starts says which
// records start a chain.
func chainRecords(batches [][]model.Point, starts func(i int) bool) [][]byte {
	var c chainEnc
	recs := make([][]byte, len(batches))
	for i, pts := range batches {
		st := starts(i)
		recs[i] = bytes.Clone(c.encode(pts, st, packIDs))
		c.commit(pts, st, wal.Chain{})
	}
	return recs
}

// decodeChainedTagged decodes a chained record against c as decodeTagged
// does a packed one.
func decodeChainedTagged(rec []byte, c *walChain) ([]model.Point, error) {
	d := dataRecord{chain: c}
	if err := decodeDataRecord(rec, &d); err != nil {
		return nil, err
	}
	var pts []model.Point
	for range d.n {
		k, t, v, q, err := d.next()
		if err != nil {
			return nil, err
		}
		tag := "#" + strconv.Itoa(k-len(d.names))
		if k < len(d.names) {
			tag = string(d.names[k])
		}
		pts = append(pts, model.Point{Tag: tag, T: t, V: v, Q: q})
	}
	return pts, nil
}

// countDeltas counts the points of a chained record written as
// differences.
func countDeltas(t testing.TB, rec []byte) int {
	d := dataRecord{chain: &walChain{}}
	if err := decodeDataRecord(rec, &d); err != nil && !errors.Is(err, errNoChain) {
		t.Fatal(err)
	}
	b := rec[1:]
	for range 2 { // txn, name count
		_, k := binary.Uvarint(b)
		b = b[k:]
	}
	for range d.names {
		l, k := binary.Uvarint(b)
		b = b[k+int(l):]
	}
	_, k := binary.Uvarint(b) // point count
	b = b[k+1:]               // and the chain byte
	var l [4]uint64
	for i := range l {
		l[i], k = binary.Uvarint(b)
		b = b[k:]
	}
	var f flagDec
	f.b = b[l[0]+l[1] : l[0]+l[1]+l[2]]
	n := 0
	for range d.n {
		fl, err := f.next()
		if err != nil {
			t.Fatal(err)
		}
		if fl&chainDelta != 0 {
			n++
		}
	}
	return n
}

// liveBatches is the live test's load: tags by id, each stepping from one
// batch to the next, some by small random steps (a noisy sensor), some
// by the live test's 0.1, some integer counters, a few raw.
func liveBatches(r *rand.Rand, tags, n int) [][]model.Point {
	vals := make([]float64, tags)
	for i := range vals {
		vals[i] = float64(r.Intn(10000)) / 10
	}
	out := make([][]model.Point, n)
	for k := range out {
		pts := make([]model.Point, 0, tags)
		for i := range tags {
			switch i % 4 {
			case 0:
				vals[i] = math.Round((vals[i]+float64(r.Intn(21)-10)/100)*100) / 100
			case 1:
				vals[i] = float64((i+k)%1000) / 10
			case 2:
				vals[i] += float64(r.Intn(3))
			default:
				if r.Intn(10) == 0 {
					vals[i] = r.NormFloat64()
				}
			}
			pts = append(pts, model.Point{Tag: "#" + strconv.Itoa(i), T: 1_700_000_000_000 + int64(k)*100, V: vals[i], Q: model.Quality(r.Intn(3))})
		}
		out[k] = pts
	}
	return out
}

// TestChainedRoundTrip: records of random points (every value form, names
// and ids, a series twice in a record, chains started at random) decode in
// order to the same points, bit for bit, and many values are written as
// differences.
func TestChainedRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	var batches [][]model.Point
	for range 400 {
		switch r.Intn(3) {
		case 0:
			pts, _ := randomRecordPoints(r)
			batches = append(batches, pts)
		case 1:
			batches = append(batches, liveBatches(r, 1+r.Intn(50), 1)[0])
		default:
			// The same few series again and again, some twice a record.
			pts := make([]model.Point, 1+r.Intn(30))
			for i := range pts {
				pts[i] = model.Point{Tag: "#" + strconv.Itoa(r.Intn(8)), T: int64(r.Intn(1e6)), V: randomValue(r)}
				if r.Intn(2) == 0 {
					pts[i].V = float64(r.Intn(2000)-1000) / 10
				}
			}
			batches = append(batches, pts)
		}
	}
	recs := chainRecords(batches, func(i int) bool { return i == 0 || r.Intn(20) == 0 })
	var c walChain
	deltas := 0
	for i, rec := range recs {
		got, err := decodeChainedTagged(rec, &c)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		samePoints(t, fmt.Sprintf("record %d", i), got, batches[i])
		deltas += countDeltas(t, rec)
	}
	if deltas < 1000 {
		t.Fatalf("only %d values written as differences: the test does not exercise them", deltas)
	}
}

// TestChainedSmaller checks the point of the layout on the live test's
// batches (10,000 tags by id at 10 Hz, values stepping by 0.1): after the
// record that starts the chain, a few bits a value.
func TestChainedSmaller(t *testing.T) {
	batches := make([][]model.Point, 20)
	for k := range batches {
		batches[k] = livePoints(10000, k, 1_700_000_000_000+int64(k)*100)
	}
	recs := chainRecords(batches, func(i int) bool { return i == 0 })
	packed := appendPackedRecord(nil, recPacked, txnAuto, batches[1], nil, make(map[string]int), nil, packIDs)
	var rest int
	for _, r := range recs[1:] {
		rest += len(r)
	}
	perPoint := float64(rest) / float64(19*10000)
	t.Logf("live batch: start %.3f B/point, chained %.3f B/point, packed %.3f B/point",
		float64(len(recs[0]))/10000, perPoint, float64(len(packed))/10000)
	if perPoint > 0.4 {
		t.Fatalf("chained records take %.3f bytes a point, want at most 0.4", perPoint)
	}
	var c walChain
	for i, rec := range recs {
		got, err := decodeChainedTagged(rec, &c)
		if err != nil {
			t.Fatal(err)
		}
		samePoints(t, fmt.Sprintf("record %d", i), got, batches[i])
	}
}

// TestChainedGap: a reader that misses a record (damage skipped, a gap in
// positions) refuses the records whose differences refer to values it did
// not read, decodes those written whole, and is whole again at the next
// start.
func TestChainedGap(t *testing.T) {
	r := rand.New(rand.NewSource(4))
	batches := liveBatches(r, 20, 6)
	// Record 3 holds other series, written whole: it decodes after the gap.
	batches[3] = []model.Point{{Tag: "#100", T: 5, V: 1.5}, {Tag: "x.name", T: 5, V: 2}}
	recs := chainRecords(batches, func(i int) bool { return i == 0 || i == 5 })
	var c walChain
	pos := wal.Pos{Segment: 1, Offset: 32}
	read := func(i int, skip bool) error {
		end := wal.Pos{Segment: pos.Segment, Offset: pos.Offset + 9 + int64(len(recs[i]))}
		defer func() { pos = end }()
		if skip {
			return nil
		}
		c.enter(pos, end)
		_, err := decodeChainedTagged(recs[i], &c)
		return err
	}
	// Record 2 refers to values of record 1; 4 to values of 2, which were
	// not read either; 3 holds values whole; 5 starts a chain.
	for i, want := range []error{nil, nil, errNoChain, nil, errNoChain, nil} {
		err := read(i, i == 1) // record 1 is damaged
		if i == 1 {
			continue
		}
		if !errors.Is(err, want) && !(want == nil && err == nil) {
			t.Fatalf("record %d: err %v, want %v", i, err, want)
		}
	}
	if countDeltas(t, recs[2]) == 0 || countDeltas(t, recs[4]) == 0 {
		t.Fatal("records 2 and 4 hold no differences: the test does not exercise them")
	}
}

// TestChainedStore: a store written in chained records across many small
// WAL segments, then cut off as by a power failure, replays every value
// exactly; a follower that resumes at a cursor in the middle of a segment
// delivers the values after it exactly; and the records hold differences.
func TestChainedStore(t *testing.T) {
	dir := t.TempDir()
	opts := quietOptions(nil)
	opts.walSegmentSize = 8 << 10
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f, err := db.Follow("up", FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(5))
	const tags = 200
	batches := liveBatches(r, tags, 150)
	named := make([][]model.Point, len(batches))
	m := naive{}
	for k, pts := range batches {
		named[k] = make([]model.Point, len(pts))
		for i, p := range pts {
			p.Tag = "c." + p.Tag[1:]
			named[k][i] = p
		}
		if k%2 == 0 {
			err = db.Write(ctx, named[k])
		} else { // a small transaction is one chained record too
			tx := db.Begin()
			if err = tx.Add(named[k]); err == nil {
				err = tx.Commit(ctx)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		m.write(named[k])
		if k == 0 {
			// Later records name the tags by id once the series file
			// holds them.
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Deliver and acknowledge about a third of the values.
	var got []model.Point
	drain := func(f *Follower, until int) {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		for len(got) < until {
			b, err := f.Next(wctx, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range b.Entries {
				got = append(got, e.Points...)
			}
			if err := f.Ack(b.End); err != nil {
				t.Fatal(err)
			}
		}
	}
	drain(f, tags*50)
	f.Close()
	crashed := copyDir(t, dir)
	db.Close()

	segs, err := os.ReadDir(filepath.Join(crashed, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	deltas, chained, padded := 0, 0, 0
	w, err := wal.Open(filepath.Join(crashed, "wal"), wal.DefaultOptions(), quietOptions(nil).Logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Replay(wal.Pos{}, func(pos, end wal.Pos, rec []byte) error {
		if len(rec) > 0 && rec[0] == recChained {
			chained++
			deltas += countDeltas(t, rec)
			if end.Offset != pos.Offset+9+int64(len(rec)) {
				padded++ // padding follows it, before the next record
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Logf("%d segments, %d chained records (%d followed by padding), %d differences", len(segs), chained, padded, deltas)
	if len(segs) < 5 || deltas < tags*50 || padded < 5 {
		t.Fatalf("%d segments, %d chained records (%d followed by padding), %d differences: the test does not exercise chains across segments and padding", len(segs), chained, padded, deltas)
	}

	db, err = Open(crashed, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range tags {
		tag := "c." + strconv.Itoa(i)
		raw, err := db.Raw(tag, 0, math.MaxInt64, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := m.sorted(tag)
		if len(raw) != len(want) {
			t.Fatalf("%s: %d samples after replay, want %d", tag, len(raw), len(want))
		}
		for j := range want {
			if raw[j].T != want[j].T || math.Float64bits(raw[j].V) != math.Float64bits(want[j].V) || raw[j].Q != want[j].Q {
				t.Fatalf("%s sample %d: %+v, want %+v", tag, j, raw[j], want[j])
			}
		}
	}
	f, err = db.Follow("up", FollowOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	drain(f, tags*len(batches))
	var want []model.Point
	for _, pts := range named {
		want = append(want, pts...)
	}
	samePoints(t, "follower", got, want)
}

// FuzzChainedRecord feeds arbitrary bytes to the chained record decoder
// after a chain of records: it must not panic, and what it accepts must
// encode again (as the start of a chain) to the same points.
func FuzzChainedRecord(f *testing.F) {
	r := rand.New(rand.NewSource(6))
	batches := liveBatches(r, 30, 4)
	prefix := chainRecords(batches[:3], func(i int) bool { return i == 0 })
	var c chainEnc
	for i := range 3 {
		c.encode(batches[i], i == 0, packIDs)
		c.commit(batches[i], i == 0, wal.Chain{})
	}
	f.Add(bytes.Clone(c.encode(batches[3], false, packIDs)))
	f.Add(bytes.Clone(c.encode(batches[3], true, packIDs)))
	if b, err := os.ReadFile(filepath.Join(goldenDir, "chained_record.bin")); err == nil {
		f.Add(b)
	}
	f.Add([]byte{recChained})
	f.Fuzz(func(t *testing.T, rec []byte) {
		if len(rec) == 0 || rec[0] != recChained {
			return
		}
		var ch walChain
		for _, p := range prefix {
			if _, err := decodeChainedTagged(p, &ch); err != nil {
				t.Fatal(err)
			}
		}
		pts, err := decodeChainedTagged(rec, &ch)
		if err != nil {
			return
		}
		d := dataRecord{chain: &walChain{}}
		decodeDataRecord(rec, &d)
		for _, n := range d.names {
			if len(n) > 0 && n[0] == '#' {
				return // a name the test's id function would read as an id
			}
		}
		var e chainEnc
		again := e.encode(pts, true, packIDs)
		pts2, err := decodeChainedTagged(again, &walChain{})
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		samePoints(t, "re-encoded", pts2, pts)
	})
}

// goldenChainedRecords is the golden chain: a start (ids and a name, an
// integer, decimals, a raw value) and a record after it with differences,
// one too wide for the record's width, a series twice and a raw value.
func goldenChainedRecords() [2][]byte {
	a := []model.Point{
		{Tag: "#0", T: 1_700_000_000_000, V: 57.3},
		{Tag: "#1", T: 1_700_000_000_000, V: 1200},
		{Tag: "#2", T: 1_700_000_000_000, V: 0.125, Q: model.QualityUncertain},
		{Tag: "#3", T: 1_700_000_000_000, V: math.Pi},
		{Tag: "plant.x", T: 1_700_000_000_000, V: 4},
	}
	b := []model.Point{
		{Tag: "#0", T: 1_700_000_000_100, V: 57.4},
		{Tag: "#1", T: 1_700_000_000_100, V: 1201},
		{Tag: "#2", T: 1_700_000_000_100, V: 0.25, Q: model.QualityUncertain},
		{Tag: "#3", T: 1_700_000_000_100, V: 2},
		{Tag: "#0", T: 1_700_000_000_200, V: 57.5},
		{Tag: "plant.x", T: 1_700_000_000_100, V: 5},
		{Tag: "#1", T: 1_700_000_000_300, V: 1202},
	}
	b[1].V = 1201 + 1e9 // too wide for the others' width
	recs := chainRecords([][]model.Point{a, b}, func(i int) bool { return i == 0 })
	return [2][]byte{recs[0], recs[1]}
}

// TestChainedFormatGolden pins the bytes of two chained records
// (testdata/format/chained_record.bin, the second record's bytes after the
// first's; PITH_UPDATE_GOLDEN=1 rewrites it) and what they decode to.
func TestChainedFormatGolden(t *testing.T) {
	g := goldenChainedRecords()
	b := readGolden(t, "chained_record.bin")
	if !bytes.Equal(b, append(bytes.Clone(g[0]), g[1]...)) {
		t.Fatal("the chained record encoder no longer writes the golden bytes")
	}
	var c walChain
	a, err := decodeChainedTagged(b[:len(g[0])], &c)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) != 5 || a[3].V != math.Pi {
		t.Fatalf("first record: %+v", a)
	}
	pts, err := decodeChainedTagged(b[len(g[0]):], &c)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 7 || pts[0].V != 57.4 || pts[1].V != 1201+1e9 || pts[4].V != 57.5 || pts[6].V != 1202 || pts[2].Q != model.QualityUncertain {
		t.Fatalf("second record: %+v", pts)
	}
	if n := countDeltas(t, b[len(g[0]):]); n != 2 {
		t.Fatalf("%d differences in the golden record, want 2 (#0 and #2)", n)
	}
}

// BenchmarkChainedRecord encodes and decodes the live test's batch (10,000
// tags by id, one time, each value 0.1 after the last) as a chained
// record after another:
//
//	go test -run '^$' -bench ChainedRecord ./internal/store
func BenchmarkChainedRecord(b *testing.B) {
	first, next := livePoints(10000, 0, 1_700_000_000_000), livePoints(10000, 1, 1_700_000_000_100)
	var c chainEnc
	c.encode(first, true, packIDs)
	c.commit(first, true, wal.Chain{})
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		var rec []byte
		for b.Loop() {
			rec = c.encode(next, false, packIDs)
		}
		b.ReportMetric(float64(len(rec))/float64(len(next)), "B/point")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(next)), "ns/point")
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		var e chainEnc
		start := bytes.Clone(e.encode(first, true, packIDs))
		e.commit(first, true, wal.Chain{})
		rec := bytes.Clone(e.encode(next, false, packIDs))
		var ch walChain
		d := dataRecord{chain: &ch}
		for b.Loop() {
			if err := decodeDataRecord(start, &d); err != nil {
				b.Fatal(err)
			}
			if err := decodeDataRecord(rec, &d); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*2*len(next)), "ns/point")
	})
}

// goldenDataDirV7 is a backup written by format version 7: two days of
// runs (the first two parts of goldenDirPoints), then a WAL tail of
// chained records (goldenChainTail) whose values after the first refer to
// the ones before. PITH_UPDATE_GOLDEN=1 rewrites it while FormatVersion
// is 7; every later Pith must restore and open it unchanged.
const goldenDataDirV7 = "testdata/format/datadir-v7"

func goldenChainTail() [][]model.Point {
	base := 19_701 * dayMs
	var recs [][]model.Point
	for k := range 5 {
		recs = append(recs, []model.Point{
			{Tag: "site.pump.flow", T: base + int64(40+k)*60_000, V: 7.5 + float64(k)/4},
			{Tag: "site.tank.level", T: base + int64(10+k)*1000, V: -3.25 - float64(k)/100, Q: model.QualityBad},
		})
	}
	return recs
}

func TestGoldenDataDirV7(t *testing.T) {
	a, b, _ := goldenDirPoints()
	tail := goldenChainTail()
	if os.Getenv("PITH_UPDATE_GOLDEN") != "" {
		if FormatVersion != 7 {
			t.Fatalf("FormatVersion is %d: add a new golden folder, keep %s", FormatVersion, goldenDataDirV7)
		}
		db, err := Open(t.TempDir(), testOptions())
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, pts := range append([][]model.Point{a, b}, tail...) {
			if err := db.Write(ctx, pts); err != nil {
				t.Fatal(err)
			}
			if len(pts) > 2 {
				if err := db.Flush(); err != nil { // the tail then names its tags by id
					t.Fatal(err)
				}
			}
		}
		if err := os.RemoveAll(goldenDataDirV7); err != nil {
			t.Fatal(err)
		}
		if _, err := db.backup(ctx, goldenDataDirV7, false); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	rep, err := Verify(goldenDataDirV7)
	if err != nil || !rep.OK() || !rep.Backup {
		t.Fatalf("verify golden: %v %+v", err, rep)
	}
	dst := t.TempDir() + "/d"
	if _, err := Restore(goldenDataDirV7, dst, RestoreOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := wal.Open(filepath.Join(dst, "wal"), wal.DefaultOptions(), quietOptions(nil).Logger)
	if err != nil {
		t.Fatal(err)
	}
	deltas := 0
	if err := w.Replay(wal.Pos{}, func(_, _ wal.Pos, rec []byte) error {
		if len(rec) > 0 && rec[0] == recChained {
			deltas += countDeltas(t, rec)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// The flow's values after 7.75 (the level is named by name: the
	// series file does not hold it yet).
	if deltas != 3 {
		t.Fatalf("the golden WAL tail holds %d differences, want 3", deltas)
	}
	db, err := Open(dst, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	m := naive{}
	m.write(a)
	m.write(b)
	for _, pts := range tail {
		m.write(pts)
	}
	sameRaw(t, db, m, "site.pump.flow", "site.pump.state", "site.tank.level")
}
