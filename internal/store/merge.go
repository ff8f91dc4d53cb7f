package store

import (
	"cmp"
	"math"
	"path/filepath"
	"slices"
	"sort"
)

// mergeRuns writes one run holding the data of runs, given oldest first:
// on equal timestamps the newer run wins. It works one series at a time,
// and streams a numeric series chunk by chunk from the runs to the new
// one (mergeStream), so memory stays bounded by a chunk per run and the
// finest tier's cells, not by the day: a day written for hours is merged
// in the memory of its first minutes. Text series are merged whole. When
// abort is closed before the merge ends, the merge stops, removes what it
// wrote and returns errMergeAborted.
func (db *DB) mergeRuns(p int64, runs []*runFile, dropRaw bool, abort <-chan struct{}) (*runFile, error) {
	// The runs' indexes are walked side by side, series by series.
	curs := make([]indexCursor, len(runs))
	for i, r := range runs {
		if curs[i].start(r); curs[i].err != nil {
			return nil, curs[i].err
		}
	}
	rw, err := createRun(db.fs, filepath.Join(db.dir, "runs"), p, db.allocSeq(), runsHoldText(runs))
	if err != nil {
		return nil, err
	}
	var m merger
	var acc runInput
	for lo, more := uint32(0), true; more; {
		id, found := uint32(0), false
		for i := range curs {
			if x, ok := curs[i].seek(lo); ok && (!found || x < id) {
				id, found = x, true
			}
		}
		if !found {
			break
		}
		lo, more = id+1, id < math.MaxUint32
		select {
		case <-abort:
			rw.abort()
			return nil, errMergeAborted
		default:
		}
		m.reset(runs, curs, id)
		if !m.text {
			db.mergeStream(rw, &m, id, dropRaw)
			continue
		}
		db.mergeWhole(&m, &acc)
		acc.id = id
		rw.add(&acc, dropRaw)
	}
	for i := range curs {
		if curs[i].err != nil {
			// Written so far is a part of the day: the runs stay.
			rw.abort()
			return nil, curs[i].err
		}
	}
	path, err := rw.finish(true)
	if err != nil {
		return nil, err
	}
	db.stats.Compactions.Add(1)
	r, err := db.openWritten(rw, path)
	if err == nil {
		db.stats.MergeBytes.Add(r.size)
	}
	return r, err
}

// mergeStream writes numeric series id of the merger's runs to rw. Its
// finest tier depends on its count and span: from the runs' indexes when
// they are disjoint in time (the usual case: a day written in time order),
// else from a first pass that counts what the merge keeps.
func (db *DB) mergeStream(rw *runWriter, m *merger, id uint32, dropRaw bool) {
	n, minT, maxT := 0, int64(math.MaxInt64), int64(math.MinInt64)
	disjoint := m.disjoint()
	if disjoint {
		for _, it := range m.its {
			n += int(it.rs.n)
			minT, maxT = min(minT, it.rs.minT), max(maxT, it.rs.maxT)
		}
	} else {
		m.eachReport(db, false, func(ts []int64, _ []float64, _ []uint8) {
			if n == 0 {
				minT = ts[0]
			}
			n += len(ts)
			maxT = ts[len(ts)-1]
		})
		m.rewind()
	}
	if n == 0 {
		return
	}
	fine := finestTier(n, minT, maxT)
	if !dropRaw && disjoint && db.copySeries(rw, m, id, fine) {
		return
	}
	w := rw.beginSeries(id, fine, dropRaw)
	m.each(db, func(ts []int64, vs []float64, qs []uint8) { pushSamples(w, ts, vs, qs) })
	w.finish()
}

// mergeWhole reads the merger's series into acc, whole: a text series,
// or one that is text in some runs and numbers in others.
func (db *DB) mergeWhole(m *merger, acc *runInput) {
	var next, tmp runInput
	acc.reset()
	total := 0
	for _, it := range m.its {
		total += int(it.rs.n)
	}
	acc.ts, acc.vs, acc.qs = slices.Grow(acc.ts, total), slices.Grow(acc.vs, total), slices.Grow(acc.qs, total)
	for _, it := range m.its {
		r, rs := it.r, it.rs
		// A run after what is merged so far (the usual case: a day
		// written in time order) is decoded straight into acc, which
		// then holds the series once rather than twice.
		n := len(acc.ts)
		if n == 0 {
			acc.xs = nil // readAll makes it again for a text series
		}
		if n == 0 || rs.minT > acc.ts[n-1] && (rs.fine == fineText) == (acc.xs != nil) {
			if err := r.readAll(rs, acc); err != nil {
				db.stats.CorruptBlocks.Add(1)
				db.log.Error("merge skips damaged data", "err", err)
			}
			if n > 0 && len(acc.ts) > n && acc.ts[n] <= acc.ts[n-1] {
				// The index promised later samples than the data holds:
				// merge them as an overlapping run.
				next.reset()
				next.ts, next.vs, next.qs = append(next.ts, acc.ts[n:]...), append(next.vs, acc.vs[n:]...), append(next.qs, acc.qs[n:]...)
				if acc.xs != nil {
					next.xs = append([]string{}, acc.xs[n:]...)
					acc.xs = acc.xs[:n]
				}
				acc.ts, acc.vs, acc.qs = acc.ts[:n], acc.vs[:n], acc.qs[:n]
				mergeSamples(&tmp, acc, &next)
				*acc, tmp = tmp, *acc
			}
			continue
		}
		next.reset()
		if err := r.readAll(rs, &next); err != nil {
			db.stats.CorruptBlocks.Add(1)
			db.log.Error("merge skips damaged data", "err", err)
		}
		if len(next.ts) == 0 {
			continue
		}
		if len(acc.ts) > 0 && (acc.xs != nil) != (next.xs != nil) {
			acc.asText()
			next.asText()
		}
		if len(acc.ts) == 0 || next.ts[0] > acc.ts[len(acc.ts)-1] {
			if next.xs != nil {
				acc.xs = append(acc.xs, next.xs...)
			}
			acc.ts = append(acc.ts, next.ts...)
			acc.vs = append(acc.vs, next.vs...)
			acc.qs = append(acc.qs, next.qs...)
			continue
		}
		mergeSamples(&tmp, acc, &next)
		*acc, tmp = tmp, *acc
	}
}

// mergeSamples merges two sorted sample sets into dst; b wins on equal times.
func mergeSamples(dst, a, b *runInput) {
	if a.xs != nil || b.xs != nil {
		mergeText(dst, a, b)
		return
	}
	dst.ts, dst.vs, dst.qs = dst.ts[:0], dst.vs[:0], dst.qs[:0]
	dst.xs = nil
	i, j := 0, 0
	for i < len(a.ts) || j < len(b.ts) {
		switch {
		case j == len(b.ts) || (i < len(a.ts) && a.ts[i] < b.ts[j]):
			dst.ts, dst.vs, dst.qs = append(dst.ts, a.ts[i]), append(dst.vs, a.vs[i]), append(dst.qs, a.qs[i])
			i++
		default:
			if i < len(a.ts) && a.ts[i] == b.ts[j] {
				i++
			}
			dst.ts, dst.vs, dst.qs = append(dst.ts, b.ts[j]), append(dst.vs, b.vs[j]), append(dst.qs, b.qs[j])
			j++
		}
	}
}

// meeting is what mergeMeeting did to a day: the merge, the day's runs
// left as they are and those merged into it, the new runs added as they
// are and those merged into it.
type meeting struct {
	merged      *runFile
	keep, gone  []*runFile
	fresh, used []*runFile
}

// mergeMeeting merges the new runs of day p that meet some of its runs old
// (disjoint among themselves) with the runs they meet, and only those:
// the old runs a late sample falls among, then any run the merge's span
// of a series would cover (so that the day stays disjoint). The new runs
// win on equal timestamps. It returns nil when old or the new runs are
// not disjoint among themselves, or a new run that meets none would meet
// the merge (the caller then merges the whole day).
func (db *DB) mergeMeeting(p int64, old, added []*runFile) (*meeting, error) {
	if !disjoint(old) || !disjoint(added) {
		return nil, nil
	}
	var mt meeting
	var sp spans // of the runs merged so far
	for _, r := range added {
		if disjoint(append(slices.Clip(old), r)) {
			mt.fresh = append(mt.fresh, r)
		} else {
			mt.used = append(mt.used, r)
			sp.add(r)
		}
	}
	mt.keep = slices.Clone(old)
	for grew := true; grew; {
		grew = false
		for i := 0; i < len(mt.keep); i++ {
			if r := mt.keep[i]; sp.meets(r) {
				mt.gone = append(mt.gone, r)
				sp.add(r)
				mt.keep = slices.Delete(mt.keep, i, i+1)
				i--
				grew = true
			}
		}
	}
	for _, r := range mt.fresh {
		if sp.meets(r) {
			return nil, nil
		}
	}
	sortRuns(mt.gone)
	m, err := db.mergeRuns(p, append(slices.Clip(mt.gone), mt.used...), false, nil)
	if err != nil {
		return nil, err
	}
	mt.merged = m
	return &mt, nil
}

// tail returns where the merge of a day's runs starts: all are the day's
// runs, oldest first, the last added of them new, the others disjoint. It takes the
// newest runs (at least one old run besides the new ones), then older ones
// while each holds at most as many samples as those taken, so that a
// sample is rewritten about once each time the day doubles (a day written
// for an hour costs n log n, not n squared); then more while the merge
// would meet a run left out, or the day would keep more than maxRuns runs.
func tail(all []*runFile, added, maxRuns int) int {
	from := max(0, len(all)-added-1)
	sum := int64(0)
	for _, r := range all[from:] {
		sum += r.samples()
	}
	for from > 0 && all[from-1].samples() <= sum {
		from--
		sum += all[from].samples()
	}
	from = min(from, maxRuns-1)
	for from > 0 && !disjointMerged(all[:from], all[from:]) {
		from--
	}
	return from
}

// disjointMerged reports whether runs, disjoint among themselves, stay so
// with the merge of merged: no series of runs meets the span of a series
// of merged (its first to its last sample in any of them).
func disjointMerged(runs, merged []*runFile) bool {
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, r := range merged {
		lo, hi = min(lo, r.lo), max(hi, r.hi)
	}
	near := false
	for _, r := range runs {
		near = near || (r.lo <= hi && lo <= r.hi)
	}
	if !near {
		return true
	}
	var sp spans
	for _, r := range merged {
		sp.add(r)
	}
	for _, r := range runs {
		if sp.meets(r) {
			return false
		}
	}
	return true
}

// spans are the time spans of series over some runs: each series' first
// to last sample in any of them.
type spans map[uint32]struct{ lo, hi int64 }

// add widens the spans by the series of r.
func (sp *spans) add(r *runFile) {
	if *sp == nil {
		*sp = spans{}
	}
	for i, ss := 0, r.index(); i < len(ss); i++ {
		s := &ss[i]
		x, ok := (*sp)[s.id]
		if !ok {
			x.lo, x.hi = s.minT, s.maxT
		}
		x.lo, x.hi = min(x.lo, s.minT), max(x.hi, s.maxT)
		(*sp)[s.id] = x
	}
}

// meets reports whether a series of r has samples within its span.
func (sp spans) meets(r *runFile) bool {
	for i, ss := 0, r.index(); i < len(ss); i++ {
		s := &ss[i]
		if x, ok := sp[s.id]; ok && s.minT <= x.hi && x.lo <= s.maxT {
			return true
		}
	}
	return false
}

// apart reports whether the runs' bounds (their earliest to latest sample
// of any series) do not overlap: then no series meets another run's, and
// no index need be read.
func apart(runs []*runFile) bool {
	bs := make([][2]int64, 0, len(runs))
	for _, r := range runs {
		if r.lo <= r.hi {
			bs = append(bs, [2]int64{r.lo, r.hi})
		}
	}
	slices.SortFunc(bs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	for i := 1; i < len(bs); i++ {
		if bs[i][0] <= bs[i-1][1] {
			return false
		}
	}
	return true
}

// disjoint reports whether no two runs hold samples of one series in
// overlapping time ranges.
func disjoint(runs []*runFile) bool {
	if len(runs) < 2 || apart(runs) {
		return true
	}
	type span struct{ lo, hi int64 }
	spans := make(map[uint32][]span)
	for _, r := range runs {
		for i, ss := 0, r.index(); i < len(ss); i++ {
			s := &ss[i]
			spans[s.id] = append(spans[s.id], span{s.minT, s.maxT})
		}
	}
	for _, ss := range spans {
		if len(ss) < 2 {
			continue
		}
		sort.Slice(ss, func(i, j int) bool { return ss[i].lo < ss[j].lo })
		for i := 1; i < len(ss); i++ {
			if ss[i].lo <= ss[i-1].hi {
				return false
			}
		}
	}
	return true
}
