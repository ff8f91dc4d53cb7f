package forward

import (
	"cmp"
	"slices"

	"github.com/pith-historian/pith/internal/model"
)

// Helpers shared by the sinks that decode batches (PostgreSQL, MQTT,
// HTTP); the NATS sink sends the payload as it is.

// siteTag returns the name a forwarded tag has upstream: "<site>.<tag>",
// or tag unchanged when site is empty. Central engines thus keep the
// tags of several sites apart, as a NATS consumer does with the <site>
// of the subject.
func siteTag(site, tag string) string {
	if site == "" {
		return tag
	}
	return site + "." + tag
}

// lastWins appends pts to dst sorted by tag and time, keeping of several
// points of one tag at one time the one that came last in pts, as the
// store does, and returns dst. Points are bucketed by tag (a counting
// sort over the few distinct tags of a batch), and each tag's run, which
// is nearly always in time order already, is sorted stably by time.
func lastWins(dst, pts []model.Point) []model.Point {
	rank := make(map[string]int)
	var names []string
	for i := range pts {
		if _, ok := rank[pts[i].Tag]; !ok {
			rank[pts[i].Tag] = 0
			names = append(names, pts[i].Tag)
		}
	}
	slices.Sort(names)
	start := make([]int, len(names)+1)
	for i, n := range names {
		rank[n] = i
	}
	// Points of one tag often come in runs: look the rank up once a run.
	ranks := make([]int, len(pts))
	last, lr := "", -1
	for i := range pts {
		if lr < 0 || pts[i].Tag != last {
			last, lr = pts[i].Tag, rank[pts[i].Tag]
		}
		ranks[i] = lr
		start[lr+1]++
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	base := len(dst)
	dst = slices.Grow(dst, len(pts))[:base+len(pts)]
	out := dst[base:]
	next := slices.Clone(start[:len(names)])
	for i := range pts {
		r := ranks[i]
		out[next[r]] = pts[i]
		next[r]++
	}
	byTime := func(a, b model.Point) int { return cmp.Compare(a.T, b.T) }
	w := 0
	for r := range names {
		run := out[start[r]:start[r+1]]
		if !slices.IsSortedFunc(run, byTime) {
			slices.SortStableFunc(run, byTime)
		}
		for i := range run {
			if w > 0 && i > 0 && out[w-1].T == run[i].T {
				out[w-1] = run[i]
				continue
			}
			out[w] = run[i]
			w++
		}
	}
	return dst[:base+w]
}
