package store

import (
	"math/rand"
	"sort"
	"testing"
)

// TestSearchTimes checks the interpolating search against sort.Search on
// even, uneven and repeated times, for targets inside and outside.
func TestSearchTimes(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 2000; round++ {
		n := rng.Intn(40)
		ts := make([]int64, n)
		var x int64 = rng.Int63n(1000) - 500
		for i := range ts {
			switch rng.Intn(3) {
			case 0:
				x += 10
			case 1:
				x += rng.Int63n(1000)
			}
			ts[i] = x
		}
		cells := make([]cell, n)
		for i := range cells {
			cells[i].start = ts[i]
		}
		for k := 0; k < 20; k++ {
			target := rng.Int63n(x+1200) - 600
			want := sort.Search(n, func(i int) bool { return ts[i] >= target })
			if got := searchTimes(ts, target); got != want {
				t.Fatalf("searchTimes(%v, %d) = %d, want %d", ts, target, got, want)
			}
			if got := searchCells(cells, target); got != want {
				t.Fatalf("searchCells(%v, %d) = %d, want %d", ts, target, got, want)
			}
		}
	}
}
