package forward

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"

	"github.com/pith-historian/pith/internal/model"
)

// natsKindHeader marks a message of text values (natsKindText); a message
// without it holds numbers (a batch) or a delete (Pith-Op).
const (
	natsKindHeader = "Pith-Kind"
	natsKindText   = "text"
)

// textBatchVersion is the version of the text batch encoding.
const textBatchVersion = 1

// EncodeTextBatch returns the encoding of text values sent at enq (Unix
// ms): the payload of a NATS message with header Pith-Kind: text. The
// layout is in docs/format/forward.md ("Text batch").
func EncodeTextBatch(enq int64, pts []model.TextPoint) []byte {
	tags := map[string]uint64{}
	var order []string
	for i := range pts {
		if _, ok := tags[pts[i].Tag]; !ok {
			tags[pts[i].Tag] = uint64(len(order))
			order = append(order, pts[i].Tag)
		}
	}
	dst := []byte{textBatchVersion}
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
		dst = append(dst, byte(p.Q))
		dst = binary.AppendUvarint(dst, uint64(len(p.Text)))
		dst = append(dst, p.Text...)
	}
	return dst
}

// DecodeTextBatch decodes a text batch, appending its values to dst.
func DecodeTextBatch(dst []model.TextPoint, b []byte) (int64, []model.TextPoint, error) {
	if len(b) < batchHeaderSize || b[0] != textBatchVersion {
		return 0, dst, fmt.Errorf("read text batch header: %w", ErrBadBatch)
	}
	enq := int64(binary.LittleEndian.Uint64(b[1:]))
	off := batchHeaderSize
	n, k := binary.Uvarint(b[off:])
	// Each value takes at least 4 bytes.
	if k <= 0 || n > uint64(len(b)-off)/4 {
		return 0, dst, fmt.Errorf("read text count: %w", ErrBadBatch)
	}
	off += k
	tags, off, err := decodeBatchTags(b, off)
	if err != nil {
		return 0, dst, err
	}
	ntags := uint64(len(tags))
	var prev int64
	for i := uint64(0); i < n; i++ {
		ti, k := binary.Uvarint(b[off:])
		if k <= 0 || ti >= ntags {
			return 0, dst, fmt.Errorf("read text %d tag: %w", i, ErrBadBatch)
		}
		off += k
		dt, k := binary.Varint(b[off:])
		if k <= 0 || off+k >= len(b) {
			return 0, dst, fmt.Errorf("read text %d time: %w", i, ErrBadBatch)
		}
		off += k
		q := model.Quality(b[off])
		off++
		l, k := binary.Uvarint(b[off:])
		if k <= 0 || l > model.MaxTextLen || l > uint64(len(b)-off-k) || q > model.QualityUncertain {
			return 0, dst, fmt.Errorf("read text %d value: %w", i, ErrBadBatch)
		}
		off += k
		raw := b[off : off+int(l)]
		off += int(l)
		if !utf8.Valid(raw) {
			return 0, dst, fmt.Errorf("read text %d value: %w: not UTF-8", i, ErrBadBatch)
		}
		prev += dt
		dst = append(dst, model.TextPoint{Tag: tags[ti], T: prev, Text: string(raw), Q: q})
	}
	if off != len(b) {
		return 0, dst, fmt.Errorf("read text batch: %w: %d trailing bytes", ErrBadBatch, len(b)-off)
	}
	return enq, dst, nil
}
