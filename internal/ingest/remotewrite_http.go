package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"

	"github.com/pith-historian/pith/internal/model"

	"github.com/golang/snappy"
)

// RemoteWriteOptions tune the Prometheus remote_write receiver.
type RemoteWriteOptions struct {
	MaxBodyBytes int64        // largest body, compressed and decoded (413 beyond)
	Gate         *TagGate     // cap on new tags; nil admits every tag
	Logger       *slog.Logger // where refused writes are logged at debug level
}

// DefaultRemoteWriteOptions returns the options Pith runs with.
func DefaultRemoteWriteOptions() RemoteWriteOptions {
	return RemoteWriteOptions{MaxBodyBytes: DefaultMaxBodyBytes, Logger: slog.Default()}
}

// RemoteWrite receives Prometheus remote_write 1.0 (snappy-compressed
// protobuf WriteRequest) on POST /api/v1/write. A series becomes the tag
// named by its metric name followed by its other label values in label
// name order (docs/design/0002-tag-names.md): up{instance="pi:9100",
// job="node"} is up.pi:9100.node, and up{instance="127.0.0.1:9100"} is
// up.127_0_0_1:9100. The series' labels are kept with the tag. NaN samples (Prometheus staleness
// markers) and infinities are skipped and counted in the
// X-Pith-Skipped-Samples header. A request is atomic: 204 once every
// sample is durable; 400 (Prometheus does not retry) for a request that
// cannot be decoded or names an illegal tag; 429 over the new-tag cap and
// 5xx for store failures (Prometheus retries both).
type RemoteWrite struct {
	sink Sink
	opts RemoteWriteOptions
	free chan *rwState
}

type rwState struct {
	body    bodyReader
	decoded []byte
	req     RWRequest
	pts     []model.Point
	namer   namer
	key     []byte
	// labels are the labels of the series new to namer in this request.
	labels pendingLabels
}

// NewRemoteWrite returns the handler writing to sink.
func NewRemoteWrite(sink Sink, opts RemoteWriteOptions) *RemoteWrite {
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &RemoteWrite{sink: sink, opts: opts, free: make(chan *rwState, 2*runtime.GOMAXPROCS(0))}
}

// ServeHTTP serves POST /api/v1/write.
func (h *RemoteWrite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method "+r.Method+" not allowed (want POST)", http.StatusMethodNotAllowed)
		return
	}
	if enc := r.Header.Get("Content-Encoding"); enc != "" && enc != "snappy" {
		http.Error(w, fmt.Sprintf("unsupported Content-Encoding %q (remote_write 1.0 sends snappy)", enc), http.StatusUnsupportedMediaType)
		return
	}
	var st *rwState
	select {
	case st = <-h.free:
	default:
		st = new(rwState)
	}
	defer h.put(st)
	// The body is snappy block format; read it raw (no gunzip).
	var err error
	limit := maxBody(r.Context(), h.opts.MaxBodyBytes)
	st.body.buf, err = readAllLimit(st.body.buf[:0], r.Body, limit)
	if err != nil {
		http.Error(w, "read body: "+err.Error(), writeStatus(w, err))
		return
	}
	pts, skipped, err := st.decode(st.body.buf, limit)
	if err == nil {
		err = commit(r.Context(), h.sink, h.opts.Gate, pts, &st.labels)
	}
	if err != nil {
		status := writeStatus(w, err)
		var de *rwDecodeError
		if errors.As(err, &de) {
			status = http.StatusBadRequest
		}
		h.opts.Logger.Debug("remote write refused", "err", err, "status", status)
		if status == http.StatusInsufficientStorage {
			// A 5xx: Prometheus keeps the samples and retries.
			writeJSONError(w, status, err.Error(), 0)
			return
		}
		http.Error(w, err.Error(), status)
		return
	}
	w.Header().Set("X-Pith-Points", strconv.Itoa(len(pts)))
	w.Header().Set("X-Pith-Skipped-Samples", strconv.Itoa(skipped))
	w.WriteHeader(http.StatusNoContent)
}

// put returns st to the free list, unless it grew past poolKeepBytes: a
// maximal request leaves a 32 MB body and a 32 MB decoded buffer behind.
func (h *RemoteWrite) put(st *rwState) {
	st.req.Reset()
	clear(st.pts)
	st.pts = st.pts[:0]
	st.labels.reset()
	if st.retained() > poolKeepBytes {
		return
	}
	select {
	case h.free <- st:
	default:
	}
}

// rwDecodeError is a request that cannot be read; it becomes 400.
type rwDecodeError struct{ err error }

func (e *rwDecodeError) Error() string { return e.err.Error() }
func (e *rwDecodeError) Unwrap() error { return e.err }

var nameLabel = []byte("__name__")

// decode turns a snappy-compressed WriteRequest into points.
func (st *rwState) decode(body []byte, limit int64) ([]model.Point, int, error) {
	n, err := snappy.DecodedLen(body)
	if err != nil {
		return nil, 0, &rwDecodeError{fmt.Errorf("decode snappy: %w", err)}
	}
	if int64(n) > limit {
		return nil, 0, errBodyTooLarge
	}
	if cap(st.decoded) < n {
		st.decoded = make([]byte, n)
	}
	dec, err := snappy.Decode(st.decoded[:cap(st.decoded)], body)
	if err != nil {
		return nil, 0, &rwDecodeError{fmt.Errorf("decode snappy: %w", err)}
	}
	st.req.Reset()
	if err := st.req.Unmarshal(dec); err != nil {
		return nil, 0, &rwDecodeError{err}
	}
	skipped := 0
	pts := st.pts[:0]
	st.labels.reset()
	for i := range st.req.Series {
		s := &st.req.Series[i]
		e, err := st.seriesName(s.Labels)
		if err != nil {
			return nil, 0, &rwDecodeError{fmt.Errorf("series %d: %w", i+1, err)}
		}
		name := e.name
		if !e.labelled && !st.labels.has(e) {
			ls, err := rwLabels(s.Labels)
			if err != nil {
				return nil, 0, &rwDecodeError{fmt.Errorf("series %d (%s): %w", i+1, name, err)}
			}
			st.labels.add(e, ls)
		}
		for _, smp := range s.Samples {
			if math.IsNaN(smp.Value) || math.IsInf(smp.Value, 0) {
				skipped++
				continue
			}
			pts = append(pts, model.Point{Tag: name, T: smp.Timestamp, V: smp.Value})
		}
	}
	st.pts = pts
	return pts, skipped, nil
}

// seriesName applies the rule: the metric name, then the other label
// values in label-name order, each one segment (a value's dots are not
// separators: AddValue). Names are cached by the raw label bytes.
func (st *rwState) seriesName(labels []RWLabel) (*nameEntry, error) {
	sortLabels(labels)
	key := st.key[:0]
	var metric []byte
	for _, l := range labels {
		key = append(append(append(append(key, l.Name...), 0), l.Value...), 0)
		if bytes.Equal(l.Name, nameLabel) {
			metric = l.Value
		}
	}
	st.key = key
	if e, ok := st.namer.lookupEntry(key); ok {
		return e, nil
	}
	if len(metric) == 0 {
		return nil, errors.New("no __name__ label")
	}
	nb := &st.namer
	nb.Reset()
	nb.AddValue(metric)
	for _, l := range labels {
		if !bytes.Equal(l.Name, nameLabel) {
			nb.AddValue(l.Value)
		}
	}
	return nb.rememberEntry(key)
}

// sortLabels orders labels by name, keeping the order of equal names.
// Prometheus sends them sorted, so the check comes first; MaxSeriesLabels
// bounds the sort.
func sortLabels(l []RWLabel) {
	if !slices.IsSortedFunc(l, compareLabels) {
		slices.SortStableFunc(l, compareLabels)
	}
}

func compareLabels(a, b RWLabel) int { return bytes.Compare(a.Name, b.Name) }
