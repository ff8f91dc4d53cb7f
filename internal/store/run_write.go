package store

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/model"

	"golang.org/x/sys/unix"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// A run file holds the samples of many series for one day partition:
// checksummed chunk and tier blocks, then the index twice and the footer
// twice, so that one damaged byte costs at most one block. The layout is in
// docs/format/store.md.
const (
	runMagic       = "PITHRUN1"
	runFooterMagic = "PITHRUNE"
	runVersion     = 1
	runVersionText = 2 // a run holding text series (data directory format 3)
	runHeaderSize  = 16
	runFooterSize  = 36
)

// runInput is the sorted, deduplicated data of one series for a run.
type runInput struct {
	id uint32
	ts []int64
	vs []float64
	qs []model.Quality
	xs []string // the values of a text series (vs holds zeros); nil for numbers
}

// runWriter streams blocks to a new run file and builds its index.
type runWriter struct {
	fs    vfs.FS
	f     vfs.File
	w     *bufio.Writer
	off   int64
	part  int64
	seq   uint64
	index []byte
	n     int // series written
	buf   []byte
	scrI  []int64
	rel   []int64
	scrF  []float64
	qbuf  []uint8
	sw    seriesWriter // the series being written, reused
}

func runFileName(part int64, seq uint64) string {
	return fmt.Sprintf("p%d-%08d.run", part, seq)
}

// runBuffers keeps the write buffers of finished runs for the next runs,
// and indexDeflaters the index compressors: a bulk load of years writes a
// run a day, and a new buffer (256 KiB) and compressor (about 1 MiB) for
// each were most of what such a load allocated (1.5 GB for the standard
// feed's 1,096 days).
var (
	runBuffers     = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 256<<10) }}
	indexDeflaters = sync.Pool{New: func() any { w, _ := flate.NewWriter(io.Discard, flate.BestSpeed); return w }}
)

// createRun starts a run; text says whether it will hold text series
// (its header then says runVersionText).
func createRun(fs vfs.FS, dir string, part int64, seq uint64, text bool) (*runWriter, error) {
	f, err := fs.OpenFile(filepath.Join(dir, runFileName(part, seq)+".tmp"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create run: %w", err)
	}
	w := runBuffers.Get().(*bufio.Writer)
	w.Reset(f)
	rw := &runWriter{fs: fs, f: f, w: w, part: part, seq: seq}
	hdr := make([]byte, runHeaderSize)
	copy(hdr, runMagic)
	binary.LittleEndian.PutUint32(hdr[8:], runVersion)
	if text {
		binary.LittleEndian.PutUint32(hdr[8:], runVersionText)
	}
	rw.write(hdr)
	return rw, nil
}

func (rw *runWriter) write(b []byte) {
	rw.w.Write(b) // errors surface at Flush
	rw.off += int64(len(b))
}

// block writes a checksummed block and returns its offset and length
// (checksum included).
func (rw *runWriter) block(payload []byte) (uint64, uint64) {
	off := rw.off
	var c [4]byte
	binary.LittleEndian.PutUint32(c[:], crc32c.Checksum(payload))
	rw.write(c[:])
	rw.write(payload)
	return uint64(off), uint64(len(payload) + 4)
}

// add writes one series; series must come in increasing id order. With
// dropRaw, a series with rollup tiers keeps only them (raw retention).
func (rw *runWriter) add(in *runInput, dropRaw bool) {
	n := len(in.ts)
	if n == 0 {
		return
	}
	if in.xs != nil {
		rw.addText(in)
		return
	}
	w := rw.beginSeries(in.id, finestTier(n, in.ts[0], in.ts[n-1]), dropRaw)
	pushSamples(w, in.ts, in.vs, in.qs)
	w.finish()
}

// compressIndex deflates the index: its varints of times and lengths
// repeat a lot, and it is read once, when the run is opened. At
// BestSpeed: a bulk load of 100,000 tags writes an index of each in every
// spill and again in every merge, and the default level took 12% of its
// time (BestCompression three times that) for indexes 2% smaller, 0.5% of
// the store's bytes at 1,000 tags (BenchmarkImportTags).
//
// The index is given in pieces (the run's header fields, then its
// entries), deflated as one: the entries of a spill of 100,000 series
// are tens of megabytes, not copied again to be joined.
func compressIndex(pieces ...[]byte) []byte {
	n := 0
	for _, p := range pieces {
		n += len(p)
	}
	var b bytes.Buffer
	// Indexes deflate to a third or less; room for half spares the
	// buffer's copies as it grows.
	b.Grow(binary.MaxVarintLen64 + n/2)
	b.Write(binary.AppendUvarint(nil, uint64(n)))
	w := indexDeflaters.Get().(*flate.Writer)
	w.Reset(&b)
	for _, p := range pieces {
		w.Write(p)
	}
	w.Close()
	w.Reset(io.Discard) // not to keep b
	indexDeflaters.Put(w)
	return b.Bytes()
}

func appendF64(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// finish writes the index and footers, fsyncs (unless the caller syncs a
// batch of runs at once with syncFS) and renames the file into place. The
// caller fsyncs the directory.
func (rw *runWriter) finish(fsync bool) (string, error) {
	head := binary.AppendVarint(nil, rw.part)
	head = binary.AppendUvarint(head, rw.seq)
	head = binary.AppendUvarint(head, uint64(rw.n))
	idx := compressIndex(head, rw.index)
	crc := crc32c.Checksum(idx)
	off1 := rw.off
	rw.write(idx)
	off2 := rw.off
	rw.write(idx)
	foot := make([]byte, 0, runFooterSize)
	foot = binary.LittleEndian.AppendUint64(foot, uint64(off1))
	foot = binary.LittleEndian.AppendUint32(foot, uint32(len(idx)))
	foot = binary.LittleEndian.AppendUint32(foot, crc)
	foot = binary.LittleEndian.AppendUint64(foot, uint64(off2))
	foot = binary.LittleEndian.AppendUint32(foot, crc32c.Checksum(foot))
	foot = append(foot, runFooterMagic...)
	rw.write(foot)
	rw.write(foot)
	tmp := rw.f.Name()
	err := rw.w.Flush()
	rw.releaseBuffer()
	if err != nil {
		rw.abort()
		return "", fmt.Errorf("write run: %w", err)
	}
	if fsync {
		if err := rw.f.Sync(); err != nil {
			rw.abort()
			return "", fmt.Errorf("sync run: %w", err)
		}
	}
	if err := rw.f.Close(); err != nil {
		rw.fs.Remove(tmp)
		return "", fmt.Errorf("close run: %w", err)
	}
	final := tmp[:len(tmp)-len(".tmp")]
	if err := rw.fs.Rename(tmp, final); err != nil {
		rw.fs.Remove(tmp)
		return "", fmt.Errorf("rename run: %w", err)
	}
	return final, nil
}

// syncFS makes every file written under dir durable with one syncfs call,
// instead of an fsync per run: a bulk load of years writes a run per day.
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}

// releaseBuffer returns the write buffer to runBuffers, its bytes
// written or dropped: nothing is written after it.
func (rw *runWriter) releaseBuffer() {
	if rw.w == nil {
		return
	}
	rw.w.Reset(nil)
	runBuffers.Put(rw.w)
	rw.w = nil
}

func (rw *runWriter) abort() {
	rw.releaseBuffer()
	rw.f.Close()
	rw.fs.Remove(rw.f.Name())
}
