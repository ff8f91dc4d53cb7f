// Package forward moves what the store committed to other engines: the
// Forwarder, which reads a store follower and acknowledges it only after
// the upstream confirmed, the sinks (NATS JetStream, PostgreSQL, MQTT,
// another Pith over HTTP), and the central consumer of JetStream.
//
// The batch encoding (the NATS message payload) and what each sink sends
// are documented in docs/format/forward.md.
package forward

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/pith-historian/pith/internal/model"
)

// Format constants. See docs/format/forward.md.
const (
	batchVersion    = 1    // the batch format version this code writes and reads
	batchHeaderSize = 9    // version byte + enqueue time
	maxTagLen       = 1024 // bytes of the longest tag name a batch may carry
)

// ErrBadBatch is wrapped by every decoding error of a batch.
var ErrBadBatch = errors.New("bad batch")

// appendBatch appends the encoding of pts, enqueued at enq (Unix ms), to
// dst. Tag names are written once per batch in a table, so that a batch of
// many samples of few tags costs about 11 bytes per point.
func appendBatch(dst []byte, enq int64, pts []model.Point, tags map[string]uint64, order []string) []byte {
	clear(tags)
	order = order[:0]
	for i := range pts {
		if _, ok := tags[pts[i].Tag]; !ok {
			tags[pts[i].Tag] = uint64(len(order))
			order = append(order, pts[i].Tag)
		}
	}
	dst = append(dst, batchVersion)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(enq))
	dst = binary.AppendUvarint(dst, uint64(len(pts)))
	dst = binary.AppendUvarint(dst, uint64(len(order)))
	for _, t := range order {
		dst = binary.AppendUvarint(dst, uint64(len(t)))
		dst = append(dst, t...)
	}
	var prev int64
	for i := range pts {
		p := &pts[i]
		dst = binary.AppendUvarint(dst, tags[p.Tag])
		dst = binary.AppendVarint(dst, p.T-prev)
		prev = p.T
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.V))
		dst = append(dst, byte(p.Q))
	}
	return dst
}

// EncodeBatch returns the encoding of pts enqueued at enq (Unix ms), the
// payload a sink publishes.
func EncodeBatch(enq int64, pts []model.Point) []byte {
	return appendBatch(nil, enq, pts, map[string]uint64{}, nil)
}

// batchHeader returns the enqueue time and point count of an encoded
// batch without decoding the points.
func batchHeader(b []byte) (enq int64, n int, err error) {
	if len(b) < batchHeaderSize || b[0] != batchVersion {
		return 0, 0, fmt.Errorf("read batch header: %w", ErrBadBatch)
	}
	enq = int64(binary.LittleEndian.Uint64(b[1:]))
	cnt, k := binary.Uvarint(b[batchHeaderSize:])
	if k <= 0 || cnt > uint64(len(b)) {
		return 0, 0, fmt.Errorf("read batch point count: %w", ErrBadBatch)
	}
	return enq, int(cnt), nil
}

// DecodeBatch decodes an encoded batch, appending its points to dst. It
// returns the enqueue time (Unix ms) and the points. Tag names are shared
// by the points of one tag, so a batch costs one string per tag.
func DecodeBatch(dst []model.Point, b []byte) (int64, []model.Point, error) {
	enq, n, err := batchHeader(b)
	if err != nil {
		return 0, dst, err
	}
	off := batchHeaderSize
	_, k := binary.Uvarint(b[off:])
	off += k
	tags, off, err := decodeBatchTags(b, off)
	if err != nil {
		return 0, dst, err
	}
	ntags := uint64(len(tags))
	// Each point takes at least 11 bytes; checking first keeps a lying
	// count from allocating.
	if n > (len(b)-off)/11 {
		return 0, dst, fmt.Errorf("read points: %w: %d points in %d bytes", ErrBadBatch, n, len(b)-off)
	}
	base := len(dst)
	dst = slices.Grow(dst, n)[:base+n]
	out := dst[base:]
	var prev int64
	for i := range out {
		ti, k := binary.Uvarint(b[off:])
		if k <= 0 || ti >= ntags {
			return 0, dst, fmt.Errorf("read point %d tag: %w", i, ErrBadBatch)
		}
		off += k
		dt, k := binary.Varint(b[off:])
		if k <= 0 || len(b)-off-k < 9 {
			return 0, dst, fmt.Errorf("read point %d time: %w", i, ErrBadBatch)
		}
		off += k
		prev += dt
		out[i] = model.Point{
			Tag: tags[ti],
			T:   prev,
			V:   math.Float64frombits(binary.LittleEndian.Uint64(b[off:])),
			Q:   model.Quality(b[off+8]),
		}
		off += 9
	}
	if off != len(b) {
		return 0, dst, fmt.Errorf("read batch end: %w: %d trailing bytes", ErrBadBatch, len(b)-off)
	}
	return enq, dst, nil
}

// decodeBatchTags reads a batch's tag table (a count, then each name with
// its length) at off and returns the names and the offset after them.
func decodeBatchTags(b []byte, off int) ([]string, int, error) {
	ntags, k := binary.Uvarint(b[off:])
	if k <= 0 || ntags > uint64(len(b)-off) {
		return nil, off, fmt.Errorf("read tag count: %w", ErrBadBatch)
	}
	off += k
	tags := make([]string, ntags)
	for i := range tags {
		l, k := binary.Uvarint(b[off:])
		if k <= 0 || l > maxTagLen || l > uint64(len(b)-off-k) {
			return nil, off, fmt.Errorf("read tag %d: %w", i, ErrBadBatch)
		}
		off += k
		tags[i] = string(b[off : off+int(l)])
		off += int(l)
	}
	return tags, off, nil
}
