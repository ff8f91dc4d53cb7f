package forward

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// TestLastWins checks lastWins against a naive model: a map from tag and
// time to the last point, read out in order.
func TestLastWins(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tags := []string{"b", "a", "c.d", "a.b", "zz"}
	for iter := range 500 {
		n := rng.IntN(60)
		pts := make([]model.Point, n)
		for i := range pts {
			pts[i] = model.Point{Tag: tags[rng.IntN(1+iter%len(tags))], T: int64(rng.IntN(12)) - 3, V: float64(i), Q: model.Quality(rng.IntN(3))}
		}
		type key struct {
			tag string
			t   int64
		}
		naive := map[key]model.Point{}
		for _, p := range pts {
			naive[key{p.Tag, p.T}] = p
		}
		var want []model.Point
		for _, p := range naive {
			want = append(want, p)
		}
		slices.SortFunc(want, func(a, b model.Point) int {
			return cmp.Or(cmp.Compare(a.Tag, b.Tag), cmp.Compare(a.T, b.T))
		})
		prefix := []model.Point{{Tag: "kept"}}
		got := lastWins(slices.Clone(prefix), pts)
		if got[0].Tag != "kept" || !slices.Equal(got[1:], want) {
			t.Fatalf("lastWins(%v) = %v, want %v", pts, got[1:], want)
		}
	}
}

func TestSiteTag(t *testing.T) {
	for _, tt := range []struct{ site, tag, want string }{
		{"", "a.b", "a.b"},
		{"edge1", "a.b", "edge1.a.b"},
		{"edge1", "pith.sys.cpu", "edge1.pith.sys.cpu"},
	} {
		if got := siteTag(tt.site, tt.tag); got != tt.want {
			t.Errorf("siteTag(%q, %q) = %q, want %q", tt.site, tt.tag, got, tt.want)
		}
	}
}
