// Package tagseq saves the name lookups of bulk loads whose points come
// in a repeating order of tags.
//
// A load of many tags names a tag in every point, and each name is looked
// up in a map of every tag known: once the map holds 100,000 names its
// probes miss the CPU's caches, and the lookups cost more than storing
// the points. But a load's tags come in an order that repeats:
// time-major (every tag at one time, then every tag at the next, as a wide
// CSV file, a scrape or a replayed log is) or tag-major (one tag's points
// in a row). A Guess remembers which tag followed each tag last time and
// tries that one first: one comparison with a name the load just met.
package tagseq

// Guess predicts the next tag of a load from the tag before it. Tags are
// dense ids (0, 1, 2, ...) that index a slice of their names, which the
// caller owns. The zero value is ready to use; a Guess is not safe for
// concurrent use.
type Guess struct {
	after []uint32 // after[id] is 1 + the id that followed id last time; 0 unknown
	prev  uint32   // the id of the last tag
	any   bool     // prev is set
}

// Next returns the id that followed the last tag last time, if names[id]
// is tag, and makes it the last tag. Otherwise the caller resolves tag
// itself and calls Learn.
func (g *Guess) Next(names []string, tag string) (uint32, bool) {
	id, ok := g.guess(len(names))
	if !ok || names[id] != tag {
		return 0, false
	}
	g.prev = id
	return id, true
}

// NextBytes is Next for a name that is not yet a string.
func (g *Guess) NextBytes(names []string, tag []byte) (uint32, bool) {
	id, ok := g.guess(len(names))
	if !ok || names[id] != string(tag) {
		return 0, false
	}
	g.prev = id
	return id, true
}

// guess returns the id that followed prev, if known and below n.
func (g *Guess) guess(n int) (uint32, bool) {
	if !g.any || int(g.prev) >= len(g.after) {
		return 0, false
	}
	next := g.after[g.prev]
	if next == 0 || int(next-1) >= n {
		return 0, false
	}
	return next - 1, true
}

// Learn records that id followed the last tag, and makes it the last tag.
func (g *Guess) Learn(id uint32) {
	if g.any {
		if int(g.prev) >= len(g.after) {
			g.after = append(g.after, make([]uint32, int(g.prev)+1-len(g.after))...)
		}
		g.after[g.prev] = id + 1
	}
	g.prev, g.any = id, true
}

// Forget says that the last tag has no id: the next one is not guessed.
func (g *Guess) Forget() { g.any = false }

// Reset forgets the order learnt, keeping the memory for reuse.
func (g *Guess) Reset() {
	clear(g.after)
	g.after = g.after[:0]
	g.prev, g.any = 0, false
}
