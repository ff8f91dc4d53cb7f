package store

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// TestOverlayModel checks overlay against a naive model (a map of time
// to the last value written) over random runs and head pieces, wholly
// after the runs (the appended case), overlapping and interleaved, and
// that it never writes into a head piece it was given.
func TestOverlayModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 16))
	piece := func(from int64, n int, tag float64) runInput {
		var in runInput
		ts := from
		for range n {
			ts += 1 + rng.Int64N(3)
			in.ts = append(in.ts, ts)
			in.vs = append(in.vs, tag+float64(ts))
			in.qs = append(in.qs, model.Quality(tag))
		}
		return in
	}
	for i := range 2000 {
		base := piece(rng.Int64N(10), rng.IntN(20), 0)
		var heads []runInput
		for h := range rng.IntN(4) {
			heads = append(heads, piece(rng.Int64N(60), rng.IntN(20), float64(h+1)*1000))
		}
		want := map[int64]float64{}
		for _, p := range append([]runInput{base}, heads...) {
			for k, ts := range p.ts {
				want[ts] = p.vs[k]
			}
		}
		var saved [][]int64
		for j := range heads {
			// Give each piece spare capacity, as a head's slices have.
			heads[j].ts = slices.Grow(heads[j].ts, 8)
			saved = append(saved, slices.Clone(heads[j].ts[:cap(heads[j].ts)]))
		}
		got := overlay(base, heads)
		if len(got.ts) != len(want) || len(got.vs) != len(got.ts) || len(got.qs) != len(got.ts) {
			t.Fatalf("case %d: %d samples (%d values), want %d", i, len(got.ts), len(got.vs), len(want))
		}
		for k, ts := range got.ts {
			if k > 0 && ts <= got.ts[k-1] {
				t.Fatalf("case %d: times out of order at %d", i, k)
			}
			if got.vs[k] != want[ts] {
				t.Fatalf("case %d: at %d got %v, want %v", i, ts, got.vs[k], want[ts])
			}
		}
		for j, h := range heads {
			if !slices.Equal(h.ts[:cap(h.ts)], saved[j]) {
				t.Fatalf("case %d: head piece %d was written to", i, j)
			}
		}
	}
}
