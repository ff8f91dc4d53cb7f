package store

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store/chunkenc"
	"github.com/pith-historian/pith/internal/store/vfs"
)

// blockRef locates a checksummed block in a run file.
type blockRef struct {
	off, len uint32
}

type chunkRef struct {
	minT, maxT int64
	n          int32
	text       bool // a chunk of a text series
	blockRef
}

type tierRef struct {
	n int32
	blockRef
}

// runSeries is the index entry of one series in a run. Every open run
// keeps one per series it holds, so a store of many tags and days holds
// many of them: the fields the index repeats (the last sample's time is
// maxT, the totals' count and ends are n, minT, maxT and lastV) are not
// stored twice, and the chunk and tier references of all series share one
// array per run (docs/scaling.md, "Idle memory per tag").
type runSeries struct {
	id    uint32
	fine  uint8
	lastQ model.Quality
	n     int64
	minT  int64
	maxT  int64
	lastV float64
	// sum, min, max and first are the totals over the run (total).
	sum, min, max, first float64
	lastText             string     // the value at maxT of a text series
	chunks               []chunkRef // shares the run's array
	tiers                []tierRef  // levels fine.. (tier), shares the run's array
}

// last returns the newest sample of the series in the run.
func (s *runSeries) last() model.Sample {
	return model.Sample{T: s.maxT, V: s.lastV, Q: s.lastQ}
}

// total returns the aggregate of the whole series in the run.
func (s *runSeries) total() acc {
	return acc{n: s.n, sum: s.sum, min: s.min, max: s.max, first: s.first, last: s.lastV, firstK: s.minT, lastK: s.maxT}
}

// tier returns the reference of tier level l, which is fine or coarser.
func (s *runSeries) tier(l int) *tierRef { return &s.tiers[l-int(s.fine)] }

// runFile is an open, immutable run. data is the memory-mapped file.
type runFile struct {
	path   string
	part   int64
	seq    uint64
	size   int64
	data   []byte
	mapped bool
	// A run in a pack (pack.go) is the bytes [base, base+size) of the
	// pack's file at path; mapping is what was mapped for it (data plus
	// the page-aligned bytes before it), and pack counts the pack's runs.
	base    int64
	mapping []byte
	pack    *packFile
	// parsed is what parseIndex read; openRun moves it to idx.
	parsed []runSeries
	// Read from the index once: whether a series with rollups still has
	// raw chunks here (hasRaw), whether a series holds text (runsHoldText).
	rawTiered, text bool
	// idx holds the index entries, by id, while they are in memory (see
	// index); touched is set by each use and cleared by dropIdleIndexes.
	idx     atomic.Pointer[[]runSeries]
	touched atomic.Bool
	idxMu   sync.Mutex // serialises reloads
	// Read from the index at open and kept when it is dropped: the
	// earliest and latest time of any series (lo > hi for a run of no
	// samples) and the samples in all, so that telling whether a day's
	// runs meet, and how large they are, needs no index while their
	// bounds do not overlap (a bulk load of 100,000 tags writes runs of
	// a few dozen minutes each, and their indexes are 40 MB).
	lo, hi, total int64
}

// index returns the run's index entries, reading them from the file again
// when dropIdleIndexes dropped them. A run whose index can no longer be
// read (the file was damaged after it was opened) answers no entries: its
// data is skipped, as a run unreadable at open is. Callers may keep the
// slice while they use it: a drop only forgets it.
func (r *runFile) index() []runSeries {
	if !r.touched.Load() {
		r.touched.Store(true)
	}
	if p := r.idx.Load(); p != nil {
		return *p
	}
	r.idxMu.Lock()
	defer r.idxMu.Unlock()
	if p := r.idx.Load(); p != nil {
		return *p
	}
	t := &runFile{path: r.path, size: r.size, data: r.data}
	raw, err := r.rawIndex()
	if err == nil {
		err = t.parseIndex(raw)
	}
	if err != nil {
		return nil
	}
	r.idx.Store(&t.parsed)
	return t.parsed
}

// rawIndex reads the run's index from its file again and returns it
// inflated.
func (r *runFile) rawIndex() ([]byte, error) {
	if r.data == nil {
		return nil, errors.New("run closed")
	}
	if !r.mapped {
		return r.findIndex(func(off, n int64) ([]byte, error) { return r.data[off : off+n], nil })
	}
	f, err := os.Open(r.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return r.findIndex(func(off, n int64) ([]byte, error) {
		b := make([]byte, n)
		_, err := f.ReadAt(b, r.base+off)
		return b, err
	})
}

// dropIndex forgets the index entries; the next index call reads them
// again. It returns how many entries were dropped.
func (r *runFile) dropIndex() int {
	if p := r.idx.Swap(nil); p != nil {
		return len(*p)
	}
	return 0
}

// dropLarge forgets the index entries when there are minDropEntries or
// more (smaller indexes stay: reading one again costs more than it
// weighs), and returns how many it dropped.
func (r *runFile) dropLarge() int {
	if p := r.idx.Load(); p != nil && len(*p) >= minDropEntries {
		return r.dropIndex()
	}
	return 0
}

// samples returns how many samples r holds.
func (r *runFile) samples() int64 { return r.total }

// openRun opens a run file: memory-mapped on the real filesystem, so that
// only the pages queries touch use memory; read whole on any other.
func openRun(fs vfs.FS, path string) (*runFile, error) {
	return openRunAt(fs, path, 0, -1)
}

// openRunAt opens the run held in bytes [base, base+size) of the file at
// path (a pack's run, pack.go); a negative size is the whole file.
func openRunAt(fs vfs.FS, path string, base, size int64) (*runFile, error) {
	return openRunIndexed(fs, path, base, size, nil)
}

// openRunIndexed is openRunAt; with written, the writer of the run just
// finished, its index is taken from the writer's memory rather than read
// back from the file and inflated (an eighth of a bulk load's time at
// 100,000 tags: every spill and merge opened what it had just written).
func openRunIndexed(fs vfs.FS, path string, base, size int64, written *runWriter) (*runFile, error) {
	r := &runFile{path: path, base: base, size: size}
	index := func(read func(off, n int64) ([]byte, error)) error {
		if written != nil {
			return r.writtenIndex(written)
		}
		return r.loadIndex(read)
	}
	var f interface {
		io.ReaderAt
		Close() error
	}
	var n int64
	var of *os.File
	if isOS(fs) {
		var err error
		if of, err = os.Open(path); err != nil {
			return nil, fmt.Errorf("open run: %w", err)
		}
		st, err := of.Stat()
		if err != nil {
			of.Close()
			return nil, fmt.Errorf("stat run: %w", err)
		}
		f, n = of, st.Size()
	} else {
		vf, err := vfs.Open(fs, path)
		if err != nil {
			return nil, fmt.Errorf("open run: %w", err)
		}
		if n, err = vf.Size(); err != nil {
			vf.Close()
			return nil, fmt.Errorf("stat run: %w", err)
		}
		f = vf
	}
	defer f.Close()
	if r.size < 0 {
		r.size = n - base
	}
	if base < 0 || base+r.size > n {
		return nil, &CorruptionError{File: path, Offset: base, Err: fmt.Errorf("run of %d bytes at %d is past the file's end (%d)", r.size, base, n)}
	}
	if r.size < runHeaderSize+2*runFooterSize {
		return nil, &CorruptionError{File: path, Offset: base, Err: errors.New("file too short")}
	}
	if of != nil {
		// The mapping starts at the page holding base.
		pg := base &^ int64(os.Getpagesize()-1)
		m, err := syscall.Mmap(int(of.Fd()), pg, int(base-pg+r.size), syscall.PROT_READ, syscall.MAP_SHARED)
		if err != nil {
			return nil, fmt.Errorf("map run: %w", err)
		}
		r.mapping, r.data, r.mapped = m, m[base-pg:], true
		// The footer and index are read, not touched through the mapping:
		// a store of a thousand days then costs no resident index pages.
		err = index(func(off, n int64) ([]byte, error) {
			b := make([]byte, n)
			_, err := f.ReadAt(b, base+off)
			return b, err
		})
		if err != nil {
			r.close()
			return nil, err
		}
		r.keepParsed()
		return r, nil
	}
	r.data = make([]byte, r.size)
	if _, err := f.ReadAt(r.data, base); err != nil && err != io.EOF {
		return nil, fmt.Errorf("open run: %w", err)
	}
	if err := index(func(off, n int64) ([]byte, error) { return r.data[off : off+n], nil }); err != nil {
		r.close()
		return nil, err
	}
	r.keepParsed()
	return r, nil
}

// writtenIndex parses the index entries w wrote, as they are in its memory.
func (r *runFile) writtenIndex(w *runWriter) error {
	r.part, r.seq = w.part, w.seq
	if err := r.parseEntries(&byteReader{b: w.index}, uint64(w.n)); err != nil {
		return &CorruptionError{File: r.path, Err: err}
	}
	return nil
}

func (r *runFile) keepParsed() {
	p := r.parsed
	r.parsed = nil
	r.lo, r.hi, r.total = math.MaxInt64, math.MinInt64, 0
	for i := range p {
		r.lo, r.hi = min(r.lo, p[i].minT), max(r.hi, p[i].maxT)
		r.total += p[i].n
	}
	r.idx.Store(&p)
}

func (r *runFile) close() {
	if r.mapped && r.data != nil {
		syscall.Munmap(r.mapping)
	}
	r.data, r.mapping = nil, nil
}

// loadIndex reads and parses the index (findIndex).
func (r *runFile) loadIndex(read func(off, n int64) ([]byte, error)) error {
	raw, err := r.findIndex(read)
	if err != nil {
		return err
	}
	if err := r.parseIndex(raw); err != nil {
		return &CorruptionError{File: r.path, Err: err}
	}
	return nil
}

// findIndex tries both footers and both index copies, and returns the
// first whose checksum holds, inflated.
func (r *runFile) findIndex(read func(off, n int64) ([]byte, error)) ([]byte, error) {
	var firstErr error
	for _, fo := range []int64{r.size - runFooterSize, r.size - 2*runFooterSize} {
		foot, err := read(fo, runFooterSize)
		if err != nil {
			return nil, fmt.Errorf("read run footer: %w", err)
		}
		if string(foot[28:]) != runFooterMagic || crc32c.Checksum(foot[:24]) != binary.LittleEndian.Uint32(foot[24:]) {
			if firstErr == nil {
				firstErr = &CorruptionError{File: r.path, Offset: fo, Err: errors.New("bad footer")}
			}
			continue
		}
		ln := int64(binary.LittleEndian.Uint32(foot[8:]))
		crc := binary.LittleEndian.Uint32(foot[12:])
		for _, off := range []int64{int64(binary.LittleEndian.Uint64(foot[0:])), int64(binary.LittleEndian.Uint64(foot[16:]))} {
			if off < runHeaderSize || off+ln > r.size {
				continue
			}
			idx, err := read(off, ln)
			if err != nil {
				return nil, fmt.Errorf("read run index: %w", err)
			}
			if crc32c.Checksum(idx) != crc {
				if firstErr == nil {
					firstErr = &CorruptionError{File: r.path, Offset: off, Err: errors.New("index checksum mismatch")}
				}
				continue
			}
			raw, err := inflateIndex(idx)
			if err != nil {
				return nil, &CorruptionError{File: r.path, Offset: off, Err: err}
			}
			return raw, nil
		}
	}
	return nil, firstErr
}

// maxIndexBytes bounds an inflated index, against a damaged length.
const maxIndexBytes = 1 << 30

func inflateIndex(idx []byte) ([]byte, error) {
	n, k := binary.Uvarint(idx)
	if k <= 0 || n > maxIndexBytes {
		return nil, errors.New("bad index length")
	}
	// The claimed length is trusted only as far as the data inflates;
	// room for it (up to 16 times the deflated bytes, more than an index
	// takes) spares the buffer's copies as it grows.
	var b bytes.Buffer
	b.Grow(int(min(n, 16*uint64(len(idx)))) + 1)
	m, err := io.Copy(&b, io.LimitReader(flate.NewReader(bytes.NewReader(idx[k:])), int64(n)+1))
	if err != nil {
		return nil, fmt.Errorf("inflate index: %w", err)
	}
	if uint64(m) != n {
		return nil, fmt.Errorf("inflate index: %d bytes, the index says %d", m, n)
	}
	return b.Bytes(), nil
}

type byteReader struct {
	b   []byte
	err error
}

func (br *byteReader) uvarint() uint64 {
	v, k := binary.Uvarint(br.b)
	if k <= 0 {
		br.fail()
		return 0
	}
	br.b = br.b[k:]
	return v
}

func (br *byteReader) varint() int64 {
	v, k := binary.Varint(br.b)
	if k <= 0 {
		br.fail()
		return 0
	}
	br.b = br.b[k:]
	return v
}

func (br *byteReader) f64() float64 {
	if len(br.b) < 8 {
		br.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(br.b))
	br.b = br.b[8:]
	return v
}

func (br *byteReader) byte1() byte {
	if len(br.b) < 1 {
		br.fail()
		return 0
	}
	v := br.b[0]
	br.b = br.b[1:]
	return v
}

func (br *byteReader) fail() {
	if br.err == nil {
		br.err = errors.New("index truncated")
	}
	br.b = nil
}

func (r *runFile) parseIndex(idx []byte) error {
	br := &byteReader{b: idx}
	r.part = br.varint()
	r.seq = br.uvarint()
	return r.parseEntries(br, br.uvarint())
}

// parseEntries reads the index's n entries from br.
func (r *runFile) parseEntries(br *byteReader, n uint64) error {
	if n > uint64(len(br.b)) {
		return errors.New("bad series count")
	}
	r.parsed = make([]runSeries, 0, n)
	// The chunk and tier references go to one array each, grown as
	// needed; the series' slices are set once they are complete, since
	// growing moves the arrays.
	type span struct{ c0, c1, t0, t1 int }
	spans := make([]span, 0, n)
	var chunks []chunkRef
	var tiers []tierRef
	for i := uint64(0); i < n; i++ {
		sp := span{c0: len(chunks), t0: len(tiers)}
		var s runSeries
		var err error
		if chunks, tiers, err = r.parseEntry(br, &s, chunks, tiers); err != nil {
			return err
		}
		if len(r.parsed) > 0 && r.parsed[len(r.parsed)-1].id >= s.id {
			return errors.New("series out of order")
		}
		sp.c1, sp.t1 = len(chunks), len(tiers)
		s.chunks, s.tiers = nil, nil
		r.parsed = append(r.parsed, s)
		spans = append(spans, sp)
	}
	// Exact copies: append's spare capacity would stay resident.
	chunks = append([]chunkRef(nil), chunks...)
	tiers = append([]tierRef(nil), tiers...)
	for i := range r.parsed {
		sp := spans[i]
		if sp.c1 > sp.c0 {
			r.parsed[i].chunks = chunks[sp.c0:sp.c1:sp.c1]
		}
		if sp.t1 > sp.t0 {
			r.parsed[i].tiers = tiers[sp.t0:sp.t1:sp.t1]
		}
	}
	return nil
}

// parseEntry reads one index entry from br into s, appending its chunk
// and tier references to chunks and tiers (s.chunks and s.tiers are the
// appended part, valid until the arrays grow again). It sets the run's
// rawTiered and text as it finds them.
func (r *runFile) parseEntry(br *byteReader, s *runSeries, chunks []chunkRef, tiers []tierRef) ([]chunkRef, []tierRef, error) {
	s.id = uint32(br.uvarint())
	s.n = int64(br.uvarint())
	s.minT = br.varint()
	s.maxT = br.varint()
	s.lastV = br.f64()
	s.lastQ = model.Quality(br.byte1())
	s.fine = br.byte1()
	s.sum, s.min, s.max, s.first = br.f64(), br.f64(), br.f64(), br.f64()
	s.lastText, s.tiers = "", nil
	nc := br.uvarint()
	if nc > uint64(len(br.b)) {
		return chunks, tiers, errors.New("bad chunk count")
	}
	c0 := len(chunks)
	chunks = append(growDouble(chunks, int(nc)), make([]chunkRef, nc)...)
	s.chunks = chunks[c0:]
	uoff := br.uvarint()
	if uoff < runHeaderSize || uoff > uint64(r.size) {
		return chunks, tiers, errors.New("chunk offset out of range")
	}
	off := int64(uoff)
	prevEnd := s.minT
	for j := range s.chunks {
		c := &s.chunks[j]
		c.minT = prevEnd + br.varint()
		c.maxT = c.minT + br.varint()
		prevEnd = c.maxT
		cn, cl := br.uvarint(), br.uvarint()
		if cn == 0 || cn > maxChunk || cl < 4 || cl > uint64(r.size) {
			return chunks, tiers, errors.New("chunk reference out of range")
		}
		c.n, c.off, c.len = int32(cn), uint32(off), uint32(cl)
		c.text = s.fine == fineText
		off += int64(cl)
		if off > r.size {
			return chunks, tiers, errors.New("chunk reference out of range")
		}
	}
	if s.fine == fineText {
		l := br.uvarint()
		if l > uint64(len(br.b)) || l > chunkenc.MaxText {
			return chunks, tiers, errors.New("bad last text")
		}
		s.lastText = string(br.b[:l])
		br.b = br.b[l:]
	} else if s.fine != noTier {
		if int(s.fine) >= numTiers {
			return chunks, tiers, errors.New("bad tier")
		}
		t0 := len(tiers)
		tiers = append(growDouble(tiers, numTiers-int(s.fine)), make([]tierRef, numTiers-int(s.fine))...)
		s.tiers = tiers[t0:]
		for l := int(s.fine); l < numTiers; l++ {
			t := s.tier(l)
			tn, tl := br.uvarint(), br.uvarint()
			if tn > uint64(partitionMs/tierWidth[l]) || tl < 4 || tl > uint64(r.size) {
				return chunks, tiers, errors.New("tier reference out of range")
			}
			t.n, t.off, t.len = int32(tn), uint32(off), uint32(tl)
			off += int64(tl)
			if off > r.size {
				return chunks, tiers, errors.New("tier reference out of range")
			}
		}
	}
	if br.err != nil {
		return chunks, tiers, br.err
	}
	r.rawTiered = r.rawTiered || s.fine != noTier && s.fine != fineText && nc > 0
	r.text = r.text || s.fine == fineText
	return chunks, tiers, nil
}

// growDouble makes room for n more elements in s, doubling its capacity
// when short: append grows a large slice by a quarter, and the arrays of
// an index of 100,000 series were copied many times over as it was read.
func growDouble[T any](s []T, n int) []T {
	if cap(s)-len(s) < n {
		s = slices.Grow(s, max(n, len(s)))
	}
	return s
}

// countIn returns at most how many samples of s lie in [from, to): those
// of the chunks that meet it.
func (s *runSeries) countIn(from, to int64) int {
	n := 0
	for i := range s.chunks {
		if c := &s.chunks[i]; c.maxT >= from && c.minT < to {
			n += int(c.n)
		}
	}
	return n
}

// find returns the index entry of series id, or nil.
func (r *runFile) find(id uint32) *runSeries {
	ss := r.index()
	i := sort.Search(len(ss), func(i int) bool { return ss[i].id >= id })
	if i < len(ss) && ss[i].id == id {
		return &ss[i]
	}
	return nil
}

// block returns the payload of a checksummed block.
func (r *runFile) block(b blockRef) ([]byte, error) {
	p := r.data[b.off : b.off+b.len]
	if len(p) < 4 || crc32c.Checksum(p[4:]) != binary.LittleEndian.Uint32(p) {
		return nil, &CorruptionError{File: r.path, Offset: int64(b.off), Err: errors.New("block checksum mismatch")}
	}
	return p[4:], nil
}

// decodedChunk holds one decoded chunk; buffers are reused between calls.
type decodedChunk struct {
	ts  []int64
	vs  []float64
	qs  []uint8
	xs  []string  // the values of a text chunk (vs then holds zeros)
	sum []float64 // prefix sums for queries: sum[i] = vs[0] + ... + vs[i-1]
	// baseN and baseSum are the count and sum of the run series' samples
	// before the chunk, when baseOK (see query.decode): a bucket edge in
	// the chunk is then one search and a prefix sum from the day's start.
	baseN   int64
	baseSum float64
	baseOK  bool
}

// prefix fills d.sum, so that the sum of any range is one subtraction.
func (d *decodedChunk) prefix() {
	d.sum = make([]float64, len(d.vs)+1)
	for i, v := range d.vs {
		d.sum[i+1] = d.sum[i] + v
	}
}

func (r *runFile) decodeChunk(c *chunkRef, d *decodedChunk) error {
	p, err := r.block(c.blockRef)
	if err != nil {
		return err
	}
	if c.text {
		return r.decodeTextChunk(c, p, d)
	}
	n := int(c.n)
	if d.ts, p, err = chunkenc.DecodeTimestamps(d.ts[:0], p, n); err == nil {
		for i := range d.ts {
			d.ts[i] += c.minT
		}
		if d.vs, p, err = chunkenc.DecodeFloats(d.vs[:0], p, n); err == nil {
			d.qs, _, err = chunkenc.DecodeQualities(d.qs[:0], p, n)
		}
	}
	if err != nil {
		return &CorruptionError{File: r.path, Offset: int64(c.off), Err: err}
	}
	return nil
}

func (r *runFile) decodeTier(s *runSeries, level int) ([]cell, error) {
	var sc tierScratch
	return r.decodeTierInto(&sc, s, level)
}

// decodeTierInto is decodeTier into the arrays of sc.
func (r *runFile) decodeTierInto(sc *tierScratch, s *runSeries, level int) ([]cell, error) {
	t := s.tier(level)
	p, err := r.block(t.blockRef)
	if err != nil {
		return nil, err
	}
	cells, err := sc.decode(p, int(t.n), r.part*partitionMs, tierWidth[level])
	if err != nil {
		return nil, &CorruptionError{File: r.path, Offset: int64(t.off), Err: err}
	}
	// A cell's first/last key must lie within its samples' times, or a
	// cell that begins before the series does here would order before
	// another run's samples in that cell: the first cell's key is the
	// series' first time.
	if len(cells) > 0 && cells[0].start < s.minT {
		cells[0].firstK, cells[0].lastK = s.minT, s.minT
	}
	return cells, nil
}

// readAll decodes every sample of series s, appending to in.
func (r *runFile) readAll(s *runSeries, in *runInput) error {
	var d decodedChunk
	for i := range s.chunks {
		if err := r.decodeChunk(&s.chunks[i], &d); err != nil {
			return err
		}
		if s.fine == fineText {
			if in.xs == nil {
				in.xs = []string{}
			}
			in.xs = append(in.xs, d.xs...)
		}
		in.ts = append(in.ts, d.ts...)
		in.vs = append(in.vs, d.vs...)
		for _, q := range d.qs {
			in.qs = append(in.qs, model.Quality(q))
		}
	}
	return nil
}
