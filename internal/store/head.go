package store

import (
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// headSeries holds one tag's unflushed samples in arrival order: sealed
// blocks, encoded as run chunks are (head_block.go), then a raw tail of at
// most headBlockSamples samples. Encoded, a sample costs a few bytes
// instead of the 17 of the raw arrays, so a head that holds ten minutes at
// 1,000 values/s stays small. While sorted is true the samples are
// strictly increasing in time; a late or repeated timestamp clears it and
// sortDedup restores the order, keeping the last written value of each
// timestamp.
type headSeries struct {
	blocks []headBlock
	// The tail: samples not yet sealed into a block. xs holds the values
	// of a text series (vs then holds zeros, so that code moving samples
	// around treats both kinds alike); nil for a numeric series.
	ts     []int64
	vs     []float64
	qs     []model.Quality
	xs     []string
	n      int   // samples in blocks and tail
	lastT  int64 // the time of the sample appended last
	sorted bool
	text   bool // a text series: its blocks hold text
	// raw keeps every sample in the tail (no blocks): the private head of
	// a bulk load, which is written out as soon as it is full and whose
	// staging must not pay for encoding.
	raw bool
	// early is how many samples short of headBlockSamples the first block
	// is sealed (sealStagger).
	early uint8
}

// headBlockSamples is how many samples a head series keeps raw before it
// encodes them into a block. Blocks of 256 compress nearly as well as run
// chunks (the column encodings work in groups of 128) while the raw tail
// of a busy tag stays under 5 KB.
const headBlockSamples = 256

// appendText adds a text sample and returns the bytes of the block it
// sealed (0 when none).
func (s *headSeries) appendText(t int64, x string, q model.Quality) int {
	s.push(t, 0, q)
	s.xs = append(s.xs, x)
	return s.sealIfFull()
}

// append adds a sample and returns the bytes of the block it sealed (0
// when none).
func (s *headSeries) append(t int64, v float64, q model.Quality) int {
	s.push(t, v, q)
	return s.sealIfFull()
}

// push adds a sample to the tail; a text sample's value follows in xs.
func (s *headSeries) push(t int64, v float64, q model.Quality) {
	if s.n > 0 && t <= s.lastT {
		s.sorted = false
	}
	if len(s.ts) == cap(s.ts) {
		s.grow()
	}
	s.ts = append(s.ts, t)
	s.vs = append(s.vs, v)
	s.qs = append(s.qs, q)
	s.lastT = t
	s.n++
}

// sealStagger spreads the seals of series written together over that
// many writes: a live batch holds one sample of each of 10,000 tags, so
// their tails filled at the same write, and that one commit encoded
// 10,000 blocks (2.56 M samples) holding the locks every other commit
// waits for (TestLiveCommitStall). A series' first block is sealed up to
// sealStagger-1 samples early, by its id; its later blocks are full.
const sealStagger = 64

// sealIfFull encodes a full tail into a block and returns its bytes (0
// when the tail is not full).
func (s *headSeries) sealIfFull() int {
	if s.raw || len(s.ts) < headBlockSamples-int(s.early) {
		return 0
	}
	s.seal()
	s.early = 0
	return len(s.blocks[len(s.blocks)-1].data)
}

// grow doubles the tail's capacity (up to a block): append's own growth
// slows to 1.25x for large slices, which copies a big raw head many times
// over.
func (s *headSeries) grow() {
	c := 2 * cap(s.ts)
	if c < 64 {
		c = 64
	}
	if !s.raw && c > headBlockSamples {
		c = headBlockSamples
	}
	ts := make([]int64, len(s.ts), c)
	copy(ts, s.ts)
	vs := make([]float64, len(s.vs), c)
	copy(vs, s.vs)
	qs := make([]model.Quality, len(s.qs), c)
	copy(qs, s.qs)
	s.ts, s.vs, s.qs = ts, vs, qs
}

// sortDedup orders the samples by time; of equal timestamps the one written
// last wins. An unsorted series is decoded whole, sorted and encoded again:
// late writes are rare, and a frozen head is sorted once.
func (s *headSeries) sortDedup() {
	if s.sorted {
		return
	}
	var in runInput
	s.readAll(&in)
	sort.Stable(byTime{&in})
	w := 0
	for i := range in.ts {
		if i+1 < len(in.ts) && in.ts[i+1] == in.ts[i] {
			continue // a later write of the same timestamp follows
		}
		in.ts[w], in.vs[w], in.qs[w] = in.ts[i], in.vs[i], in.qs[i]
		if in.xs != nil {
			in.xs[w] = in.xs[i]
		}
		w++
	}
	in.ts, in.vs, in.qs = in.ts[:w], in.vs[:w], in.qs[:w]
	if in.xs != nil {
		in.xs = in.xs[:w]
	}
	s.rebuild(&in)
}

// rebuild replaces the samples of s with in, which is sorted.
func (s *headSeries) rebuild(in *runInput) {
	s.blocks, s.n = nil, 0
	s.ts, s.vs, s.qs = s.ts[:0], s.vs[:0], s.qs[:0]
	if s.xs != nil {
		s.xs = s.xs[:0]
	}
	for i, t := range in.ts {
		if s.text {
			s.appendText(t, in.xs[i], in.qs[i])
		} else {
			s.append(t, in.vs[i], in.qs[i])
		}
	}
	s.sorted = true
}

type byTime struct{ s *runInput }

func (b byTime) Len() int           { return len(b.s.ts) }
func (b byTime) Less(i, j int) bool { return b.s.ts[i] < b.s.ts[j] }
func (b byTime) Swap(i, j int) {
	s := b.s
	s.ts[i], s.ts[j] = s.ts[j], s.ts[i]
	s.vs[i], s.vs[j] = s.vs[j], s.vs[i]
	s.qs[i], s.qs[j] = s.qs[j], s.qs[i]
	if s.xs != nil {
		s.xs[i], s.xs[j] = s.xs[j], s.xs[i]
	}
}

// readAll appends every sample of s to out, in arrival order.
func (s *headSeries) readAll(out *runInput) {
	s.read(math.MinInt64, math.MaxInt64, out)
}

// read appends the samples of s in [from, to) to out; they are in time
// order when s is sorted. It changes nothing in s, so a frozen head is
// read by many queries at once; out is the caller's own copy.
func (s *headSeries) read(from, to int64, out *runInput) {
	if s.text && out.xs == nil {
		out.xs = []string{}
	}
	var d decodedChunk
	for i := range s.blocks {
		b := &s.blocks[i]
		if b.maxT < from || b.minT >= to {
			continue
		}
		if err := b.decode(s.text, &d); err != nil {
			// Only this process wrote the block, from memory: a failed
			// decode is a bug, not damage.
			panic("store: decode head block: " + err.Error())
		}
		appendRange(out, d.ts, d.vs, d.qs, d.xs, from, to)
	}
	i, j := s.tailRange(from, to)
	for k := i; k < j; k++ {
		if t := s.ts[k]; t >= from && t < to {
			out.ts = append(out.ts, t)
			out.vs = append(out.vs, s.vs[k])
			out.qs = append(out.qs, s.qs[k])
			if s.text {
				out.xs = append(out.xs, s.xs[k])
			}
		}
	}
}

// tailRange returns the part of the tail that may hold samples in [from,
// to): found by binary search when s is sorted (a bulk load's raw head
// holds a million samples over many days, read a day at a time), else all
// of it.
func (s *headSeries) tailRange(from, to int64) (int, int) {
	if !s.sorted {
		return 0, len(s.ts)
	}
	i := sort.Search(len(s.ts), func(k int) bool { return s.ts[k] >= from })
	j := i + sort.Search(len(s.ts)-i, func(k int) bool { return s.ts[i+k] >= to })
	return i, j
}

// view returns the samples of s in [from, to) without copying them, when
// s is sorted and has no blocks (a raw head, or a short series); ok is
// false otherwise. The caller must not change them.
func (s *headSeries) view(from, to int64) (in runInput, ok bool) {
	if len(s.blocks) > 0 || !s.sorted {
		return runInput{}, false
	}
	i, j := s.tailRange(from, to)
	in = runInput{ts: s.ts[i:j], vs: s.vs[i:j], qs: s.qs[i:j]}
	if s.text {
		in.xs = s.xs[i:j]
	}
	return in, true
}

// count returns at most how many samples read(from, to) appends: those of
// the blocks and tail that meet [from, to), so that a reader sizes its
// arrays once instead of growing them by copies.
func (s *headSeries) count(from, to int64) int {
	n := 0
	for i := range s.blocks {
		if b := &s.blocks[i]; b.maxT >= from && b.minT < to {
			n += int(b.n)
		}
	}
	i, j := s.tailRange(from, to)
	return n + j - i
}

// appendRange appends the decoded samples in [from, to) to out.
func appendRange(out *runInput, ts []int64, vs []float64, qs []uint8, xs []string, from, to int64) {
	for j, t := range ts {
		if t >= from && t < to {
			out.ts = append(out.ts, t)
			out.vs = append(out.vs, vs[j])
			out.qs = append(out.qs, model.Quality(qs[j]))
			if xs != nil {
				out.xs = append(out.xs, xs[j])
			}
		}
	}
}

// days returns the day partitions s has samples in, in increasing order;
// s is sorted.
func (s *headSeries) days() []int64 {
	var out []int64
	add := func(p int64) {
		if len(out) == 0 || out[len(out)-1] != p {
			out = append(out, p)
		}
	}
	var d decodedChunk
	for i := range s.blocks {
		b := &s.blocks[i]
		if p0 := partitionOf(b.minT); p0 == partitionOf(b.maxT) {
			add(p0)
			continue
		}
		if err := b.decodeTimes(&d); err != nil {
			panic("store: decode head block: " + err.Error())
		}
		for _, t := range d.ts {
			add(partitionOf(t))
		}
	}
	for _, t := range s.ts {
		add(partitionOf(t))
	}
	return out
}

// bounds returns the first time and the newest sample (with its text for
// a text series) of a sorted, non-empty s.
func (s *headSeries) bounds() (first int64, last model.Sample, text string) {
	if len(s.blocks) > 0 {
		first = s.blocks[0].minT
	} else {
		first = s.ts[0]
	}
	if k := len(s.ts) - 1; k >= 0 {
		last = model.Sample{T: s.ts[k], V: s.vs[k], Q: s.qs[k]}
		if s.text {
			text = s.xs[k]
		}
		return first, last, text
	}
	var d decodedChunk
	if err := s.blocks[len(s.blocks)-1].decode(s.text, &d); err != nil {
		panic("store: decode head block: " + err.Error())
	}
	k := len(d.ts) - 1
	last = model.Sample{T: d.ts[k], V: d.vs[k], Q: model.Quality(d.qs[k])}
	if s.text {
		text = d.xs[k]
	}
	return first, last, text
}

// dropRange removes the samples in [from, to) and returns how many; s is
// sorted.
func (s *headSeries) dropRange(from, to int64) int {
	var in runInput
	s.readAll(&in)
	cut(&in, from, to)
	gone := s.n - len(in.ts)
	if gone > 0 {
		s.rebuild(&in)
	}
	return gone
}

// toText turns a numeric series into a text one: a numeric sample raced
// the first text of its tag (write.go refuses mixed kinds before the WAL;
// this is the rare race). Its numbers become empty texts.
func (s *headSeries) toText() {
	var in runInput
	s.readAll(&in)
	in.xs = make([]string, len(in.ts))
	sorted := s.sorted
	s.text, s.xs = true, []string{}
	s.rebuild(&in)
	s.sorted = sorted
}

// head is the in-memory part of the store. The active head takes applied
// writes under mu; a frozen head takes no more writes, is sorted by the
// flush (sortFrozen) and from then on read without locks.
type head struct {
	mu      sync.RWMutex
	series  []*headSeries // by series id; nil where the head has nothing
	samples int
	count   int // series that have samples here
	// bytes is the size of the encoded blocks its series sealed while it
	// took writes (headFull bounds it for heads of many series).
	bytes  int
	born   time.Time // when its first sample arrived
	frozen bool
	raw    bool // series keep their samples raw (a bulk load's private head)
	// pool gives a raw head the series of the head written before it
	// (recycle); nil: new series are allocated.
	pool *seriesPool
	// sorted is set once every series of a frozen head is sorted; until
	// then readers take mu and sort the series they read (getSorted).
	sorted atomic.Bool
}

func newHead() *head { return &head{} }

// newRawHead returns a head whose series are never encoded: a bulk load
// stages into it and writes it out as soon as it is full. Its series come
// from pool when it has some (pool may be nil).
func newRawHead(pool *seriesPool) *head {
	h := &head{raw: true, pool: pool}
	if pool != nil {
		h.series, pool.series = pool.series, nil
	}
	return h
}

// seriesPool keeps the series of a bulk load's private head once it is
// written, for the heads after it: a load of 100,000 tags fills a head
// with a few dozen samples of each tag, and allocating each one's arrays
// anew for every head was a tenth of the load's time, with the collector's
// work on top.
type seriesPool struct {
	free   []*headSeries // empty numeric series, their arrays kept
	series []*headSeries // an all-nil series table for the next head
}

// recycle takes the series of h, a written raw head that nothing reads
// any more, into the pool. Long tails are kept too: a load of one tag
// over years fills each head with one series of a million samples, whose
// arrays, grown by doubling for every head, were two thirds of what it
// allocated. The pool holds at most the arrays of one head, which the
// next head would otherwise allocate again.
func (p *seriesPool) recycle(h *head) {
	for id, s := range h.series {
		if s == nil {
			continue
		}
		h.series[id] = nil
		if s.text || s.blocks != nil {
			continue
		}
		*s = headSeries{ts: s.ts[:0], vs: s.vs[:0], qs: s.qs[:0], sorted: true, raw: true}
		p.free = append(p.free, s)
	}
	p.series, h.series = h.series, nil
}

// carry moves to h, an empty raw head, the samples at time t of the
// numeric series of from, a raw head, that are in time order and end
// there, when some of from's series end before t: points in time order
// filled from up to the middle of t's tags. A series left with no sample
// stays whole. Then every run of from ends before t where the next
// head's start, and telling the runs apart needs none of their indexes.
func (h *head) carry(from *head, t int64) {
	at := 0
	for _, s := range from.series {
		if s != nil && s.n > 0 && s.lastT == t {
			at++
		}
	}
	if at == 0 || at == from.count {
		return
	}
	for id, s := range from.series {
		if s == nil || s.text || !s.sorted || s.n < 2 || s.lastT != t {
			continue
		}
		k := len(s.ts) - 1 // sorted: only the last sample is at t
		d := h.seriesFor(uint32(id), false)
		d.push(s.ts[k], s.vs[k], s.qs[k])
		h.samples++
		s.ts, s.vs, s.qs = s.ts[:k], s.vs[:k], s.qs[:k]
		s.n--
		s.lastT = s.ts[k-1]
		from.samples--
	}
}

// seriesFor returns the series of id, created when missing; the caller
// holds h.mu for writing.
func (h *head) seriesFor(id uint32, text bool) *headSeries {
	if int(id) >= len(h.series) {
		n := make([]*headSeries, int(id)+1+len(h.series)/2)
		copy(n, h.series)
		h.series = n
	}
	s := h.series[id]
	if s == nil {
		if p := h.pool; p != nil && !text && len(p.free) > 0 {
			s = p.free[len(p.free)-1]
			p.free[len(p.free)-1] = nil
			p.free = p.free[:len(p.free)-1]
		} else {
			s = &headSeries{sorted: true, raw: h.raw, text: text}
		}
		s.early = uint8(id % sealStagger)
		if text {
			s.xs = []string{}
		}
		h.series[id] = s
		h.count++
	}
	return s
}

// appendLocked adds a sample; the caller holds h.mu for writing.
func (h *head) appendLocked(id uint32, t int64, v float64, q model.Quality, now func() time.Time) {
	s := h.seriesFor(id, false)
	if s.text {
		// A numeric sample raced the first text of the tag: it is kept,
		// as its text.
		h.bytes += s.appendText(t, strconv.FormatFloat(v, 'g', -1, 64), q)
	} else {
		h.bytes += s.append(t, v, q)
	}
	if h.samples == 0 {
		h.born = now()
	}
	h.samples++
}

// appendTextLocked adds a text sample; the caller holds h.mu for writing.
// It counts for 1 + len(x)/textWeight samples, so that HeadMaxSamples
// bounds the memory of text as it does that of numbers.
func (h *head) appendTextLocked(id uint32, t int64, x string, q model.Quality, now func() time.Time) {
	s := h.seriesFor(id, true)
	if !s.text {
		// A numeric sample raced the first text of the tag (write.go
		// refuses mixed kinds before the WAL; this is the rare race).
		s.toText()
	}
	h.bytes += s.appendText(t, x, q)
	if h.samples == 0 {
		h.born = now()
	}
	h.samples += 1 + len(x)/textWeight
}

// textWeight is how many bytes of text count as one more head sample: a
// raw numeric sample costs about 17 bytes of head memory.
const textWeight = 16

// size returns the sample count and when the first sample arrived.
func (h *head) size() (int, time.Time) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.samples, h.born
}

// fill returns the number of samples and of series in the head, and the
// bytes of the blocks they sealed.
func (h *head) fill() (samples, count, bytes int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.samples, h.count, h.bytes
}

// freeze marks the head as taking no more writes; sortFrozen then sorts
// it for readers without locks.
func (h *head) freeze() {
	h.mu.Lock()
	h.frozen = true
	h.mu.Unlock()
}

// sortFrozen sorts the series of a head rotated out of the write path
// (rotate no longer sorts it: with writes a little out of order, as
// concurrent commits of wall-clock stamps are, sorting a head of 10,000
// series took seconds under the locks every commit needs). It takes h.mu
// one series at a time, so a query meeting the head waits for one series
// at most; once done, the head is read without locks.
func (h *head) sortFrozen() {
	if h.sorted.Load() {
		return
	}
	for id := range h.series {
		h.mu.Lock()
		h.getSorted(uint32(id))
		h.mu.Unlock()
	}
	h.sorted.Store(true)
}

// getSorted returns the sorted samples of id; for the active head the
// caller holds h.mu for writing (sorting may be needed) and must copy what
// it keeps.
func (h *head) getSorted(id uint32) *headSeries {
	if int(id) >= len(h.series) {
		return nil
	}
	s := h.series[id]
	if s != nil && !s.sorted {
		s.sortDedup()
	}
	return s
}
