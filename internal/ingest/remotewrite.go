package ingest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// RWLabel is one label of a remote_write series; Name and Value point into
// the decoded request.
type RWLabel struct {
	Name, Value []byte
}

// RWSample is one sample of a remote_write series.
type RWSample struct {
	Value     float64
	Timestamp int64 // Unix milliseconds
}

// RWSeries is one TimeSeries of a WriteRequest.
type RWSeries struct {
	Labels  []RWLabel
	Samples []RWSample
}

// RWRequest is a decoded Prometheus remote_write 1.0 WriteRequest
// (prompb): only labels and float samples are read; exemplars, native
// histograms and metadata are skipped. Reuse one RWRequest (Reset,
// Unmarshal): once warm it decodes without allocating. The series point
// into the buffer given to Unmarshal. Not safe for concurrent use.
type RWRequest struct {
	Series []RWSeries

	labels  []RWLabel
	samples []RWSample
}

// Reset forgets the series, keeping the memory.
func (rq *RWRequest) Reset() {
	clear(rq.Series)
	rq.Series = rq.Series[:0]
	clear(rq.labels)
	rq.labels = rq.labels[:0]
	rq.samples = rq.samples[:0]
}

var (
	errTruncated = errors.New("truncated protobuf")
	errVarint    = errors.New("bad varint")
)

// pbField reads one field header and returns the field number, the wire
// type and the bytes after the header.
func pbField(b []byte) (num uint64, typ byte, rest []byte, err error) {
	k, n := binary.Uvarint(b)
	if n <= 0 {
		return 0, 0, nil, errVarint
	}
	return k >> 3, byte(k & 7), b[n:], nil
}

// pbSkip skips a value of wire type typ and returns the bytes after it;
// for a length-delimited value it also returns the value.
func pbSkip(b []byte, typ byte) (val, rest []byte, err error) {
	switch typ {
	case 0: // varint
		_, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, nil, errVarint
		}
		return b[:n], b[n:], nil
	case 1: // fixed64
		if len(b) < 8 {
			return nil, nil, errTruncated
		}
		return b[:8], b[8:], nil
	case 2: // length-delimited
		l, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, nil, errVarint
		}
		if l > uint64(len(b)-n) {
			return nil, nil, errTruncated
		}
		return b[n : n+int(l)], b[n+int(l):], nil
	case 5: // fixed32
		if len(b) < 4 {
			return nil, nil, errTruncated
		}
		return b[:4], b[4:], nil
	}
	return nil, nil, fmt.Errorf("unsupported protobuf wire type %d", typ)
}

// Unmarshal decodes a WriteRequest (already snappy-decoded).
func (rq *RWRequest) Unmarshal(b []byte) error {
	for len(b) > 0 {
		num, typ, rest, err := pbField(b)
		if err != nil {
			return fmt.Errorf("decode WriteRequest: %w", err)
		}
		val, rest, err := pbSkip(rest, typ)
		if err != nil {
			return fmt.Errorf("decode WriteRequest field %d: %w", num, err)
		}
		b = rest
		if num != 1 || typ != 2 {
			continue // metadata and unknown fields
		}
		if len(rq.Series) == MaxRequestSeries {
			return fmt.Errorf("decode WriteRequest: more than %d series (MaxRequestSeries)", MaxRequestSeries)
		}
		if err := rq.series(val); err != nil {
			return fmt.Errorf("decode series %d: %w", len(rq.Series)+1, err)
		}
	}
	return nil
}

func (rq *RWRequest) series(b []byte) error {
	l0, s0 := len(rq.labels), len(rq.samples)
	for len(b) > 0 {
		num, typ, rest, err := pbField(b)
		if err != nil {
			return err
		}
		val, rest, err := pbSkip(rest, typ)
		if err != nil {
			return err
		}
		b = rest
		switch {
		case num == 1 && typ == 2:
			if len(rq.labels)-l0 == MaxSeriesLabels {
				return fmt.Errorf("more than %d labels (MaxSeriesLabels)", MaxSeriesLabels)
			}
			l, err := pbLabel(val)
			if err != nil {
				return fmt.Errorf("label: %w", err)
			}
			if len(l.Name) > MaxKeyLen {
				return fmt.Errorf("label name of %d bytes is longer than the limit of %d (MaxKeyLen)", len(l.Name), MaxKeyLen)
			}
			rq.labels = append(rq.labels, l)
		case num == 2 && typ == 2:
			s, err := pbSample(val)
			if err != nil {
				return fmt.Errorf("sample: %w", err)
			}
			rq.samples = append(rq.samples, s)
		}
	}
	rq.Series = append(rq.Series, RWSeries{
		Labels:  rq.labels[l0:len(rq.labels):len(rq.labels)],
		Samples: rq.samples[s0:len(rq.samples):len(rq.samples)],
	})
	return nil
}

func pbLabel(b []byte) (RWLabel, error) {
	var l RWLabel
	for len(b) > 0 {
		num, typ, rest, err := pbField(b)
		if err != nil {
			return l, err
		}
		val, rest, err := pbSkip(rest, typ)
		if err != nil {
			return l, err
		}
		b = rest
		if typ != 2 {
			continue
		}
		switch num {
		case 1:
			l.Name = val
		case 2:
			l.Value = val
		}
	}
	return l, nil
}

func pbSample(b []byte) (RWSample, error) {
	var s RWSample
	for len(b) > 0 {
		num, typ, rest, err := pbField(b)
		if err != nil {
			return s, err
		}
		val, rest, err := pbSkip(rest, typ)
		if err != nil {
			return s, err
		}
		b = rest
		switch {
		case num == 1 && typ == 1:
			s.Value = math.Float64frombits(binary.LittleEndian.Uint64(val))
		case num == 2 && typ == 0:
			u, _ := binary.Uvarint(val)
			s.Timestamp = int64(u) // int64 is encoded as its two's complement
		}
	}
	return s, nil
}
