package store

import (
	"slices"
	"sort"
)

// The summary above the day: a query over years whose buckets are a day or
// wider spends most of its time finding, day after day, the run entries of
// its series, only to add their totals. A daySums holds those day totals of
// one series in one array, built by the first such query and kept in a
// bounded cache (dropped when unused, as decoded tiers are), so that later
// queries visit only the days a bucket edge cuts, and the days holding
// unflushed samples. Nothing of it is on disk.
//
// Runs are immutable, and every change to the runs of a day goes through
// install (flush, merge, bulk commit, delete, retention), which logs the
// day in spanLog. A summary remembers the change it reflects; a query
// that finds it older recomputes the days changed since, or all of it
// when the log no longer reaches back that far.

// minSpanDays is the least number of days a window must cover for a
// query to use the summary: below it, visiting the days costs little.
const minSpanDays = 64

// maxSpanLog bounds the days spanLog remembers; a summary older than the
// oldest is built again.
const maxSpanLog = 4096

// maxSpanPatch is the most changed days a summary is patched for rather
// than built again.
const maxSpanPatch = 256

// daySumBytes approximates the memory of one day of a summary: its day,
// total and runs.
const daySumBytes = 104

// spanLog records which days changed runs. It is written under db.mu held
// for writing (install) and read under db.mu held for reading (queries).
type spanLog struct {
	gen  uint64    // the number of changes so far
	base uint64    // days[0] is change base+1
	days [][]int64 // the days each change touched, oldest first
}

// changed records that the runs of days changed. The caller holds db.mu
// for writing.
func (l *spanLog) changed(days []int64) {
	l.gen++
	l.days = append(l.days, days)
	if len(l.days) > maxSpanLog {
		n := len(l.days) / 2
		l.base += uint64(n)
		l.days = slices.Delete(l.days, 0, n)
	}
}

// since returns the days changed after change gen, in order and without
// repeats, and false when the log does not reach back that far or more
// than maxSpanPatch days changed.
func (l *spanLog) since(gen uint64) ([]int64, bool) {
	if gen < l.base {
		return nil, false
	}
	var out []int64
	for _, ds := range l.days[gen-l.base:] {
		out = append(out, ds...)
		if len(out) > 4*maxSpanPatch {
			return nil, false
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return out, len(out) <= maxSpanPatch
}

// daySums is the summary of one series: the total of its run samples in
// each day that holds some, days in increasing order. It is never
// modified once cached: a newer one replaces it.
type daySums struct {
	gen  uint64 // the spanLog change it reflects
	days []int64
	accs []acc
	// runs holds db.parts[p] of each day as of gen: a day a bucket edge
	// cuts is read without a lookup in that map (a cache miss or two
	// for each of the ~1,000 edges of a chart over years). Every change
	// of a day's runs moves gen on (install), so they are the day's
	// runs for as long as the summary is used.
	runs [][]*runFile
}

func daySumsSize(s *daySums) int { return 64 + len(s.days)*daySumBytes }

// dayTotal returns the total of series id in the runs of day p, as a
// bucket holding the whole day would add it, and false when a damaged
// block was met.
func (db *DB) dayTotal(id uint32, p int64, runs []*runFile) (acc, bool) {
	q := &query{db: db, id: id, bb: newBounds(p*partitionMs, (p+1)*partitionMs, 1), accs: make([]acc, 1)}
	q.partition(p, runs, nil)
	return q.accs[0], q.err == nil
}

// daySums returns the summary of series id as of now, building or
// patching it, or nil when a damaged block keeps it from being exact.
// The caller holds db.mu for reading.
func (db *DB) daySums(id uint32) *daySums {
	l := db.span
	s, ok := db.cache.sums.get(id)
	if ok && s.gen == l.gen {
		return s
	}
	var next *daySums
	if ok {
		if days, fresh := l.since(s.gen); fresh {
			next = db.patchDaySums(id, s, days)
		}
	}
	if next == nil {
		next = db.buildDaySums(id)
	}
	if next == nil {
		return nil
	}
	next.gen = l.gen
	db.cache.sums.put(id, next)
	return next
}

// buildDaySums sums every day of series id.
func (db *DB) buildDaySums(id uint32) *daySums {
	days := make([]int64, 0, len(db.parts))
	for p := range db.parts {
		days = append(days, p)
	}
	slices.Sort(days)
	s := &daySums{days: days[:0]}
	for _, p := range days {
		t, ok := db.dayTotal(id, p, db.parts[p])
		if !ok {
			return nil
		}
		if t.n > 0 {
			s.days = append(s.days, p)
			s.accs = append(s.accs, t)
			s.runs = append(s.runs, db.parts[p])
		}
	}
	s.days = slices.Clip(s.days)
	return s
}

// patchDaySums returns a copy of s with the changed days summed again.
func (db *DB) patchDaySums(id uint32, s *daySums, changed []int64) *daySums {
	next := &daySums{days: slices.Clone(s.days), accs: slices.Clone(s.accs), runs: slices.Clone(s.runs)}
	for _, p := range changed {
		t, ok := db.dayTotal(id, p, db.parts[p])
		if !ok {
			return nil
		}
		i, found := slices.BinarySearch(next.days, p)
		switch {
		case found && t.n > 0:
			next.accs[i] = t
			next.runs[i] = db.parts[p]
		case found:
			next.days = slices.Delete(next.days, i, i+1)
			next.accs = slices.Delete(next.accs, i, i+1)
			next.runs = slices.Delete(next.runs, i, i+1)
		case t.n > 0:
			next.days = slices.Insert(next.days, i, p)
			next.accs = slices.Insert(next.accs, i, t)
			next.runs = slices.Insert(next.runs, i, db.parts[p])
		}
	}
	return next
}

// useSums reports whether a query of n buckets over [from, to) gains from
// the summary: its window covers many days and its buckets hold whole
// ones.
func useSums(from, to int64, n int) bool {
	return (to-from)/int64(n) >= partitionMs && partitionOf(to-1)-partitionOf(from)+1 >= minSpanDays
}

// aggregateSums is the day loop of Aggregate with the summary s: a day
// that lies inside one bucket and holds no unflushed sample adds its
// total; the others (cut by a bucket edge or the window's, or holding
// head samples) are read as forPartitions would. The caller holds db.mu
// for reading.
func (q *query) aggregateSums(s *daySums, heads []runInput) {
	db, bb := q.db, q.bb
	byPart := make(map[int64][]runInput)
	for _, h := range heads {
		byDay(h, func(p int64, day runInput) { byPart[p] = append(byPart[p], day) })
	}
	// The days read whole: those a bucket edge cuts, and those holding
	// head samples.
	read := make([]int64, 0, bb.n+1+len(byPart))
	for _, t := range bb.b {
		if floorTo(t, partitionMs) != t {
			read = append(read, partitionOf(t))
		}
	}
	for p := range byPart {
		read = append(read, p)
	}
	slices.Sort(read)
	read = slices.Compact(read)
	p0, p1 := partitionOf(bb.from), partitionOf(bb.from+bb.span-1)
	i := sort.Search(len(s.days), func(k int) bool { return s.days[k] >= p0 })
	// Days ascend, and so does the bucket each falls in: a cursor
	// finds it rather than a division a day.
	b := -1
	for j := 0; i < len(s.days) && s.days[i] <= p1; i++ {
		p := s.days[i]
		for j < len(read) && read[j] < p {
			j++
		}
		if j < len(read) && read[j] == p {
			continue
		}
		t := p * partitionMs
		if b < 0 {
			b = bb.index(t)
		}
		for b < bb.n-1 && t >= bb.b[b+1] {
			b++
		}
		if q.sumsOnly {
			q.accs[b].mergeSums(&s.accs[i])
		} else {
			q.accs[b].merge(&s.accs[i])
		}
	}
	k := 0 // s.days[k] is the first summed day at or after p
	for _, p := range read {
		if p < p0 || p > p1 {
			continue
		}
		for k < len(s.days) && s.days[k] < p {
			k++
		}
		var runs []*runFile
		if k < len(s.days) && s.days[k] == p {
			runs = s.runs[k]
		} else {
			runs = db.parts[p]
		}
		if hp := byPart[p]; len(runs) > 0 || len(hp) > 0 {
			q.partition(p, runs, hp)
		}
	}
}

// changedDays returns the days of added and replaced.
func changedDays(added, replaced map[int64][]*runFile) []int64 {
	days := make([]int64, 0, len(added)+len(replaced))
	for p := range added {
		days = append(days, p)
	}
	for p := range replaced {
		if _, ok := added[p]; !ok {
			days = append(days, p)
		}
	}
	return days
}
