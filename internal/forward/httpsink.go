package forward

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// Defaults and limits of the HTTP sink. See docs/format/forward.md.
const (
	HTTPImportPath     = "/api/v1/import" // appended to HTTPOptions.URL
	HTTPDeletePath     = "/api/v1/data"   // appended to HTTPOptions.URL for forwarded deletes
	HTTPBatchHeader    = "Pith-Batch-Id"  // the entry ids of a request, for an upstream that dedupes
	httpTimeout        = 60 * time.Second // one whole request, upload and answer
	httpDialTimeout    = 5 * time.Second  // TCP connect
	httpIdleConnTime   = 90 * time.Second // keep-alive of an idle connection
	httpMaxErrorBody   = 1 << 10          // bytes of an error answer quoted in the error
	httpGzipLevel      = gzip.BestSpeed   // the CSV compresses about 6x at this level
	httpMaxSiteTagsLen = 1 << 16          // cached tag names before the cache is cleared
)

// HTTPOptions configure an HTTPSink.
type HTTPOptions struct {
	URL  string // the other Pith: http(s)://host:port[/base]; the sink posts to <URL>/api/v1/import
	Key  string // API key with the write scope, sent as "Authorization: Bearer <Key>"; none when empty
	Site string // tags are imported as "<Site>.<tag>"; as they are when empty
}

// HTTPSink forwards batches to another Pith through its import API: one
// POST of gzipped CSV rows tag,unix_ms,value[,quality] per run of points
// (the
// quality only when not good). The import is atomic and stores the last
// point of a tag and time, so a resent batch stores the same data again
// and nothing twice.
//
// A 2xx answer confirms the batch. A 4xx answer refuses it permanently,
// except 408 and 429 (retried) and 401, 403 and 404, which say that the
// key or the URL is wrong rather than the batch, and are retried so that
// fixing the config delivers the backlog. 5xx answers and network errors
// are retried. Send and Close may be called from any goroutine; sends
// are serialised.
type HTTPSink struct {
	opts      HTTPOptions
	log       *slog.Logger
	target    string // the import URL
	deleteURL string // the delete URL
	skipped   atomic.Uint64
	client    *http.Client

	mu     sync.Mutex
	pts    []model.Point
	texts  []model.TextPoint
	names  map[string]string // tag -> "<site>.<tag>"
	body   bytes.Buffer      // gzipped CSV
	row    []byte
	zw     *gzip.Writer
	closed bool
}

var _ Sink = (*HTTPSink)(nil)

// NewHTTPSink returns a sink; it does not connect yet.
func NewHTTPSink(opts HTTPOptions, log *slog.Logger) (*HTTPSink, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("create http sink: url %q: want http(s)://host:port", opts.URL)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("create http sink: url %q: no query or fragment allowed", u.Redacted())
	}
	if strings.ContainsAny(opts.Key, "\r\n") {
		return nil, errors.New("create http sink: key holds a line break")
	}
	zw, _ := gzip.NewWriterLevel(io.Discard, httpGzipLevel) // the level is valid
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: httpDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:   true,
		MaxIdleConns:        2,
		IdleConnTimeout:     httpIdleConnTime,
		TLSHandshakeTimeout: 10 * time.Second,
		// The body is gzipped already; do not ask for a gzipped answer.
		DisableCompression: true,
	}
	return &HTTPSink{
		opts:      opts,
		log:       log,
		target:    strings.TrimSuffix(u.String(), "/") + HTTPImportPath,
		deleteURL: strings.TrimSuffix(u.String(), "/") + HTTPDeletePath,
		client:    &http.Client{Transport: tr, Timeout: httpTimeout},
		names:     make(map[string]string),
		zw:        zw,
	}, nil
}

// Target returns the URL batches are posted to.
func (s *HTTPSink) Target() string { return s.target }

// Send applies the entries of b in order and returns nil once the other
// Pith answered 2xx to each, that is once they are durable there: each run
// of point entries as one import (header Pith-Batch-Id: the run's entry
// ids, see docs/format/forward.md), each delete as DELETE /api/v1/data.
// A delete the other Pith's key may not make (401, 403) is skipped,
// counted (SkippedDeletes) and logged; one of an unknown tag (404) has
// nothing to delete.
func (s *HTTPSink) Send(ctx context.Context, b Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("send over http: sink closed")
	}
	for _, run := range runs(b.Entries) {
		if d := run[0].Delete; d != nil {
			if err := s.sendDelete(ctx, run[0].ID, d); err != nil {
				return err
			}
			continue
		}
		s.pts, s.texts = s.pts[:0], s.texts[:0]
		for i := range run {
			s.pts = append(s.pts, run[i].Points...)
			s.texts = append(s.texts, run[i].Texts...)
		}
		if err := s.sendPoints(ctx, runID(run), s.pts); err != nil {
			return err
		}
	}
	return nil
}

// sendPoints imports pts, the points of the entries id names.
func (s *HTTPSink) sendPoints(ctx context.Context, id string, pts []model.Point) error {
	if len(pts) == 0 && len(s.texts) == 0 {
		return nil
	}
	if err := s.encode(pts); err != nil {
		return fmt.Errorf("encode batch %s: %w", id, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.target, bytes.NewReader(s.body.Bytes()))
	if err != nil {
		return fmt.Errorf("post batch %s: %w", id, err)
	}
	req.Header.Set("Content-Type", "text/csv")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set(HTTPBatchHeader, id)
	code, err := s.do(req, "post batch "+id)
	if err != nil && httpPermanent(code) {
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	return err
}

// sendDelete applies the delete entry id.
func (s *HTTPSink) sendDelete(ctx context.Context, id string, d *Delete) error {
	q := url.Values{}
	q.Set("tag", siteTag(s.opts.Site, d.Tag))
	q.Set("from", strconv.FormatInt(d.From, 10))
	q.Set("to", strconv.FormatInt(d.To, 10))
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.deleteURL+"?"+q.Encode(), nil)
	if err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	req.Header.Set(HTTPBatchHeader, id)
	code, err := s.do(req, "delete "+id)
	switch {
	case err == nil, code == http.StatusNotFound:
		return nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		s.skipped.Add(1)
		s.log.Warn("upstream refused a forwarded delete; skipped (its key needs the admin scope)", "entry", id, "tag", d.Tag, "from", d.From, "to", d.To, "err", err)
		return nil
	case httpPermanent(code):
		return fmt.Errorf("%w: %w", ErrPermanent, err)
	}
	return err
}

// SkippedDeletes returns how many deletes the upstream's key could not
// make.
func (s *HTTPSink) SkippedDeletes() uint64 { return s.skipped.Load() }

// do sends req with the key and returns the status code and, unless it is
// 2xx, an error starting with what.
func (s *HTTPSink) do(req *http.Request, what string) (int, error) {
	if s.opts.Key != "" {
		req.Header.Set("Authorization", "Bearer "+s.opts.Key)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, httpMaxErrorBody))
	// Drain a little more so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp.StatusCode, nil
	}
	return resp.StatusCode, fmt.Errorf("%s: %s: %s", what, resp.Status, bytes.TrimSpace(msg))
}

// httpPermanent reports whether an answer with status code refuses the
// batch itself.
func httpPermanent(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
		return false
	}
	return code >= 400 && code < 500
}

// encode writes pts as gzipped CSV into s.body.
func (s *HTTPSink) encode(pts []model.Point) error {
	if len(s.names) > httpMaxSiteTagsLen {
		clear(s.names)
	}
	s.body.Reset()
	s.zw.Reset(&s.body)
	row := s.row[:0]
	for i := range pts {
		p := &pts[i]
		name, ok := s.names[p.Tag]
		if !ok {
			name = siteTag(s.opts.Site, p.Tag)
			s.names[p.Tag] = name
		}
		row = AppendCSVRow(row, name, p)
		if len(row) >= 32<<10 {
			if _, err := s.zw.Write(row); err != nil {
				return err
			}
			row = row[:0]
		}
	}
	for i := range s.texts {
		p := &s.texts[i]
		row = AppendCSVTextRow(row, siteTag(s.opts.Site, p.Tag), p)
		if len(row) >= 32<<10 {
			if _, err := s.zw.Write(row); err != nil {
				return err
			}
			row = row[:0]
		}
	}
	if _, err := s.zw.Write(row); err != nil {
		return err
	}
	s.row = row[:0]
	return s.zw.Close()
}

// AppendCSVTextRow appends the import row of a text value under the name
// tag: the text in double quotes, a quote inside doubled.
func AppendCSVTextRow(dst []byte, tag string, p *model.TextPoint) []byte {
	dst = append(dst, tag...)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, p.T, 10)
	dst = append(dst, ',', '"')
	for i := 0; i < len(p.Text); i++ {
		if p.Text[i] == '"' {
			dst = append(dst, '"')
		}
		dst = append(dst, p.Text[i])
	}
	dst = append(dst, '"')
	if p.Q != model.QualityGood {
		dst = append(dst, ',')
		dst = append(dst, p.Q.String()...)
	}
	return append(dst, '\n')
}

// AppendCSVRow appends the import row of p under the name tag:
// "tag,unix_ms,value\n", or "tag,unix_ms,value,quality\n" when the
// quality is not good. Values are written in the shortest form that
// reads back exactly.
func AppendCSVRow(dst []byte, tag string, p *model.Point) []byte {
	dst = append(dst, tag...)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, p.T, 10)
	dst = append(dst, ',')
	dst = strconv.AppendFloat(dst, p.V, 'g', -1, 64)
	if p.Q != model.QualityGood {
		dst = append(dst, ',')
		dst = append(dst, p.Q.String()...)
	}
	return append(dst, '\n')
}

// Close releases idle connections; later sends fail.
func (s *HTTPSink) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.client.CloseIdleConnections()
}
