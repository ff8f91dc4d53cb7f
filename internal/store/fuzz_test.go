package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// Fuzz targets for every decoder of disk bytes in this package: WAL data
// record payloads, run files (whole, and with a checksum-valid index so the
// fuzzer reaches the code behind the checksums), the deflated run index and
// the series file. They are seeded from the golden files in
// testdata/format, which TestFormatGolden also decodes, so a format change
// shows up as a failing test before it reaches a user's disk.
//
// Run one for a while with, for example:
//
//	go test -run '^$' -fuzz '^FuzzRunIndex$' -fuzztime 60s -fuzzminimizetime 5s ./internal/store

// goldenDir holds one file of each kind, written by writeGolden.
const goldenDir = "testdata/format"

// goldenPart is the day partition of the golden run: 2023-11-14 UTC.
const goldenPart = 19675

// goldenInputs returns the series of the golden run, in id order: a dense
// decimal series (tiers, several chunks, mixed qualities), a sparse one (no
// tiers), a single sample, and a constant one.
func goldenInputs() []runInput {
	t0 := int64(goldenPart) * partitionMs
	var dense runInput
	dense.id = 0
	for i := 0; i < 3000; i++ {
		dense.ts = append(dense.ts, t0+3_600_000+int64(i)*1000)
		dense.vs = append(dense.vs, math.Round(math.Sin(float64(i)/50)*10000)/100)
		q := model.QualityGood
		if i%97 == 0 {
			q = model.QualityBad
		} else if i%211 == 0 {
			q = model.QualityUncertain
		}
		dense.qs = append(dense.qs, q)
	}
	sparse := runInput{id: 2}
	for i := 0; i < 5; i++ {
		sparse.ts = append(sparse.ts, t0+int64(i)*4*3_600_000+17)
		sparse.vs = append(sparse.vs, float64(i)*1.5-3)
		sparse.qs = append(sparse.qs, model.QualityGood)
	}
	single := runInput{id: 5, ts: []int64{t0 + 43_200_000}, vs: []float64{-0.25}, qs: []model.Quality{model.QualityUncertain}}
	constant := runInput{id: 7}
	for i := 0; i < 200; i++ {
		constant.ts = append(constant.ts, t0+80_000_000+int64(i)*250)
		constant.vs = append(constant.vs, 42)
		constant.qs = append(constant.qs, model.QualityGood)
	}
	return []runInput{dense, sparse, single, constant}
}

// goldenNames are the series names of the golden series file; ids 0..5 of
// goldenInputs exist in it.
var goldenNames = []string{"plant.boiler.temp", "plant.boiler.pressure", "site.a.flow", "x", "plant.pump.1.speed", "pith.sys.points", "long." + string(bytes.Repeat([]byte("n"), 300)), "z.last"}

// goldenPoints are the points of the golden WAL data record.
var goldenPoints = []model.Point{
	{Tag: "plant.boiler.temp", T: 1_700_000_000_000, V: 81.25, Q: model.QualityGood},
	{Tag: "plant.boiler.pressure", T: 1_700_000_000_000, V: 1.013, Q: model.QualityGood},
	{Tag: "plant.boiler.temp", T: 1_700_000_001_000, V: 81.5, Q: model.QualityUncertain},
	{Tag: "plant.boiler.temp", T: 1_699_999_000_000, V: -4e-300, Q: model.QualityBad}, // late
	{Tag: "site.a.flow", T: -5, V: 0, Q: model.QualityGood},                           // before 1970
	{Tag: "plant.boiler.pressure", T: 1_700_000_000_000, V: math.MaxFloat64, Q: model.QualityGood},
}

// writeGoldenRun writes the golden run into dir and returns its bytes.
func writeGoldenRun(t testing.TB, dir string) []byte {
	t.Helper()
	rw, err := createRun(vfs.OS{}, dir, goldenPart, 42, false)
	if err != nil {
		t.Fatal(err)
	}
	in := goldenInputs()
	for i := range in {
		rw.add(&in[i], false)
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

// goldenSeriesFile returns the bytes of the golden series file.
func goldenSeriesFile(t testing.TB) []byte {
	t.Helper()
	s := newSeriesTable()
	for _, n := range goldenNames {
		s.getOrCreateLocked([]byte(n))
	}
	dir := t.TempDir()
	if err := s.save(vfs.OS{}, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "series.dat"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goldenLabelledSeriesFile is a version 2 series file: the golden names,
// two of them with labels.
func goldenLabelledSeriesFile(t testing.TB) []byte {
	t.Helper()
	s := newSeriesTable()
	for _, n := range goldenNames {
		s.getOrCreateLocked([]byte(n))
	}
	for i, x := range labelsSeeds() {
		s.setLabelsLocked(uint32(i), x.Labels)
	}
	dir := t.TempDir()
	if err := s.save(vfs.OS{}, dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "series.dat"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func goldenRecord() []byte {
	return appendDataRecord(nil, txnAuto, goldenPoints, make(map[string]int), nil)
}

// readGolden returns a golden file; PITH_UPDATE_GOLDEN=1 rewrites them from
// the current writers first.
func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if os.Getenv("PITH_UPDATE_GOLDEN") == "1" {
		var b []byte
		switch name {
		case "run.bin":
			b = writeGoldenRun(t, t.TempDir())
		case "series.dat":
			b = goldenSeriesFile(t)
		case "record.bin":
			b = goldenRecord()
		case "series_labels.dat":
			b = goldenLabelledSeriesFile(t)
		case "labels_record.bin":
			b = appendLabelsRecord(nil, labelsSeeds())
		case "text_record.bin":
			b = goldenTextRecord()
		case "text_run.bin":
			b = writeGoldenTextRun(t, t.TempDir())
		case "packed_record.bin":
			b = goldenPackedRecord()
		case "chained_record.bin":
			g := goldenChainedRecords()
			b = append(bytes.Clone(g[0]), g[1]...)
		}
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (PITH_UPDATE_GOLDEN=1 go test -run TestFormatGolden ./internal/store writes it): %v", err)
	}
	return b
}

// openRunBytes opens b as a run file. It goes through an in-memory
// vfs.FaultFS, so fuzzing pays no disk I/O; the parsing is the same as for
// a memory-mapped file.
func openRunBytes(t testing.TB, b []byte) (*runFile, error) {
	t.Helper()
	fs := vfs.NewFaultFS()
	path := "/" + runFileName(goldenPart, 42)
	f, err := vfs.Create(fs, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return openRun(fs, path)
}

// decodeRun decodes every chunk and tier of an open run; it returns the
// samples of each series by id, and the number of damaged blocks met.
func decodeRun(r *runFile) (map[uint32]*runInput, int) {
	out := make(map[uint32]*runInput)
	bad := 0
	ss := r.index()
	for i := range ss {
		s := &ss[i]
		in := &runInput{id: s.id}
		var d decodedChunk
		for j := range s.chunks {
			if err := r.decodeChunk(&s.chunks[j], &d); err != nil {
				bad++
				continue
			}
			if s.fine == fineText {
				in.xs = append(in.xs, d.xs...)
			}
			in.ts = append(in.ts, d.ts...)
			in.vs = append(in.vs, d.vs...)
			for _, q := range d.qs {
				in.qs = append(in.qs, model.Quality(q))
			}
		}
		if s.fine != noTier && s.fine != fineText {
			for l := int(s.fine); l < numTiers; l++ {
				if _, err := r.decodeTier(s, l); err != nil {
					bad++
				}
			}
		}
		out[s.id] = in
	}
	return out, bad
}

// TestFormatGolden decodes the golden files with today's readers and checks
// they hold exactly what the generators put in, so an incompatible format
// change fails here. The WAL record and the series file must also still be
// written byte for byte the same (the run file is deflated, whose exact
// bytes may change with the Go release, so only its content is compared).
func TestFormatGolden(t *testing.T) {
	t.Run("run", func(t *testing.T) {
		r, err := openRunBytes(t, readGolden(t, "run.bin"))
		if err != nil {
			t.Fatal(err)
		}
		defer r.close()
		if r.part != goldenPart || r.seq != 42 {
			t.Fatalf("part %d seq %d, want %d 42", r.part, r.seq, goldenPart)
		}
		got, bad := decodeRun(r)
		if bad != 0 {
			t.Fatalf("%d damaged blocks in the golden run", bad)
		}
		want := goldenInputs()
		if len(got) != len(want) {
			t.Fatalf("%d series, want %d", len(got), len(want))
		}
		for _, w := range want {
			g := got[w.id]
			if g == nil || len(g.ts) != len(w.ts) {
				t.Fatalf("series %d: got %v samples, want %d", w.id, g, len(w.ts))
			}
			for i := range w.ts {
				if g.ts[i] != w.ts[i] || math.Float64bits(g.vs[i]) != math.Float64bits(w.vs[i]) || g.qs[i] != w.qs[i] {
					t.Fatalf("series %d sample %d: got (%d %v %v) want (%d %v %v)", w.id, i, g.ts[i], g.vs[i], g.qs[i], w.ts[i], w.vs[i], w.qs[i])
				}
			}
			rs := r.find(w.id)
			n := len(w.ts)
			if rs.n != int64(n) || rs.minT != w.ts[0] || rs.maxT != w.ts[n-1] || rs.lastV != w.vs[n-1] || rs.lastQ != w.qs[n-1] {
				t.Fatalf("series %d index entry %+v does not match its samples", w.id, rs)
			}
			// Every tier must agree with the samples it summarises.
			if rs.fine == noTier {
				continue
			}
			tiers := buildTiers(rs.fine, w.ts, w.vs)
			for l := int(rs.fine); l < numTiers; l++ {
				cells, err := r.decodeTier(rs, l)
				if err != nil {
					t.Fatal(err)
				}
				if len(cells) != len(tiers[l]) {
					t.Fatalf("series %d tier %d: %d cells, want %d", w.id, l, len(cells), len(tiers[l]))
				}
				for i := range cells {
					if cells[i].start != tiers[l][i].start || cells[i].n != tiers[l][i].n || cells[i].sum != tiers[l][i].sum {
						t.Fatalf("series %d tier %d cell %d: got %+v want %+v", w.id, l, i, cells[i], tiers[l][i])
					}
				}
			}
		}
	})
	t.Run("series", func(t *testing.T) {
		b := readGolden(t, "series.dat")
		if !bytes.Equal(b, goldenSeriesFile(t)) {
			t.Fatal("the series file writer no longer writes the golden bytes")
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "series.dat"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := loadSeries(vfs.OS{}, dir, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.names) != len(goldenNames) {
			t.Fatalf("%d names, want %d", len(s.names), len(goldenNames))
		}
		for i, n := range goldenNames {
			if s.names[i] != n || s.byName[n] != uint32(i) {
				t.Fatalf("name %d: got %q want %q", i, s.names[i], n)
			}
		}
	})
	t.Run("series with labels", func(t *testing.T) {
		b := readGolden(t, "series_labels.dat")
		if !bytes.Equal(b, goldenLabelledSeriesFile(t)) {
			t.Fatal("the series file writer no longer writes the golden bytes of version 2")
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "series.dat"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := loadSeries(vfs.OS{}, dir, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range labelsSeeds() {
			if !s.labels[i].Equal(x.Labels) {
				t.Fatalf("labels of series %d: got %v want %v", i, s.labels[i], x.Labels)
			}
		}
		if len(s.names) != len(goldenNames) || s.labels[len(s.names)-1] != nil {
			t.Fatalf("%d names, last labels %v", len(s.names), s.labels[len(s.names)-1])
		}
	})
	t.Run("labels record", func(t *testing.T) {
		b := readGolden(t, "labels_record.bin")
		if !bytes.Equal(b, appendLabelsRecord(nil, labelsSeeds())) {
			t.Fatal("the labels record writer no longer writes the golden bytes")
		}
		series, err := decodeLabelsRecord(b)
		if err != nil || len(series) != len(labelsSeeds()) {
			t.Fatalf("decode: %v, %d series", err, len(series))
		}
		for i, x := range labelsSeeds() {
			if series[i].Tag != x.Tag || !series[i].Labels.Equal(x.Labels) {
				t.Fatalf("series %d: got %+v want %+v", i, series[i], x)
			}
		}
	})
	t.Run("record", func(t *testing.T) {
		b := readGolden(t, "record.bin")
		if !bytes.Equal(b, goldenRecord()) {
			// Old WAL segments must still replay after an upgrade: a new
			// encoding needs a new record type (and a new golden file), and
			// record.bin must keep decoding as it did.
			t.Fatal("the data record encoder no longer writes the golden bytes (see the comment: keep old records readable)")
		}
		got, err := decodeAllPoints(b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(goldenPoints) {
			t.Fatalf("%d points, want %d", len(got), len(goldenPoints))
		}
		for i := range got {
			if got[i] != goldenPoints[i] {
				t.Fatalf("point %d: got %+v want %+v", i, got[i], goldenPoints[i])
			}
		}
	})
}

// decodeAllPoints decodes a data record into points. A point keyed by a
// series id rather than a name in the record gets the tag "#id".
func decodeAllPoints(rec []byte) ([]model.Point, error) {
	var d dataRecord
	if err := decodeDataRecord(rec, &d); err != nil {
		return nil, err
	}
	var out []model.Point
	for i := 0; i < d.n; i++ {
		k, t, v, q, err := d.next()
		if err != nil {
			return out, err
		}
		tag := fmt.Sprintf("#%d", k-len(d.names))
		if k < len(d.names) {
			tag = string(d.names[k])
		}
		out = append(out, model.Point{Tag: tag, T: t, V: v, Q: q})
	}
	return out, nil
}

// FuzzDataRecord feeds WAL record payloads to decodeDataRecord and next.
// Whatever decodes must encode again to a record that decodes the same.
func FuzzDataRecord(f *testing.F) {
	f.Add(readGolden(f, "record.bin"))
	f.Add(appendDataRecord(nil, txnAuto, goldenPoints[:1], make(map[string]int), nil))
	f.Add(appendDataRecord(nil, 7, nil, make(map[string]int), nil))
	f.Add([]byte{recData})
	f.Fuzz(func(t *testing.T, rec []byte) {
		pts, err := decodeAllPoints(rec)
		if err != nil {
			return
		}
		for _, p := range pts {
			if model.CheckValue(p.V) != nil || p.Q > model.QualityUncertain {
				t.Fatalf("decoded an invalid point %+v", p)
			}
			if strings.HasPrefix(p.Tag, "#") {
				return // keyed by series id: re-encoding by name would differ
			}
		}
		again, err := decodeAllPoints(appendDataRecord(nil, txnAuto, pts, make(map[string]int), nil))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if len(again) != len(pts) {
			t.Fatalf("re-encoded record holds %d points, want %d", len(again), len(pts))
		}
		for i := range pts {
			if again[i] != pts[i] {
				t.Fatalf("point %d: %+v became %+v", i, pts[i], again[i])
			}
		}
	})
}

// FuzzRunFile opens mutated run files and decodes every block: it must
// never panic, and whatever opens must decode or report damage.
func FuzzRunFile(f *testing.F) {
	golden := readGolden(f, "run.bin")
	f.Add(golden)
	f.Add(golden[:len(golden)-1])
	f.Add(golden[:runHeaderSize+2*runFooterSize])
	flipped := bytes.Clone(golden)
	flipped[len(flipped)-runFooterSize-1] ^= 0x40
	f.Add(flipped)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := openRunBytes(t, b)
		if err != nil {
			return
		}
		defer r.close()
		decodeRun(r)
	})
}

// splitGoldenRun returns the block region of the golden run (header, chunk
// and tier blocks) and its raw, inflated index.
func splitGoldenRun(t testing.TB, golden []byte) (blocks, raw []byte) {
	t.Helper()
	foot := golden[len(golden)-runFooterSize:]
	off := binary.LittleEndian.Uint64(foot[0:])
	ln := binary.LittleEndian.Uint32(foot[8:])
	raw, err := inflateIndex(golden[off : off+uint64(ln)])
	if err != nil {
		t.Fatal(err)
	}
	return golden[:off], raw
}

// buildRun assembles a run file from a block region and a raw index the way
// runWriter.finish does: the deflated index twice, then two footers.
func buildRun(blocks, raw []byte) []byte {
	idx := compressIndex(raw)
	out := bytes.Clone(blocks)
	off1 := len(out)
	out = append(out, idx...)
	off2 := len(out)
	out = append(out, idx...)
	foot := binary.LittleEndian.AppendUint64(nil, uint64(off1))
	foot = binary.LittleEndian.AppendUint32(foot, uint32(len(idx)))
	foot = binary.LittleEndian.AppendUint32(foot, crc32c.Checksum(idx))
	foot = binary.LittleEndian.AppendUint64(foot, uint64(off2))
	foot = binary.LittleEndian.AppendUint32(foot, crc32c.Checksum(foot))
	foot = append(foot, runFooterMagic...)
	out = append(out, foot...)
	return append(out, foot...)
}

// FuzzRunIndex mutates the raw index of the golden run and rebuilds a file
// whose index checksums are valid, so that the fuzzer reaches parseIndex
// and the block decoders with bad offsets, lengths and counts, as a writer
// bug would leave them. Opening may fail; nothing may panic.
func FuzzRunIndex(f *testing.F) {
	blocks, raw := splitGoldenRun(f, readGolden(f, "run.bin"))
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, idx []byte) {
		r, err := openRunBytes(t, buildRun(blocks, idx))
		if err != nil {
			return
		}
		defer r.close()
		decodeRun(r)
	})
}

// FuzzInflateIndex feeds bytes to inflateIndex and what inflates to
// parseIndex against a run of the golden run's size.
func FuzzInflateIndex(f *testing.F) {
	golden := readGolden(f, "run.bin")
	foot := golden[len(golden)-runFooterSize:]
	off := binary.LittleEndian.Uint64(foot[0:])
	ln := binary.LittleEndian.Uint32(foot[8:])
	f.Add(golden[off : off+uint64(ln)])
	f.Add(compressIndex(nil))
	f.Fuzz(func(t *testing.T, idx []byte) {
		raw, err := inflateIndex(idx)
		if err != nil {
			return
		}
		r := &runFile{path: "fuzz.run", size: int64(len(golden))}
		if err := r.parseIndex(raw); err != nil {
			return
		}
		for i := range r.parsed {
			s := &r.parsed[i]
			for _, c := range s.chunks {
				if int64(c.off)+int64(c.len) > r.size {
					t.Fatalf("series %d: chunk %+v past the end of the run", s.id, c)
				}
			}
		}
	})
}

// FuzzSeriesFile loads series files. With fixCRC the fuzzed bytes get a
// valid checksum appended, so the fuzzer reaches the name parser.
func FuzzSeriesFile(f *testing.F) {
	golden := readGolden(f, "series.dat")
	f.Add(false, golden)
	f.Add(true, golden[:len(golden)-4])
	f.Add(true, []byte(seriesFileMagic))
	// A version 2 file: names with labels.
	v2 := readGolden(f, "series_labels.dat")
	f.Add(false, v2)
	f.Add(true, v2[:len(v2)-4])
	f.Fuzz(func(t *testing.T, fixCRC bool, b []byte) {
		if fixCRC {
			b = binary.LittleEndian.AppendUint32(bytes.Clone(b), crc32c.Checksum(b))
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "series.dat"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := loadSeries(vfs.OS{}, dir, slog.New(slog.DiscardHandler))
		if err != nil {
			return
		}
		if len(s.byName) > len(s.names) {
			t.Fatalf("%d names but %d map entries", len(s.names), len(s.byName))
		}
		for i, n := range s.names {
			if id := s.byName[n]; int(id) > i {
				t.Fatalf("name %q maps to id %d, after its first use %d", n, id, i)
			}
		}
	})
}

// encodeIndex writes a raw run index for series, in the layout of
// runWriter.add and finish; firstOff gives each series' first block
// offset. Tests use it to build checksum-valid indexes with bad values.
func encodeIndex(part int64, seq uint64, series []runSeries, firstOff []int64) []byte {
	x := binary.AppendVarint(nil, part)
	x = binary.AppendUvarint(x, seq)
	x = binary.AppendUvarint(x, uint64(len(series)))
	for i := range series {
		s := &series[i]
		x = binary.AppendUvarint(x, uint64(s.id))
		x = binary.AppendUvarint(x, uint64(s.n))
		x = binary.AppendVarint(x, s.minT)
		x = binary.AppendVarint(x, s.maxT)
		x = appendF64(x, s.lastV)
		x = append(x, byte(s.lastQ), s.fine)
		x = appendF64(x, s.sum)
		x = appendF64(x, s.min)
		x = appendF64(x, s.max)
		x = appendF64(x, s.first)
		x = binary.AppendUvarint(x, uint64(len(s.chunks)))
		x = binary.AppendUvarint(x, uint64(firstOff[i]))
		prevEnd := s.minT
		for _, c := range s.chunks {
			x = binary.AppendVarint(x, c.minT-prevEnd)
			x = binary.AppendVarint(x, c.maxT-c.minT)
			x = binary.AppendUvarint(x, uint64(c.n))
			x = binary.AppendUvarint(x, uint64(c.len))
			prevEnd = c.maxT
		}
		if s.fine != noTier && s.fine != fineText {
			for l := int(s.fine); l < numTiers; l++ {
				x = binary.AppendUvarint(x, uint64(s.tier(l).n))
				x = binary.AppendUvarint(x, uint64(s.tier(l).len))
			}
		}
	}
	return x
}

// goldenIndex opens the golden run and returns its blocks, parsed series
// and each series' first block offset.
func goldenIndex(t *testing.T) ([]byte, []runSeries, []int64) {
	t.Helper()
	golden := readGolden(t, "run.bin")
	blocks, _ := splitGoldenRun(t, golden)
	r, err := openRunBytes(t, golden)
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	series := append([]runSeries(nil), r.index()...)
	offs := make([]int64, len(series))
	for i, s := range series {
		if len(s.chunks) > 0 {
			offs[i] = int64(s.chunks[0].off)
		} else {
			offs[i] = int64(s.tier(int(s.fine)).off)
		}
	}
	return blocks, series, offs
}

func TestEncodeIndexMatchesWriter(t *testing.T) {
	golden := readGolden(t, "run.bin")
	blocks, series, offs := goldenIndex(t)
	_, raw := splitGoldenRun(t, golden)
	if got := encodeIndex(goldenPart, 42, series, offs); !bytes.Equal(got, raw) {
		t.Fatal("encodeIndex does not reproduce the golden index: the test's naive of the format is out of date")
	}
	if r, err := openRunBytes(t, buildRun(blocks, raw)); err != nil {
		t.Fatal(err)
	} else {
		r.close()
	}
}

// TestRunIndexNegativeOffset: a checksum-valid index whose first block
// offset is a huge uvarint (negative as int64) passes parseIndex's range
// check, because only the running end offset is checked; the chunk then
// points outside the file and decoding it must not panic.
func TestRunIndexNegativeOffset(t *testing.T) {
	blocks, series, offs := goldenIndex(t)
	// A first offset of -100 with a first chunk of 200 bytes ends at 100,
	// inside the file.
	offs[0] = -100
	series[0].chunks = append([]chunkRef(nil), series[0].chunks...)
	series[0].chunks[0].len = 200
	r, err := openRunBytes(t, buildRun(blocks, encodeIndex(goldenPart, 42, series, offs)))
	if err != nil {
		return // rejected at open: fine
	}
	defer r.close()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("decoding a run whose index has a negative block offset panics: %v", p)
		}
	}()
	decodeRun(r)
}

// TestRunIndexTierCountBounded: a day holds at most partitionMs/width
// cells of a tier, but parseIndex accepts any count up to the series'
// sample count (itself unchecked), and decodeTier allocates that many
// cells before decoding: a damaged count may ask for gigabytes.
func TestRunIndexTierCountBounded(t *testing.T) {
	blocks, series, offs := goldenIndex(t)
	s := &series[0]
	if s.fine == noTier {
		t.Fatal("golden series 0 has no tiers")
	}
	s.n = 1 << 40
	s.tiers = append([]tierRef(nil), s.tiers...)
	s.tier(int(s.fine)).n = 1 << 30
	r, err := openRunBytes(t, buildRun(blocks, encodeIndex(goldenPart, 42, series, offs)))
	if err != nil {
		return
	}
	r.close()
	t.Fatalf("a tier of %d cells was accepted; a day holds at most %d cells of width %d ms", 1<<30, partitionMs/tierWidth[s.fine], tierWidth[s.fine])
}

// TestInflateIndexBounded: inflateIndex allocates the length the index
// claims (up to 1 GiB) before inflating, so a damaged or crafted length
// costs that much memory even when the deflated data is a few bytes.
func TestInflateIndexBounded(t *testing.T) {
	idx := binary.AppendUvarint(nil, 1<<30)
	idx = append(idx, compressIndex(nil)[1:]...)
	var ms1, ms2 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	_, err := inflateIndex(idx)
	runtime.ReadMemStats(&ms2)
	if err == nil {
		t.Fatal("a 1 GiB claimed length over an empty stream inflated without error")
	}
	if grew := ms2.TotalAlloc - ms1.TotalAlloc; grew > 64<<20 {
		t.Fatalf("inflating a %d-byte index allocated %d MiB: the claimed length should be checked against what inflates", len(idx), grew>>20)
	}
}

// labelsSeeds are the label sets the labels fuzz targets start from.
func labelsSeeds() []model.Series {
	return []model.Series{
		{Tag: "up.127_0_0_1:9100.node", Labels: model.LabelsFrom("__name__", "up", "instance", "127.0.0.1:9100", "job", "node")},
		{Tag: "cpu.pi3.idle", Labels: model.LabelsFrom("_measurement", "cpu", "_field", "idle", "host", "pi3")},
	}
}

// FuzzLabelsRecord decodes WAL labels records: an error or series whose
// labels pass model.Labels.Check, and which survive encoding and decoding
// again (the bytes may differ: a uvarint has several spellings).
//
//	go test -run '^$' -fuzz FuzzLabelsRecord ./internal/store/
func FuzzLabelsRecord(f *testing.F) {
	rec := readGolden(f, "labels_record.bin")
	f.Add(rec)
	f.Add(rec[:len(rec)/2])
	f.Add(appendLabelsRecord(nil, []model.Series{{Tag: "x"}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		series, err := decodeLabelsRecord(b)
		if err != nil {
			return
		}
		for _, x := range series {
			if err := x.Labels.Check(); err != nil {
				t.Fatalf("decoded labels of %q fail the check: %v", x.Tag, err)
			}
		}
		again, err := decodeLabelsRecord(appendLabelsRecord(nil, series))
		if err != nil || len(again) != len(series) {
			t.Fatalf("re-encoded record: %v, %d series, want %d", err, len(again), len(series))
		}
		for i := range series {
			if again[i].Tag != series[i].Tag || !again[i].Labels.Equal(series[i].Labels) {
				t.Fatalf("series %d: %+v after a round trip, want %+v", i, again[i], series[i])
			}
		}
	})
}
