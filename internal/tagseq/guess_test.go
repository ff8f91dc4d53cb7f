package tagseq

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// resolver is what a caller does: the guess first, the map when it misses.
type resolver struct {
	g     Guess
	ids   map[string]uint32
	names []string
	hits  int
}

func (r *resolver) id(tag string, bytes bool) uint32 {
	var id uint32
	var ok bool
	if bytes {
		id, ok = r.g.NextBytes(r.names, []byte(tag))
	} else {
		id, ok = r.g.Next(r.names, tag)
	}
	if ok {
		r.hits++
		return id
	}
	id, ok = r.ids[tag]
	if !ok {
		id = uint32(len(r.names))
		r.ids[tag] = id
		r.names = append(r.names, tag)
	}
	r.g.Learn(id)
	return id
}

// TestGuessMatchesMap checks, against a plain map, that the id a guess
// gives is always the tag's own, in the orders loads come in and in a
// random one.
func TestGuessMatchesMap(t *testing.T) {
	names := make([]string, 300)
	for i := range names {
		names[i] = "t" + strconv.Itoa(i)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	orders := map[string]func(i int) string{
		"time-major": func(i int) string { return names[i%len(names)] },
		"tag-major":  func(i int) string { return names[i/50%len(names)] },
		"random":     func(int) string { return names[rng.IntN(len(names))] },
		"two-orders": func(i int) string {
			if i/len(names)%2 == 0 {
				return names[i%len(names)]
			}
			return names[len(names)-1-i%len(names)]
		},
	}
	for name, order := range orders {
		for _, bytes := range []bool{false, true} {
			r := &resolver{ids: map[string]uint32{}}
			model := map[string]uint32{}
			const n = 30_000
			for i := range n {
				tag := order(i)
				id := r.id(tag, bytes)
				if want, ok := model[tag]; ok && want != id {
					t.Fatalf("%s: point %d, tag %s: id %d, want %d", name, i, tag, id, want)
				}
				model[tag] = id
				if r.names[id] != tag {
					t.Fatalf("%s: point %d: id %d names %s, want %s", name, i, id, r.names[id], tag)
				}
			}
			t.Logf("%s (bytes %v): %d of %d guessed", name, bytes, r.hits, n)
			// Time-major misses only the first round; tag-major twice a
			// run of 50 (the change of tag, and the tag after itself).
			if (name == "time-major" || name == "tag-major") && r.hits < n*9/10 {
				t.Errorf("%s: only %d of %d guessed", name, r.hits, n)
			}
		}
	}
}

// TestGuessForgetReset: after Forget the next tag is not guessed; after
// Reset nothing is, and ids may be given again from 0.
func TestGuessForgetReset(t *testing.T) {
	var g Guess
	names := []string{"a", "b"}
	g.Learn(0)
	g.Learn(1)
	g.Learn(0) // a, b, a: b follows a
	if id, ok := g.Next(names, "b"); !ok || id != 1 {
		t.Fatalf("after a: %d %v, want b (1)", id, ok)
	}
	g.Forget()
	if _, ok := g.Next(names, "a"); ok {
		t.Fatal("guessed after Forget")
	}
	g.Learn(0)
	g.Reset()
	g.Learn(0)
	if _, ok := g.Next(names, "b"); ok {
		t.Fatal("guessed after Reset")
	}
	// A guess past the names (the caller's slice shrank) is no guess.
	g.Reset()
	g.Learn(0)
	g.Learn(5)
	g.Learn(0)
	if _, ok := g.Next(names, "b"); ok {
		t.Fatal("guessed an id past the names")
	}
}
