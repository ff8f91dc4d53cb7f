package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/ingest"
)

// gzipMagic starts every gzip stream; a body that starts with it is
// decompressed even without Content-Encoding, as curl --data-binary @x.gz
// sends it.
var gzipMagic = []byte{0x1f, 0x8b}

// errInflatedTooLarge is returned when a gzipped body expands past
// Options.MaxImportInflatedBytes.
var errInflatedTooLarge = errors.New("decompressed body too large")

// errNoText is the error of a text row for a store that keeps no text.
var errNoText = errors.New("text values are not supported by this store")

// errUnsupportedEncoding marks a Content-Encoding the import cannot read.
var errUnsupportedEncoding = errors.New("unsupported Content-Encoding")

// handleImport serves POST /api/v1/import: CSV rows tag,unix_ms,value
// streamed into one transaction, so memory stays bounded by one batch
// whatever the body size, and a bad row anywhere stores nothing.
func (s *Server) handleImport(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) {
		return
	}
	// Each import holds a parse buffer and a batch (about 3 MB) plus the
	// store's staging, so a small box serves a few at a time; the others
	// wait here with their bodies unread.
	select {
	case s.importSlots <- struct{}{}:
		defer func() { <-s.importSlots }()
	case <-r.Context().Done():
		writeError(w, http.StatusServiceUnavailable, "import cancelled while waiting for a slot")
		return
	}
	body := http.MaxBytesReader(w, r.Body, s.opts.MaxImportBytes)
	n, err := s.importBody(r.Context(), r.Header.Get("Content-Encoding"), body)
	if err != nil {
		s.importError(w, r, err)
		return
	}
	b := make([]byte, 0, 32)
	b = append(b, `{"points":`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, '}')
	writeJSON(w, http.StatusOK, b)
}

// bodyError marks an error reading the request body, as opposed to one from
// the store.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "read body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// storeError marks an error from the store.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// importBody parses body into one transaction and commits it. It returns
// the number of points stored.
func (s *Server) importBody(ctx context.Context, encoding string, body io.Reader) (int64, error) {
	src, release, err := s.decodeBody(encoding, body)
	if err != nil {
		return 0, err
	}
	defer release()

	cr := s.csv.Get().(*ingest.CSVReader)
	cr.Reset(src)
	defer func() {
		cr.Reset(nil)
		s.csv.Put(cr)
	}()
	batch := s.batches.Get().(*[]model.Point)
	defer func() {
		clear((*batch)[:cap(*batch)]) // drop tag strings so the pool pins nothing
		s.batches.Put(batch)
	}()

	tx := s.st.Begin()
	done := false
	defer func() {
		if !done {
			tx.Rollback()
		}
	}()
	var total int64
	for {
		pts, err := cr.Next((*batch)[:0], s.opts.ImportBatch)
		if err == io.EOF {
			break
		}
		if err != nil {
			var le *ingest.LineError
			if errors.As(err, &le) {
				return 0, err
			}
			return 0, &bodyError{err}
		}
		if err := tx.Add(pts); err != nil {
			var pe *model.PointError
			if errors.As(err, &pe) {
				// The store refused a row (too old for the retention, a
				// number for a text tag).
				return 0, &ingest.LineError{Line: cr.PointLine(pe.Index), Err: pe.Err}
			}
			return 0, &storeError{fmt.Errorf("stage points: %w", err)}
		}
		total += int64(len(pts))
		if texts := cr.Texts(); len(texts) > 0 {
			tt, ok := tx.(TextTx)
			if !ok {
				return 0, &ingest.LineError{Line: cr.TextLine(0), Err: errNoText}
			}
			if err := tt.AddText(texts); err != nil {
				var pe *model.PointError
				if errors.As(err, &pe) {
					return 0, &ingest.LineError{Line: cr.TextLine(pe.Index), Err: pe.Err}
				}
				return 0, &storeError{fmt.Errorf("stage text: %w", err)}
			}
			total += int64(len(texts))
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, &storeError{fmt.Errorf("commit import: %w", err)}
	}
	done = true
	return total, nil
}

// decodeBody returns the CSV text of body: as is, or gunzipped when
// Content-Encoding says gzip or the body starts with the gzip magic.
// release returns pooled state and must be called when done.
func (s *Server) decodeBody(encoding string, body io.Reader) (io.Reader, func(), error) {
	noop := func() {}
	gz := false
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		var head [2]byte
		n, err := io.ReadFull(body, head[:])
		if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
			return nil, noop, &bodyError{err}
		}
		gz = n == 2 && bytes.Equal(head[:], gzipMagic)
		body = io.MultiReader(bytes.NewReader(head[:n]), body)
	case "gzip", "x-gzip":
		gz = true
	default:
		return nil, noop, fmt.Errorf("%w %q (want gzip or none)", errUnsupportedEncoding, encoding)
	}
	if !gz {
		return body, noop, nil
	}
	zr, _ := s.gzips.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(body)
	} else {
		err = zr.Reset(body)
	}
	if err != nil {
		return nil, noop, &bodyError{fmt.Errorf("decode gzip: %w", err)}
	}
	release := func() { s.gzips.Put(zr) }
	return &capReader{r: zr, n: s.opts.MaxImportInflatedBytes}, release, nil
}

// capReader fails with errInflatedTooLarge once more than n bytes are read.
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n < 0 {
		return 0, errInflatedTooLarge
	}
	if int64(len(p)) > c.n+1 {
		p = p[:c.n+1]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	if c.n < 0 {
		return n, errInflatedTooLarge
	}
	if err != nil && err != io.EOF {
		err = fmt.Errorf("decode gzip: %w", err)
	}
	return n, err
}

// importError answers a failed import with the status its cause deserves.
func (s *Server) importError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		le *ingest.LineError
		mb *http.MaxBytesError
		se *storeError
	)
	switch {
	case errors.As(err, &le):
		writeLineError(w, le.Line, le.Err.Error())
	case errors.As(err, &mb):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body larger than %d bytes", mb.Limit))
	case errors.Is(err, errInflatedTooLarge):
		writeError(w, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("decompressed body larger than %d bytes", s.opts.MaxImportInflatedBytes))
	case errors.Is(err, errUnsupportedEncoding):
		writeError(w, http.StatusUnsupportedMediaType, err.Error())
	case errors.As(err, &se):
		status := writeErrStatus(err)
		if !errors.Is(err, context.Canceled) {
			s.log.Error("import failed", "remote", r.RemoteAddr, "err", err)
		}
		writeError(w, status, err.Error())
	default:
		writeError(w, http.StatusBadRequest, err.Error())
	}
}
