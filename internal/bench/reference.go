package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// The standard queries of docs/bench.md, over the standard datasets: T0 is
// their first timestamp.
const (
	benchT0   = int64(1_700_000_000_000)
	benchHour = int64(3_600_000)
)

// benchQuery is one standard query and its exact answer.
type benchQuery struct {
	Name  string
	Path  string // the HTTP request
	Check func(body []byte) error
}

// reference holds exact answers computed by scanning the CSV files, so that
// any dataset directory, generated or given, is checked against itself.
type reference struct {
	q4N           int
	q4Sum         float64
	q4MaxTS       int64
	q5N           int
	q5Sum         float64
	feedN, plantN int
	plantTags     int
	plantNames    []string
}

// bucketMeans computes the mean per bucket of samples, with the bucket
// edges of GET /api/v1/data.
type bucketMeans struct {
	from, to int64
	n        int
	sum      []float64
	cnt      []int
}

func newBucketMeans(from, to int64, n int) *bucketMeans {
	return &bucketMeans{from: from, to: to, n: n, sum: make([]float64, n), cnt: make([]int, n)}
}

func (b *bucketMeans) add(t int64, v float64) {
	if t < b.from || t >= b.to {
		return
	}
	w := float64(b.to-b.from) / float64(b.n)
	i := int(float64(t-b.from) / w)
	if i >= b.n {
		i = b.n - 1
	}
	b.sum[i] += v
	b.cnt[i]++
}

func (b *bucketMeans) summary() (nonnull int, sum float64) {
	for i := range b.sum {
		if b.cnt[i] > 0 {
			nonnull++
			sum += b.sum[i] / float64(b.cnt[i])
		}
	}
	return
}

// scanCSV calls fn for each row of a dataset file.
func scanCSV(path string, fn func(tag []byte, t int64, v float64)) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(bufio.NewReaderSize(f, 1<<20))
	n := 0
	for sc.Scan() {
		line := sc.Bytes()
		a := bytes.IndexByte(line, ',')
		b := bytes.LastIndexByte(line, ',')
		if a < 0 || b <= a {
			return n, fmt.Errorf("%s line %d: not tag,ms,value", path, n+1)
		}
		t, err1 := strconv.ParseInt(string(line[a+1:b]), 10, 64)
		v, err2 := strconv.ParseFloat(string(line[b+1:]), 64)
		if err1 != nil || err2 != nil {
			return n, fmt.Errorf("%s line %d: bad number", path, n+1)
		}
		fn(line[:a], t, v)
		n++
	}
	return n, sc.Err()
}

// computeReference scans both datasets once.
func computeReference(dir string) (*reference, [3]*bucketMeans, *hourly, error) {
	var bms [3]*bucketMeans
	bms[0] = newBucketMeans(benchT0, benchT0+5*benchHour, 1000)
	bms[1] = newBucketMeans(benchT0, benchT0+2600*benchHour, 1000)
	bms[2] = newBucketMeans(benchT0, benchT0+90_000_000_000, 1000)
	r := &reference{}
	n, err := scanCSV(filepath.Join(dir, "feed.csv"), func(_ []byte, t int64, v float64) {
		for _, b := range bms {
			b.add(t, v)
		}
	})
	if err != nil {
		return nil, bms, nil, err
	}
	r.feedN = n
	latest := map[string][2]float64{}
	h := newHourly()
	n, err = scanCSV(filepath.Join(dir, "plant.csv"), func(tag []byte, t int64, v float64) {
		latest[string(tag)] = [2]float64{float64(t), v}
		if string(tag) == "plant.ai00" {
			if t >= benchT0+12*benchHour && t < benchT0+13*benchHour {
				r.q5N++
				r.q5Sum += v
			}
			h.add(t, v)
		}
	})
	if err != nil {
		return nil, bms, nil, err
	}
	r.plantN = n
	r.plantTags = len(latest)
	for tag := range latest {
		r.plantNames = append(r.plantNames, tag)
	}
	sort.Strings(r.plantNames)
	r.q4N = len(latest)
	for _, tv := range latest {
		r.q4Sum += tv[1]
		if int64(tv[0]) > r.q4MaxTS {
			r.q4MaxTS = int64(tv[0])
		}
	}
	return r, bms, h, nil
}

// hourly is Q6's reference: min, max and mean of plant.ai00 per hour.
type hourly struct {
	min, max, sum []float64
	cnt           []int
}

func newHourly() *hourly {
	h := &hourly{min: make([]float64, 24), max: make([]float64, 24), sum: make([]float64, 24), cnt: make([]int, 24)}
	for i := range h.min {
		h.min[i], h.max[i] = math.Inf(1), math.Inf(-1)
	}
	return h
}

func (h *hourly) add(t int64, v float64) {
	i := int((t - benchT0) / benchHour)
	if i < 0 || i >= 24 {
		return
	}
	h.min[i] = math.Min(h.min[i], v)
	h.max[i] = math.Max(h.max[i], v)
	h.sum[i] += v
	h.cnt[i]++
}

func (h *hourly) sums() (mn, mx, mean float64) {
	for i := range h.cnt {
		if h.cnt[i] > 0 {
			mn += h.min[i]
			mx += h.max[i]
			mean += h.sum[i] / float64(h.cnt[i])
		}
	}
	return
}

// near is the benchmark's answer check: a relative 1e-9.
func near(got, want float64) bool {
	if got == want {
		return true
	}
	return math.Abs(got-want) <= 1e-9*math.Max(math.Abs(got), math.Abs(want))
}
