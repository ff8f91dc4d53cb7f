package chunkenc

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortGroup checks sortGroup against a comparison sort for groups of
// every length and of widths up to maxExcWidth+1, with repeated values.
func TestSortGroup(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for g := 1; g <= groupSize; g++ {
		for _, w := range []uint{1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 23, 24, 25, 31, 32, 40, 56, 57} {
			x := make([]int64, g)
			lo := r.Int64N(1<<40) - 1<<39
			for i := range x {
				x[i] = lo + int64(r.Uint64N(uint64(1)<<w))
				if i > 0 && r.IntN(4) == 0 {
					x[i] = x[r.IntN(i)]
				}
			}
			x[r.IntN(g)] = lo
			s := make([]int64, g)
			sortGroup(s, x, lo, w)
			want := slices.Clone(x)
			slices.Sort(want)
			if !slices.Equal(s, want) {
				t.Fatalf("g %d w %d: sortGroup %v, want %v", g, w, s, want)
			}
		}
	}
}

// BenchmarkSortGroup sorts groups of the sizes chunks of a spill (48) and
// a full group (128) have, at typical widths.
func BenchmarkSortGroup(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, g := range []int{48, 128} {
		for _, w := range []uint{4, 11, 20} {
			b.Run(fmt.Sprintf("g%d/w%d", g, w), func(b *testing.B) {
				x := make([]int64, g)
				for i := range x {
					x[i] = int64(r.Uint64N(uint64(1) << w))
				}
				x[0] = 0
				s := make([]int64, g)
				for b.Loop() {
					sortGroup(s, x, 0, w)
				}
			})
		}
	}
}

// TestMayExcept: whenever mayExcept rules the search out, the search
// finds no width better than the group's full one, on groups of random
// widths, spikes, steps and clusters.
func TestMayExcept(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ruled, kept := 0, 0
	for range 200_000 {
		g := 1 + r.IntN(groupSize)
		x := make([]int64, g)
		w := 1 + r.UintN(20)
		base := r.Int64N(1 << 30)
		for i := range x {
			x[i] = base + int64(r.Uint64N(uint64(1)<<w))
		}
		switch r.IntN(4) {
		case 0: // a few spikes far away
			for range 1 + r.IntN(4) {
				x[r.IntN(g)] += int64(r.Uint64N(1<<(w+r.UintN(30)))) - 1<<w
			}
		case 1: // a step: two clusters
			for i := r.IntN(g); i < g; i++ {
				x[i] += int64(1) << (w + r.UintN(8))
			}
		case 2: // most values in a narrow band
			for i := range x {
				if r.IntN(10) > 0 {
					x[i] = base + int64(r.Uint64N(1+uint64(1)<<(w/3)))
				}
			}
		}
		prevBase := base + r.Int64N(1000) - 500
		lo, hi := slices.Min(x), slices.Max(x)
		fullW := uint(bits.Len64(uint64(hi) - uint64(lo)))
		if fullW == 0 || fullW > maxExcWidth+1 {
			continue
		}
		full := 1 + packedLen(g, fullW) + uvarintLen(zigzag(lo-prevBase))
		if mayExcept(x, lo, fullW, full) {
			kept++
			continue
		}
		ruled++
		if cost, bw, bb := searchExceptions(x, lo, fullW, prevBase, full); cost != full || bw != fullW || bb != lo {
			t.Fatalf("ruled out, but the search found width %d base %d cost %d against %d at %d: %v", bw, bb, cost, fullW, full, x)
		}
	}
	if ruled == 0 || kept == 0 {
		t.Fatalf("ruled out %d, searched %d: the cases do not cover both", ruled, kept)
	}
	t.Logf("ruled out %d groups, searched %d", ruled, kept)
}
