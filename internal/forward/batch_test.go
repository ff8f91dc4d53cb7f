package forward

import (
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

var update = flag.Bool("update", false, "rewrite the golden batch files in testdata")

// goldenBatches are the cases of testdata/batch; the file is the encoding.
var goldenBatches = []struct {
	name string
	enq  int64
	pts  []model.Point
}{
	{"empty", 1_700_000_000_000, nil},
	{"one", 1_700_000_000_000, []model.Point{{Tag: "plant.boiler.temp", T: 1_700_000_000_000, V: 81.5}}},
	{"mixed", 1_700_000_001_000, []model.Point{
		{Tag: "a", T: 1_700_000_000_000, V: 1, Q: model.QualityGood},
		{Tag: "b", T: 1_700_000_000_000, V: -2.25, Q: model.QualityBad},
		{Tag: "a", T: 1_700_000_001_000, V: math.MaxFloat64, Q: model.QualityUncertain},
		{Tag: "a", T: 1_699_999_999_000, V: 0}, // out of order: a negative delta
	}},
}

func TestBatchGolden(t *testing.T) {
	for _, c := range goldenBatches {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join("testdata", "batch", c.name+".bin")
			got := EncodeBatch(c.enq, c.pts)
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("encoding = %x, want %x", got, want)
			}
			enq, pts, err := DecodeBatch(nil, want)
			if err != nil {
				t.Fatal(err)
			}
			if enq != c.enq || !slices.Equal(pts, c.pts) {
				t.Errorf("decoded %d %v, want %d %v", enq, pts, c.enq, c.pts)
			}
		})
	}
}

func TestDecodeBatchErrors(t *testing.T) {
	good := EncodeBatch(1, points(0, 10))
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"version", append([]byte{9}, good[1:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(slices.Clone(good), 0)},
		{"header only", good[:batchHeaderSize]},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := DecodeBatch(nil, c.b); !errors.Is(err, ErrBadBatch) {
				t.Errorf("err = %v, want ErrBadBatch", err)
			}
		})
	}
}

// FuzzDecodeBatch checks that no input panics and that whatever decodes
// encodes back to the same points.
func FuzzDecodeBatch(f *testing.F) {
	for _, c := range goldenBatches {
		b, err := os.ReadFile(filepath.Join("testdata", "batch", c.name+".bin"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		enq, pts, err := DecodeBatch(nil, b)
		if err != nil {
			return
		}
		_, again, err := DecodeBatch(nil, EncodeBatch(enq, pts))
		if err != nil {
			t.Fatal(err)
		}
		for i := range pts {
			// Compare bits: NaN values are carried as they are.
			if pts[i].Tag != again[i].Tag || pts[i].T != again[i].T ||
				math.Float64bits(pts[i].V) != math.Float64bits(again[i].V) || pts[i].Q != again[i].Q {
				t.Fatalf("point %d: %+v re-encoded as %+v", i, pts[i], again[i])
			}
		}
	})
}

// benchPoints is a batch of 10,000 points over 100 tags, 1 s apart.
func benchPoints() []model.Point {
	pts := make([]model.Point, 10000)
	for i := range pts {
		pts[i] = model.Point{Tag: "plant.area" + string(rune('a'+i%100/10)) + ".tag" + string(rune('0'+i%10)), T: 1_700_000_000_000 + int64(i/100)*1000, V: float64(i) * 0.1}
	}
	return pts
}

// BenchmarkEncodeBatch: go test -run x -bench Batch ./internal/forward/
func BenchmarkEncodeBatch(b *testing.B) {
	pts := benchPoints()
	tags, buf := map[string]uint64{}, []byte(nil)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendBatch(buf[:0], 1, pts, tags, nil)
	}
	b.ReportMetric(float64(len(buf))/float64(len(pts)), "B/point")
	b.ReportMetric(float64(b.N)*float64(len(pts))/b.Elapsed().Seconds(), "points/s")
}

func BenchmarkDecodeBatch(b *testing.B) {
	pts := benchPoints()
	enc := EncodeBatch(1, pts)
	var out []model.Point
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		var err error
		if _, out, err = DecodeBatch(out[:0], enc); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*float64(len(pts))/b.Elapsed().Seconds(), "points/s")
}
