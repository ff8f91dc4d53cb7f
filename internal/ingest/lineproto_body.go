package ingest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

// Sink is where every push input puts its points. *store.DB satisfies it;
// the lead may put the tag table in front of it.
type Sink interface {
	// Write stores pts atomically (all or nothing) and returns once they
	// are durable. It is called from many goroutines at once; pts is not
	// kept after it returns. A *model.PointError names a refused point.
	Write(ctx context.Context, pts []model.Point) error
}

var _ Sink = (*store.DB)(nil)

// TextSink is a Sink that also stores text: line-protocol string fields
// become text tags when the sink implements it (otherwise they are
// skipped and counted). WriteMixed stores numbers and text atomically; a
// *model.PointError's Index counts the numbers first, then the text.
type TextSink interface {
	WriteMixed(ctx context.Context, pts []model.Point, texts []model.TextPoint) error
}

var _ TextSink = (*store.DB)(nil)

// DefaultMaxBodyBytes bounds a request body, compressed or not, for the
// HTTP push inputs.
const DefaultMaxBodyBytes = 32 << 20

// errBodyTooLarge is returned when a body, or what it inflates to, passes
// the limit; it becomes HTTP 413.
var errBodyTooLarge = errors.New("request body too large")

// bodyError is a body that cannot be read as sent: broken gzip, an
// encoding we do not speak, a connection cut mid-body. It is the client's
// fault and becomes HTTP 400 (415 for the encoding).
type bodyError struct {
	msg         string
	unsupported bool // Content-Encoding is not gzip or identity
}

func (e *bodyError) Error() string { return e.msg }

// bodyReader reads whole request bodies into a reusable buffer, inflating
// gzip, within a byte limit. Line protocol and remote_write need the whole
// body: both are parsed in one piece and stored atomically.
type bodyReader struct {
	buf      []byte // the body as sent
	inflated []byte // the body after gunzip
	gz       *gzip.Reader
}

var gzipMagic = []byte{0x1f, 0x8b}

// read returns the body of r, inflated when Content-Encoding says gzip (or
// the bytes start with the gzip magic), at most limit bytes either way. The
// slice is valid until the next read.
func (b *bodyReader) read(r *http.Request, limit int64) ([]byte, error) {
	var err error
	b.buf, err = readAllLimit(b.buf[:0], r.Body, limit)
	if err != nil {
		if errors.Is(err, errBodyTooLarge) {
			return nil, err
		}
		return nil, &bodyError{msg: "read body: " + err.Error()}
	}
	enc := r.Header.Get("Content-Encoding")
	switch {
	case enc == "gzip" || (enc == "" && bytes.HasPrefix(b.buf, gzipMagic)):
	case enc == "" || enc == "identity":
		return b.buf, nil
	default:
		return nil, &bodyError{msg: "unsupported Content-Encoding " + strconv.Quote(enc) + " (want gzip or none)", unsupported: true}
	}
	src := bytes.NewReader(b.buf)
	if b.gz == nil {
		if b.gz, err = gzip.NewReader(src); err != nil {
			b.gz = nil
			return nil, &bodyError{msg: "read gzip body: " + err.Error()}
		}
	} else if err = b.gz.Reset(src); err != nil {
		return nil, &bodyError{msg: "read gzip body: " + err.Error()}
	}
	out, err := readAllLimit(b.inflated[:0], b.gz, limit)
	if err != nil {
		if errors.Is(err, errBodyTooLarge) {
			return nil, err
		}
		return nil, &bodyError{msg: "read gzip body: " + err.Error()}
	}
	b.inflated = out
	return out, nil
}

// readAllLimit appends everything r holds to dst, refusing more than limit
// bytes.
func readAllLimit(dst []byte, r io.Reader, limit int64) ([]byte, error) {
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, make([]byte, max(4096, len(dst)))...)[:len(dst)]
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if int64(len(dst)) > limit {
			return nil, errBodyTooLarge
		}
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// commit admits pts through the tag gate and writes them.
func commit(ctx context.Context, sink Sink, gate *TagGate, pts []model.Point, labels *pendingLabels) error {
	if len(pts) == 0 {
		return nil
	}
	if err := gate.Admit(pts); err != nil {
		return err
	}
	// Labels first: a point is never acknowledged without its tag's
	// labels. Labels stored for a write that then fails stay with their
	// tags, which is what the next attempt sets again.
	if err := setLabels(ctx, sink, labels); err != nil {
		return err
	}
	if err := sink.Write(ctx, pts); err != nil {
		return err
	}
	if labels != nil {
		labels.done()
	}
	return nil
}

// commitMixed admits the tags of numbers and text through the gate and
// writes them together, atomically.
func commitMixed(ctx context.Context, sink TextSink, gate *TagGate, pts []model.Point, texts []model.TextPoint, labels *pendingLabels) error {
	if err := gate.Admit(pts); err != nil {
		return err
	}
	if err := gate.AdmitText(texts); err != nil {
		return err
	}
	if err := setLabels(ctx, sink, labels); err != nil {
		return err
	}
	if err := sink.WriteMixed(ctx, pts, texts); err != nil {
		return err
	}
	if labels != nil {
		labels.done()
	}
	return nil
}

// writeStatus picks the HTTP status for an error of commit or of reading
// a body, and sets Retry-After for the tag cap.
func writeStatus(w http.ResponseWriter, err error) int {
	var tooMany *TooManyNewTagsError
	var pe *model.PointError
	var le *LineError
	var be *bodyError
	switch {
	case errors.As(err, &be):
		if be.unsupported {
			return http.StatusUnsupportedMediaType
		}
		return http.StatusBadRequest
	case errors.As(err, &tooMany):
		w.Header().Set("Retry-After", strconv.Itoa(int((tooMany.RetryAfter+time.Second-1)/time.Second)))
		return http.StatusTooManyRequests
	case errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.As(err, &pe), errors.As(err, &le):
		return http.StatusBadRequest
	case store.IsDiskFull(err):
		return http.StatusInsufficientStorage
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, store.ErrClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// writeJSONError answers {"error": msg[, "line": n]} with the status.
func writeJSONError(w http.ResponseWriter, status int, msg string, line int) {
	body := struct {
		Error string `json:"error"`
		Line  int    `json:"line,omitempty"`
	}{msg, line}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
