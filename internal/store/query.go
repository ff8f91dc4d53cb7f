package store

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"
	"sync"

	"github.com/pith-historian/pith/internal/model"
)

// MaxBuckets bounds the bucket count of one query.
const MaxBuckets = 1_000_000

// bucketBounds holds the integer bucket edges of a window: bucket i holds
// the samples with b[i] <= t < b[i+1], which is exactly from+i*w <= t <
// from+(i+1)*w for the real width w = (to-from)/n.
type bucketBounds struct {
	from, span int64
	n          int
	b          []int64
}

func newBounds(from, to int64, n int) *bucketBounds {
	bb := &bucketBounds{from: from, span: to - from, n: n, b: make([]int64, n+1)}
	for i := 0; i <= n; i++ {
		q, r := mulDiv(uint64(i), uint64(bb.span), uint64(n))
		if r != 0 {
			q++
		}
		bb.b[i] = from + int64(q)
	}
	return bb
}

// start returns the timestamp of bucket i, its real start rounded down.
func (bb *bucketBounds) start(i int) int64 {
	q, _ := mulDiv(uint64(i), uint64(bb.span), uint64(bb.n))
	return bb.from + int64(q)
}

// index returns the bucket holding t (from <= t < to).
func (bb *bucketBounds) index(t int64) int {
	q, _ := mulDiv(uint64(t-bb.from), uint64(bb.n), uint64(bb.span))
	i := int(q)
	for i > 0 && t < bb.b[i] {
		i--
	}
	for i < bb.n-1 && t >= bb.b[i+1] {
		i++
	}
	return i
}

// mulDiv returns a*b/c and its remainder without overflow (a*b/c < 2^64).
func mulDiv(a, b, c uint64) (uint64, uint64) {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return ^uint64(0), 0
	}
	return bits.Div64(hi, lo, c)
}

// query is the state of one Aggregate or Raw call.
type query struct {
	db   *DB
	id   uint32
	bb   *bucketBounds
	accs []acc
	// sumsOnly is set for mean, sum and count: their accumulators keep
	// n, sum, first and last but not min and max.
	sumsOnly bool
	err      error // the first damaged block met (the query goes on without it)
	fails    int   // the damaged blocks met
	// Reused from day to day: a query over years visits thousands.
	refs  []seriesRef
	spans []span
	// The last tier of each level and the last chunk the query used: a
	// bucket edge inside a day reads the same ones for the buckets on
	// both of its sides, and the shared caches cost a lock and a hash.
	tiers [numTiers]lastBlock[[]cell]
	chunk lastBlock[*decodedChunk]
	// scratch holds a chunk a read decoded without caching it (see
	// readRange).
	scratch decodedChunk
}

// lastBlock is the last block a query took from one of the shared caches.
type lastBlock[V any] struct {
	k  blockKey
	v  V
	ok bool
}

// get returns block k: the last one again, else from c, else decoded by
// load and put in c.
func (m *lastBlock[V]) get(c *genCache[blockKey, V], k blockKey, load func() (V, error)) (V, error) {
	if m.ok && m.k == k {
		return m.v, nil
	}
	v, ok := c.get(k)
	if !ok {
		var err error
		if v, err = load(); err != nil {
			return v, err
		}
		c.put(k, v)
	}
	*m = lastBlock[V]{k: k, v: v, ok: true}
	return v, nil
}

// span is the time range of one piece of a day's data.
type span struct{ lo, hi int64 }

func (db *DB) checkWindow(tag string, from, to int64) (uint32, error) {
	if db.closed.Load() {
		return 0, ErrClosed
	}
	if to <= from {
		return 0, fmt.Errorf("empty window: to (%d) must be after from (%d)", to, from)
	}
	id, ok := db.series.lookup(tag)
	if !ok {
		return 0, fmt.Errorf("query %q: %w", tag, ErrUnknownTag)
	}
	return id, nil
}

// Aggregate splits [from, to) into n equal buckets and returns agg of each.
// It reads whole rollup cells inside buckets and raw samples only at bucket
// edges, and is exact: the answer equals a scan of the raw samples.
func (db *DB) Aggregate(tag string, from, to int64, n int, agg model.Agg) ([]Bucket, error) {
	if agg >= model.AggRaw {
		return nil, errors.New("aggregate: raw is not a bucket aggregate")
	}
	if n < 1 || n > MaxBuckets {
		return nil, fmt.Errorf("bucket count %d out of range 1..%d", n, MaxBuckets)
	}
	id, err := db.checkWindow(tag, from, to)
	if err != nil {
		return nil, err
	}
	if agg != model.AggCount && db.series.textID(id) {
		return nil, fmt.Errorf("aggregate %s of %q: %w", agg, tag, model.ErrTextAgg)
	}
	q := &query{db: db, id: id, bb: newBounds(from, to, n), accs: make([]acc, n),
		sumsOnly: agg == model.AggMean || agg == model.AggSum || agg == model.AggCount}
	db.mu.RLock()
	heads := db.headPieces(id, from, to)
	var sums *daySums
	if useSums(from, to, n) {
		sums = db.daySums(id)
	}
	if sums != nil {
		q.aggregateSums(sums, heads)
	} else {
		db.forPartitions(from, to, heads, func(p int64, runs []*runFile, hp []runInput) bool {
			q.partition(p, runs, hp)
			return true
		})
	}
	db.mu.RUnlock()
	if q.err != nil {
		db.log.Warn("query skipped damaged data", "tag", tag, "err", q.err)
	}
	out := make([]Bucket, n)
	for i := range out {
		out[i].T = q.bb.start(i)
		out[i].V, out[i].OK = q.accs[i].value(agg)
	}
	return out, nil
}

// headPieces returns the unflushed samples of id in [from, to), oldest head
// first, decoded into copies of the query's own: the heads hold them
// encoded. The caller holds db.mu.
func (db *DB) headPieces(id uint32, from, to int64) []runInput {
	return db.appendHeadPieces(nil, id, from, to)
}

// appendHeadPieces is headPieces appending to out, reusing the arrays
// that out's elements past its length hold (a rawScratch's).
func (db *DB) appendHeadPieces(out []runInput, id uint32, from, to int64) []runInput {
	add := func(s *headSeries) {
		n := s.count(from, to)
		if n == 0 {
			return
		}
		var p runInput
		if len(out) < cap(out) {
			p = out[: len(out)+1 : cap(out)][len(out)]
		}
		p = runInput{ts: slices.Grow(p.ts[:0], n), vs: slices.Grow(p.vs[:0], n), qs: slices.Grow(p.qs[:0], n)}
		s.read(from, to, &p)
		if len(p.ts) > 0 {
			out = append(out, p)
		}
	}
	for _, h := range db.frozen {
		if h.sorted.Load() {
			if int(id) < len(h.series) && h.series[id] != nil {
				add(h.series[id])
			}
			continue
		}
		// Not yet sorted by its flush (sortFrozen).
		h.mu.Lock()
		if s := h.getSorted(id); s != nil {
			add(s)
		}
		h.mu.Unlock()
	}
	h := db.active
	h.mu.Lock()
	if s := h.getSorted(id); s != nil {
		add(s)
	}
	h.mu.Unlock()
	return out
}

// forPartitions calls fn for every day in [from, to) that has runs or head
// samples, in time order, with the head samples of that day.
func (db *DB) forPartitions(from, to int64, heads []runInput, fn func(p int64, runs []*runFile, hp []runInput) bool) {
	byPart := make(map[int64][]runInput)
	for _, h := range heads {
		byDay(h, func(p int64, day runInput) { byPart[p] = append(byPart[p], day) })
	}
	p0, p1 := partitionOf(from), partitionOf(to-1)
	keys := make([]int64, 0, len(byPart)+16)
	if p1-p0 < int64(len(db.parts)) {
		for p := p0; p <= p1; p++ {
			if _, ok := db.parts[p]; ok {
				keys = append(keys, p)
			} else if _, ok := byPart[p]; ok {
				keys = append(keys, p)
			}
		}
	} else {
		for p := range db.parts {
			if p >= p0 && p <= p1 {
				keys = append(keys, p)
			}
		}
		for p := range byPart {
			if _, ok := db.parts[p]; !ok {
				keys = append(keys, p)
			}
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	}
	for _, p := range keys {
		if !fn(p, db.parts[p], byPart[p]) {
			return
		}
	}
}

// partition aggregates one day. When head samples meet run data or each
// other in time (late or repeated writes not yet flushed), the day's samples
// are merged raw so the last write wins; otherwise every piece is disjoint
// and aggregates from its rollups.
func (q *query) partition(p int64, runs []*runFile, hp []runInput) {
	q.refs = appendDaySeries(q.refs[:0], runs, q.id, math.MinInt64, math.MaxInt64)
	refs := q.refs
	disjoint := true
	if len(refs)+len(hp) > 1 {
		spans := q.spans[:0]
		for _, x := range refs {
			spans = append(spans, span{x.s.minT, x.s.maxT})
		}
		for _, h := range hp {
			spans = append(spans, span{h.ts[0], h.ts[len(h.ts)-1]})
		}
		slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
		for i := 1; i < len(spans); i++ {
			if spans[i].lo <= spans[i-1].hi {
				disjoint = false
				break
			}
		}
		q.spans = spans
	}
	if disjoint {
		for _, x := range refs {
			q.addRun(x.r, x.s, p)
		}
		for _, h := range hp {
			q.addSamples(h.ts, h.vs)
		}
		return
	}
	all := q.mergedDay(refs, hp)
	q.addSamples(all.ts, all.vs)
}

// mergedDay returns the samples of one day from runs and heads, the newest
// write winning on equal times.
func (q *query) mergedDay(refs []seriesRef, hp []runInput) runInput {
	var base runInput
	for _, x := range refs {
		if err := x.r.readAll(x.s, &base); err != nil {
			q.fail(err)
		}
	}
	return overlay(base, hp)
}

// byDay calls fn with the part of sorted samples in each UTC day.
func byDay(in runInput, fn func(p int64, day runInput)) {
	for i := 0; i < len(in.ts); {
		p := partitionOf(in.ts[i])
		end := (p + 1) * partitionMs
		j := i + sort.Search(len(in.ts)-i, func(k int) bool { return in.ts[i+k] >= end })
		day := runInput{id: in.id, ts: in.ts[i:j], vs: in.vs[i:j], qs: in.qs[i:j]}
		if in.xs != nil {
			day.xs = in.xs[i:j]
		}
		fn(p, day)
		i = j
	}
}

// seriesRef is one series' entry in one run.
type seriesRef struct {
	r *runFile
	s *runSeries
}

// daySeries returns the entries of series id in a day's runs that meet
// [from, to), in time order: a day's runs are disjoint per series.
func daySeries(runs []*runFile, id uint32, from, to int64) []seriesRef {
	return appendDaySeries(nil, runs, id, from, to)
}

// appendDaySeries is daySeries appending to refs.
func appendDaySeries(refs []seriesRef, runs []*runFile, id uint32, from, to int64) []seriesRef {
	n := len(refs)
	for _, r := range runs {
		if rs := r.find(id); rs != nil && rs.maxT >= from && rs.minT < to {
			refs = append(refs, seriesRef{r, rs})
		}
	}
	if len(refs)-n > 1 {
		slices.SortFunc(refs[n:], func(a, b seriesRef) int { return cmp.Compare(a.s.minT, b.s.minT) })
	}
	return refs
}

// overlay merges unflushed head pieces, oldest first, over sorted run
// samples: on equal times the newer write wins. base is the caller's own
// (built by appending); a head piece wholly after it, the usual case of a
// query reaching now, is appended to it rather than merged into a copy
// of both, which would hold the query's samples twice.
func overlay(base runInput, heads []runInput) runInput {
	var tmp runInput
	return overlayInto(base, heads, &tmp)
}

// overlayInto is overlay merging into the arrays of *tmp when a piece
// must be merged; *tmp is left holding the arrays the result does not use.
func overlayInto(base runInput, heads []runInput, tmp *runInput) runInput {
	for i := range heads {
		h := &heads[i]
		if n := len(base.ts); n > 0 && len(h.ts) > 0 && h.ts[0] > base.ts[n-1] && (base.xs == nil) == (h.xs == nil) {
			base.ts = append(base.ts, h.ts...)
			base.vs = append(base.vs, h.vs...)
			base.qs = append(base.qs, h.qs...)
			if h.xs != nil {
				base.xs = append(base.xs, h.xs...)
			}
			continue
		}
		mergeSamples(tmp, &base, h)
		base, *tmp = *tmp, base
	}
	return base
}

func (q *query) fail(err error) {
	q.fails++
	q.db.stats.CorruptBlocks.Add(1)
	if q.err == nil {
		q.err = err
	}
}

// addRun adds the samples of one run series to the buckets they fall in.
func (q *query) addRun(r *runFile, rs *runSeries, p int64) {
	bb := q.bb
	lo, hi := rs.minT, rs.maxT
	if lo < bb.from {
		lo = bb.from
	}
	if end := bb.from + bb.span - 1; hi > end {
		hi = end
	}
	if lo > hi {
		return
	}
	pStart, pEnd := p*partitionMs, (p+1)*partitionMs
	// Mean, sum and count start from the 30-minute tier: adding up to 47
	// of its cells (addCells sums them in a loop) costs less than looking
	// the 3-hour tier up too, which a bucket edge of a chart over years
	// finds in no processor cache.
	top := numTiers - 1
	if q.sumsOnly && rs.fine != noTier && int(rs.fine) < top {
		top--
	}
	i0, i1 := bb.index(lo), bb.index(hi)
	if q.sumsOnly && i1 > i0 && lo == rs.minT && hi == rs.maxT {
		// The series' samples here lie whole in the query and bucket edges
		// cut them: the last bucket's count and sum are the run's total
		// less the others', so each edge is read once, not from both
		// sides (a chart over years has one edge in most days it cuts).
		// Each edge is the count and sum of the samples before it, from
		// the day's start: a bucket is the difference of its two edges.
		var n int64
		var sum float64
		for i := i0; i < i1; i++ {
			e := bb.b[i+1]
			en, esum := q.before(r, rs, top, e)
			if en > n {
				q.accs[i].merge(&acc{n: en - n, sum: esum - sum, firstK: max(bb.b[i], rs.minT), first: rs.first, lastK: max(bb.b[i], rs.minT), last: rs.first})
			}
			n, sum = en, esum
		}
		if rest := rs.n - n; rest > 0 {
			q.accs[i1].merge(&acc{n: rest, sum: rs.sum - sum, firstK: bb.b[i1], first: rs.lastV, lastK: rs.maxT, last: rs.lastV})
		}
		return
	}
	for i := i0; i <= i1; i++ {
		q.addRange(r, rs, top, max(bb.b[i], pStart), min(bb.b[i+1], pEnd), &q.accs[i])
	}
}

// before returns the count and sum of the samples of rs before t
// (rs.minT < t <= rs.maxT): the base of the chunk holding t and its
// prefix sum up to t, or, when the chunk has no base, the cells and raw
// samples from the day's start to t read from tier top down.
func (q *query) before(r *runFile, rs *runSeries, top int, t int64) (int64, float64) {
	cs := rs.chunks
	if len(cs) > 0 {
		i := searchChunks(cs, rs.minT, rs.maxT, t)
		if i < len(cs) {
			if d, ok := q.decode(r, rs, i); ok && d.baseOK {
				c := &cs[i]
				k := searchTimesIn(d.ts, c.minT, c.maxT, t)
				return d.baseN + int64(k), d.baseSum + d.sum[k]
			}
		}
	}
	// From the day's start, not rs.minT: without raw samples a finest
	// cell counts in the bucket holding its start, which may lie before
	// the series' first sample.
	var a acc
	q.addRange(r, rs, top, floorTo(rs.minT, partitionMs), t, &a)
	return a.n, a.sum
}

// searchChunks returns the index of the first chunk of cs ending at or
// after t, guessing from the series' first and last times (minT, maxT)
// as if its chunks were of one length: reading the first and last chunk
// references to guess from cost two more cache misses an edge.
func searchChunks(cs []chunkRef, minT, maxT, t int64) int {
	n := len(cs)
	if n == 0 {
		return 0
	}
	g := 0
	if maxT > minT && t > minT {
		g = int((t - minT) * int64(n) / (maxT - minT + 1))
	}
	return searchNear(n, g, func(i int) bool { return cs[i].maxT < t })
}

// chunkBase sets the base of chunk i of rs (decodedChunk.baseN, baseSum)
// when it is known exactly: for the first chunk, and for a chunk that
// starts in a finest cell no earlier chunk reaches into, from the tiers
// (whole cells from the first cell's start up to that cell). A run that
// met another inside a cell, a series without tiers, or a damaged tier
// leaves it unset, and its edges are read from the tiers as before.
func (q *query) chunkBase(r *runFile, rs *runSeries, i int, d *decodedChunk) {
	if i == 0 {
		d.baseOK = true
		return
	}
	if int(rs.fine) >= numTiers || len(rs.tiers) == 0 {
		return
	}
	w := tierWidth[rs.fine]
	cs := floorTo(rs.chunks[i].minT, w)
	if rs.chunks[i-1].maxT >= cs {
		return
	}
	fails := q.fails
	var a acc
	q.addRange(r, rs, numTiers-1, floorTo(rs.minT, w), cs, &a)
	if q.fails != fails {
		return
	}
	d.baseN, d.baseSum, d.baseOK = a.n, a.sum, true
}

// addRange adds the samples of rs in [lo, hi) to a, using the cells of tier
// level that fit whole and finer tiers, then raw chunks, at the edges.
func (q *query) addRange(r *runFile, rs *runSeries, level int, lo, hi int64, a *acc) {
	if lo > rs.maxT || hi <= rs.minT || lo >= hi {
		return
	}
	if lo <= rs.minT && hi > rs.maxT {
		t := rs.total()
		a.merge(&t)
		return
	}
	if rs.fine == noTier || level < int(rs.fine) {
		q.addRaw(r, rs, lo, hi, a)
		return
	}
	if level == int(rs.fine) && len(rs.chunks) == 0 {
		// Raw retention dropped the samples: a finest cell counts whole in
		// the bucket holding its start.
		if cells, ok := q.tier(r, rs, level); ok {
			q.addCells(cells[searchCells(cells, lo):searchCells(cells, hi)], a)
		}
		return
	}
	w := tierWidth[level]
	fs := floorTo(lo+w-1, w)
	fe := floorTo(hi, w)
	if fs >= fe {
		q.addRange(r, rs, level-1, lo, hi, a)
		return
	}
	cells, ok := q.tier(r, rs, level)
	if !ok {
		q.addRaw(r, rs, lo, hi, a)
		return
	}
	if lo < fs {
		q.addRange(r, rs, level-1, lo, fs, a)
	}
	q.addCells(cells[searchCells(cells, fs):searchCells(cells, fe)], a)
	if fe < hi {
		q.addRange(r, rs, level-1, fe, hi, a)
	}
}

// addCells merges consecutive cells of one tier into a. Mean, sum and
// count need only their counts and sums: those are added in a loop and
// merged once, as a bucket edge of a long chart merges up to a dozen
// cells on each side.
func (q *query) addCells(cells []cell, a *acc) {
	if len(cells) == 0 {
		return
	}
	if !q.sumsOnly {
		for i := range cells {
			a.merge(&cells[i].acc)
		}
		return
	}
	var n int64
	var sum float64
	for i := range cells {
		n += cells[i].n
		sum += cells[i].sum
	}
	f, l := &cells[0], &cells[len(cells)-1]
	a.merge(&acc{n: n, sum: sum, firstK: f.firstK, first: f.first, lastK: l.lastK, last: l.last})
}

func (q *query) tier(r *runFile, rs *runSeries, level int) ([]cell, bool) {
	c, err := q.tiers[level].get(q.db.cache.tiers, blockKey{run: r, id: rs.id, index: uint32(level)},
		func() ([]cell, error) { return r.decodeTier(rs, level) })
	if err != nil {
		q.fail(err)
		return nil, false
	}
	return c, true
}

// addRaw adds the raw samples of rs in [lo, hi).
func (q *query) addRaw(r *runFile, rs *runSeries, lo, hi int64, a *acc) {
	cs := rs.chunks
	i := sort.Search(len(cs), func(k int) bool { return cs[k].maxT >= lo })
	for ; i < len(cs) && cs[i].minT < hi; i++ {
		d, ok := q.decode(r, rs, i)
		if !ok {
			continue
		}
		j := searchTimes(d.ts, lo)
		if q.sumsOnly {
			// Mean, sum and count need no scan: a range is two prefix sums.
			k := j + searchTimes(d.ts[j:], hi)
			if k > j {
				a.merge(&acc{n: int64(k - j), sum: d.sum[k] - d.sum[j], firstK: d.ts[j], first: d.vs[j], lastK: d.ts[k-1], last: d.vs[k-1]})
			}
			continue
		}
		for ; j < len(d.ts) && d.ts[j] < hi; j++ {
			a.addSample(d.ts[j], d.vs[j])
		}
	}
}

// decode returns chunk i of rs from the chunk cache, decoding it on a miss.
func (q *query) decode(r *runFile, rs *runSeries, i int) (*decodedChunk, bool) {
	d, err := q.chunk.get(q.db.cache.chunks, blockKey{run: r, id: rs.id, index: uint32(i)}, func() (*decodedChunk, error) {
		d := new(decodedChunk)
		if err := r.decodeChunk(&rs.chunks[i], d); err != nil {
			return nil, err
		}
		d.prefix()
		q.chunkBase(r, rs, i, d)
		return d, nil
	})
	if err != nil {
		q.fail(err)
		return nil, false
	}
	return d, true
}

// addSamples adds sorted samples to their buckets.
func (q *query) addSamples(ts []int64, vs []float64) {
	bb := q.bb
	if len(ts) == 0 {
		return
	}
	i := sort.Search(len(ts), func(k int) bool { return ts[k] >= bb.from })
	end := bb.from + bb.span
	if i == len(ts) || ts[i] >= end {
		return
	}
	b := bb.index(ts[i])
	for ; i < len(ts) && ts[i] < end; i++ {
		for ts[i] >= bb.b[b+1] {
			b++
		}
		q.accs[b].addSample(ts[i], vs[i])
	}
}

// Raw returns the stored samples of tag in [from, to) in time order, at
// most limit of them (all when limit <= 0).
func (db *DB) Raw(tag string, from, to int64, limit int) ([]model.Sample, error) {
	var out []model.Sample
	err := db.RawFunc(tag, from, to, limit, func(ts []int64, vs []float64, qs []model.Quality) {
		out = make([]model.Sample, len(ts))
		for i := range out {
			out[i] = model.Sample{T: ts[i], V: vs[i], Q: qs[i]}
		}
	})
	return out, err
}

// RawFunc is Raw handing the samples to fn, once, as three arrays of
// equal length (times, values, qualities) instead of a new slice: they
// are the store's, reused by the next read, so fn must copy what it
// keeps. A caller that turns samples into its own type (PromQL's points,
// a JSON answer) saves the copy Raw makes and leaves less garbage.
func (db *DB) RawFunc(tag string, from, to int64, limit int, fn func(ts []int64, vs []float64, qs []model.Quality)) error {
	id, err := db.checkWindow(tag, from, to)
	if err != nil {
		return err
	}
	if db.series.textID(id) {
		return fmt.Errorf("raw numbers of %q: %w (read it with RawText)", tag, ErrKind)
	}
	sc := rawScratches.Get().(*rawScratch)
	defer sc.release()
	q := &query{db: db, id: id}
	base := runInput{ts: sc.base.ts[:0], vs: sc.base.vs[:0], qs: sc.base.qs[:0]}
	db.mu.RLock()
	heads := db.appendHeadPieces(sc.heads[:0], id, from, to)
	extra := 0 // the head samples overlay appends
	for _, h := range heads {
		extra += len(h.ts)
	}
	db.forPartitions(from, to, nil, func(p int64, runs []*runFile, _ []runInput) bool {
		refs := daySeries(runs, id, from, to)
		// The answer's arrays are sized once: growing them by appends
		// copied the samples of a long window several times over.
		n := extra
		for _, x := range refs {
			n += x.s.countIn(from, to)
		}
		base.ts, base.vs, base.qs = slices.Grow(base.ts, n), slices.Grow(base.vs, n), slices.Grow(base.qs, n)
		for _, x := range refs {
			q.readRange(x.r, x.s, from, to, &base)
		}
		// Days come in time order: with nothing unflushed to merge, the
		// first limit samples are final.
		return limit <= 0 || len(heads) > 0 || len(base.ts) < limit
	})
	db.mu.RUnlock()
	base = overlayInto(base, heads, &sc.tmp)
	sc.base, sc.heads = base, heads
	if q.err != nil {
		db.log.Warn("query skipped damaged data", "tag", tag, "err", q.err)
	}
	n := len(base.ts)
	if limit > 0 && n > limit {
		n = limit
	}
	fn(base.ts[:n], base.vs[:n], base.qs[:n])
	return nil
}

// rawScratch holds the arrays of a raw read (the answer, the merge's
// second buffer, the head pieces) from one read to the next.
type rawScratch struct {
	base, tmp runInput
	heads     []runInput
}

var rawScratches = sync.Pool{New: func() any { return new(rawScratch) }}

// maxScratchSamples bounds the arrays a rawScratch keeps: a read of a
// long window hands its arrays to the collector rather than hold them
// for reads that need far less.
const maxScratchSamples = 1 << 16

// release returns sc to the pool, or leaves it to the collector when it
// holds more than maxScratchSamples samples.
func (sc *rawScratch) release() {
	n := cap(sc.base.ts) + cap(sc.tmp.ts)
	for _, h := range sc.heads[:cap(sc.heads)] {
		n += cap(h.ts)
	}
	if n > maxScratchSamples {
		return
	}
	rawScratches.Put(sc)
}

// readRange appends the samples of rs in [from, to). It takes the chunks
// it finds in the chunk cache but does not add those it decodes: a raw
// read copies every sample it reads, so decoding them again costs it
// little, while keeping them cost 25 bytes a sample for as long as the
// read is repeated (a dashboard showing the last minutes of a fast tag).
// The cache is for the bucket edges of aggregates.
func (q *query) readRange(r *runFile, rs *runSeries, from, to int64, out *runInput) {
	cs := rs.chunks
	i := sort.Search(len(cs), func(k int) bool { return cs[k].maxT >= from })
	for ; i < len(cs) && cs[i].minT < to; i++ {
		d, ok := q.db.cache.chunks.get(blockKey{run: r, id: rs.id, index: uint32(i)})
		if !ok {
			if err := r.decodeChunk(&cs[i], &q.scratch); err != nil {
				q.fail(err)
				continue
			}
			d = &q.scratch
		}
		if d.xs != nil || out.xs != nil {
			readTextRange(d, from, to, out)
			continue
		}
		for j, t := range d.ts {
			if t >= from && t < to {
				out.ts = append(out.ts, t)
				out.vs = append(out.vs, d.vs[j])
				out.qs = append(out.qs, model.Quality(d.qs[j]))
			}
		}
	}
}
