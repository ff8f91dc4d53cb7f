package bench

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// GenerateDatasets writes plant.csv and feed.csv into dir with the shapes
// of the standard datasets (docs/bench.md), scaled by frac (1 for the full sets,
// 0.1 for `pith bench --quick`). The plant keeps its 100 tags and its day
// and stretches the sample interval by 1/frac (10 s at a tenth), so that
// Q4-Q6 keep their meaning; the feed keeps its 10 s interval and is cut to
// frac of its rows. The random draws differ from those of the full-size
// datasets' generator, so the files are alike in shape, not identical; the reference answers
// are computed from whatever files are given.
func GenerateDatasets(dir string, frac float64) error {
	if !(frac > 0 && frac <= 1) {
		return fmt.Errorf("generate datasets: fraction %v must be in (0, 1]", frac)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("generate datasets: %w", err)
	}
	if err := writeCSV(filepath.Join(dir, "plant.csv"), func(w *bufio.Writer) { genPlant(w, frac) }); err != nil {
		return err
	}
	return writeCSV(filepath.Join(dir, "feed.csv"), func(w *bufio.Writer) { genFeed(w, frac) })
}

func writeCSV(path string, gen func(*bufio.Writer)) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("generate dataset: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	gen(w)
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func row(w *bufio.Writer, buf []byte, name string, ms int64, v float64, prec int) []byte {
	buf = append(buf[:0], name...)
	buf = append(buf, ',')
	buf = strconv.AppendInt(buf, ms, 10)
	buf = append(buf, ',')
	buf = strconv.AppendFloat(buf, v, 'f', prec, 64)
	buf = append(buf, '\n')
	w.Write(buf)
	return buf
}

type plantTag struct {
	kind       byte // a analog, c counter, d digital, s setpoint, r register
	name       string
	a, b, c, d float64
}

func genPlant(w *bufio.Writer, frac float64) {
	rnd := rand.New(rand.NewPCG(907055, 1))
	uni := func(lo, hi float64) float64 { return lo + (hi-lo)*rnd.Float64() }
	var tags []plantTag
	for i := range 100 {
		switch {
		case i < 40:
			tags = append(tags, plantTag{'a', fmt.Sprintf("plant.ai%02d", i), uni(10, 500), uni(1, 50), uni(300, 7200), uni(0.01, 0.5)})
		case i < 60:
			tags = append(tags, plantTag{'c', fmt.Sprintf("plant.kwh%02d", i-40), uni(1e3, 1e6), uni(0, 0.05), 0, 0})
		case i < 80:
			tags = append(tags, plantTag{'d', fmt.Sprintf("plant.di%02d", i-60), 0, 1.0 / 60, 0, 0})
		case i < 90:
			tags = append(tags, plantTag{'s', fmt.Sprintf("plant.sp%02d", i-80), math.Round(uni(20, 80)*10) / 10, 1.0 / 3600, 0, 0})
		default:
			tags = append(tags, plantTag{'r', fmt.Sprintf("plant.hr%02d", i-90), float64(i - 90), 0, 0, 0})
		}
	}
	state := make([]float64, len(tags))
	for k, t := range tags {
		state[k] = t.a
	}
	step := max(int(math.Round(1/frac)), 1)
	var buf []byte
	for s := 0; s < 86400; s += step {
		ms := (benchT0/1000 + int64(s)) * 1000
		for k, t := range tags {
			var v float64
			prec := 0
			switch t.kind {
			case 'a':
				v, prec = math.Round((t.a+t.b*math.Sin(2*math.Pi*float64(s)/t.c)+rnd.NormFloat64()*t.d)*100)/100, 2
			case 'c':
				state[k] += uni(0, t.b*float64(step))
				v, prec = math.Round(state[k]*1000)/1000, 3
			case 'd':
				if rnd.Float64() < t.b*float64(step) {
					state[k] = 1 - state[k]
				}
				v = state[k]
			case 's':
				if rnd.Float64() < t.b*float64(step) {
					state[k] = math.Round((state[k]+float64(5-10*rnd.IntN(2)))*10) / 10
				}
				v, prec = state[k], 1
			default:
				v = float64(int(1000*(s%60)+int(t.a)) % 65536)
			}
			buf = row(w, buf, t.name, ms, v, prec)
		}
	}
}

func genFeed(w *bufio.Writer, frac float64) {
	rnd := rand.New(rand.NewPCG(2600, 1))
	n := int(9_000_000 * frac)
	spike := 0
	var buf []byte
	for i := range n {
		t := benchT0/1000 + 10*int64(i)
		hour := float64(t%86400) / 3600
		sn := math.Sin(2 * math.Pi * (hour - 7) / 24)
		base := 180 + 120*sn*sn
		if spike > 0 {
			spike--
		} else if rnd.Float64() < 0.004 {
			spike = 3 + rnd.IntN(58)
		}
		extra := 0.0
		if spike > 0 {
			extra = 2000
		}
		v := math.Trunc(base + extra + rnd.NormFloat64()*15)
		buf = row(w, buf, "power", t*1000, max(v, 0), 0)
	}
}
