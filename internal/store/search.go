package store

import "sort"

// searchNear returns the least i in [0, n) for which before(i) is false
// (n when there is none), as sort.Search does, but probing from guess g
// outwards in growing steps. A bucket edge of a chart over years lands
// in a chunk and tiers that no other edge touched: sort.Search probed
// log2(n) places far apart in them, each a cache miss, while a guess
// interpolated from the times (samples and cells are about evenly
// spaced) is right or next to it.
func searchNear(n, g int, before func(int) bool) int {
	if n == 0 {
		return 0
	}
	g = min(max(g, 0), n-1)
	var lo, hi int // the answer is in [lo, hi]
	if before(g) {
		lo, hi = g+1, n
		for step := 1; g+step < n; step *= 2 {
			if !before(g + step) {
				hi = g + step
				break
			}
			lo = g + step + 1
		}
	} else {
		lo, hi = 0, g
		for step := 1; g-step >= 0; step *= 2 {
			if before(g - step) {
				lo = g - step + 1
				break
			}
			hi = g - step
		}
	}
	return lo + sort.Search(hi-lo, func(i int) bool { return !before(lo + i) })
}

// guess interpolates where t falls among n times from first to last.
func guess(n int, first, last, t int64) int {
	if n < 2 || last <= first || t <= first {
		return 0
	}
	if t >= last {
		return n - 1
	}
	return int((t - first) * int64(n-1) / (last - first))
}

// searchTimes returns the index of the first of the sorted times ts at
// or after t.
func searchTimes(ts []int64, t int64) int {
	n := len(ts)
	if n == 0 || t <= ts[0] {
		return 0
	}
	if t > ts[n-1] {
		return n
	}
	return searchNear(n, guess(n, ts[0], ts[n-1], t), func(i int) bool { return ts[i] < t })
}

// searchTimesIn is searchTimes for times known to run from first to
// last (a chunk's, from its reference): it guesses without reading the
// ends of ts.
func searchTimesIn(ts []int64, first, last, t int64) int {
	n := len(ts)
	if n == 0 || t <= first {
		return 0
	}
	if t > last {
		return n
	}
	return searchNear(n, guess(n, first, last, t), func(i int) bool { return ts[i] < t })
}

// searchCells returns the index of the first cell starting at or after t.
func searchCells(cells []cell, t int64) int {
	n := len(cells)
	if n == 0 || t <= cells[0].start {
		return 0
	}
	if t > cells[n-1].start {
		return n
	}
	return searchNear(n, guess(n, cells[0].start, cells[n-1].start, t), func(i int) bool { return cells[i].start < t })
}
