package events

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

// S3Options configure an S3 uploader.
type S3Options struct {
	Endpoint  string // host:port of the S3-compatible service
	Secure    bool   // HTTPS
	Region    string // "" lets the client ask the service
	Bucket    string
	Prefix    string // prepended to each file's path ("site1/" gives site1/2026/11/22/...)
	AccessKey string
	SecretKey string
}

// S3 uploads sink files to an S3-compatible object store with single
// PUT requests signed with AWS Signature Version 4. It is the one S3 call
// Pith makes, so it is written here rather than linked from a general S3
// SDK (which brought 1.3 MB to the binary).
type S3 struct {
	o      S3Options
	client *http.Client
	now    func() time.Time // the signing clock (tests fix it)

	mu     sync.Mutex
	region string // o.Region, or the bucket's once asked
}

// S3 limits and retry policy.
const (
	s3MaxPutBytes  = 5 << 30 // the largest object one PUT may carry
	s3MaxAttempts  = 10      // tries of one request that the service refuses with 5xx or 429, or that fails in transit
	s3RetryUnit    = 200 * time.Millisecond
	s3RetryCap     = time.Second
	s3DefaultRgn   = "us-east-1"
	s3ErrBodyBytes = 4 << 10
)

// NewS3 returns an uploader for o. It does not contact the service.
func NewS3(o S3Options) (*S3, error) {
	if o.Endpoint == "" || strings.ContainsAny(o.Endpoint, "/?# ") {
		return nil, fmt.Errorf("s3 endpoint %q: want host or host:port", o.Endpoint)
	}
	if o.Bucket == "" {
		return nil, errors.New("s3: no bucket")
	}
	return &S3{o: o, client: &http.Client{}, now: time.Now, region: o.Region}, nil
}

// Upload puts r (size bytes) under prefix+key, with a Content-MD5 the
// service checks. r is read twice (hashes, then the request body) and
// again for each retry: a reader that cannot seek is held in memory.
func (s *S3) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	if size > s3MaxPutBytes {
		return fmt.Errorf("s3 put %s: %d bytes is more than one PUT carries (%d)", key, size, int64(s3MaxPutBytes))
	}
	rs, ok := r.(io.ReadSeeker)
	if !ok {
		b, err := io.ReadAll(io.LimitReader(r, size))
		if err != nil {
			return fmt.Errorf("s3 put %s: read: %w", key, err)
		}
		rs = bytes.NewReader(b)
	}
	md, sh := md5.New(), sha256.New()
	if n, err := io.Copy(io.MultiWriter(md, sh), io.LimitReader(rs, size)); err != nil || n != size {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("s3 put %s: read: %w", key, err)
	}
	region, err := s.bucketRegion(ctx)
	if err != nil {
		return err
	}
	ct := "application/gzip"
	if strings.HasSuffix(key, ".zst") {
		ct = "application/zstd"
	}
	hdr := http.Header{}
	hdr.Set("Content-Type", ct)
	hdr.Set("Content-MD5", base64.StdEncoding.EncodeToString(md.Sum(nil)))
	payload := hex.EncodeToString(sh.Sum(nil))
	return s.do(ctx, "PUT", s.o.Prefix+key, "", hdr, payload, region, func() (io.Reader, error) {
		_, err := rs.Seek(0, io.SeekStart)
		return io.LimitReader(rs, size), err
	}, size, nil)
}

// bucketRegion returns the configured region, or asks the service for
// the bucket's location once (as the S3 SDKs do).
func (s *S3) bucketRegion(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.region != "" {
		return s.region, nil
	}
	var loc struct {
		Region string `xml:",chardata"`
	}
	err := s.do(ctx, "GET", "", "location=", nil, emptySHA256, s3DefaultRgn, nil, 0, func(b []byte) error {
		return xml.Unmarshal(b, &loc)
	})
	var se *s3Error
	switch {
	case err == nil:
		s.region = strings.TrimSpace(loc.Region)
		if s.region == "" || s.region == "US" {
			s.region = s3DefaultRgn
		}
		if s.region == "EU" {
			s.region = "eu-west-1"
		}
	case errors.As(err, &se) && (se.status == http.StatusForbidden || se.status == http.StatusNotImplemented):
		// Credentials allowed to write may not read the location; the
		// SDKs assume the default region then.
		s.region = s3DefaultRgn
	default:
		return "", err
	}
	return s.region, nil
}

// emptySHA256 is the hex SHA-256 of an empty payload.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// s3Error is an answer of the service other than 2xx.
type s3Error struct {
	op, key string
	status  int
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func (e *s3Error) Error() string {
	msg := e.Code
	if e.Message != "" {
		msg += ": " + e.Message
	}
	if msg == "" {
		msg = http.StatusText(e.status)
	}
	return fmt.Sprintf("s3 %s %s: %d %s", e.op, e.key, e.status, msg)
}

// do sends one signed request for key in the bucket (key "" is the
// bucket itself), retrying what the service or the network may answer
// better later. body gives the request body afresh for each try; read,
// when set, gets the answer's body.
func (s *S3) do(ctx context.Context, method, key, query string, hdr http.Header, payload, region string,
	body func() (io.Reader, error), size int64, read func([]byte) error) error {
	u := s.objectURL(key)
	u.RawQuery = query
	var last error
	for attempt := range s3MaxAttempts {
		if attempt > 0 {
			wait := min(s3RetryUnit<<(attempt-1), s3RetryCap)
			select {
			case <-ctx.Done():
				return errors.Join(ctx.Err(), last)
			case <-time.After(wait):
			}
		}
		var rd io.Reader
		if body != nil {
			var err error
			if rd, err = body(); err != nil {
				return fmt.Errorf("s3 %s %s: rewind body: %w", method, key, err)
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
		if err != nil {
			return fmt.Errorf("s3 %s %s: %w", method, key, err)
		}
		if rd != nil {
			req.Body = io.NopCloser(rd) // the caller owns the reader
			req.ContentLength = size
		}
		for k, v := range hdr {
			req.Header[k] = v
		}
		s.sign(req, payload, region)
		resp, err := s.client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("s3 %s %s: %w", method, key, err)
			}
			last = fmt.Errorf("s3 %s %s: %w", method, key, err)
			continue
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			if err != nil {
				return fmt.Errorf("s3 %s %s: read answer: %w", method, key, err)
			}
			if read != nil {
				return read(b)
			}
			return nil
		}
		se := &s3Error{op: method, key: key, status: resp.StatusCode}
		_ = xml.Unmarshal(b[:min(len(b), s3ErrBodyBytes)], se)
		if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return se
		}
		last = se
	}
	return last
}

// objectURL is the URL of key: path-style (endpoint/bucket/key), which
// every S3-compatible service serves, except on AWS itself, which gets
// virtual-hosted style (bucket.endpoint/key) when the bucket name allows.
func (s *S3) objectURL(key string) *url.URL {
	u := &url.URL{Scheme: "http", Host: s.o.Endpoint}
	if s.o.Secure {
		u.Scheme = "https"
	}
	host, _, err := net.SplitHostPort(s.o.Endpoint)
	if err != nil {
		host = s.o.Endpoint
	}
	if strings.HasSuffix(host, ".amazonaws.com") && !strings.Contains(s.o.Bucket, ".") {
		u.Host = s.o.Bucket + "." + s.o.Endpoint
		u.Path = "/" + key
	} else {
		u.Path = "/" + s.o.Bucket + "/" + key
		if key == "" {
			u.Path = "/" + s.o.Bucket + "/"
		}
	}
	u.RawPath = s3EscapePath(u.Path)
	return u
}

// s3EscapePath percent-encodes every byte of p but the unreserved ones
// and '/', as Signature Version 4 wants the path.
func s3EscapePath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || strings.IndexByte("-._~/", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// sign adds the AWS Signature Version 4 headers to req (no credentials:
// an anonymous request, sent as is).
func (s *S3) sign(req *http.Request, payload, region string) {
	req.Header.Set("X-Amz-Content-Sha256", payload)
	if s.o.AccessKey == "" {
		return
	}
	t := s.now().UTC()
	amzDate := t.Format("20060102T150405Z")
	day := amzDate[:8]
	req.Header.Set("X-Amz-Date", amzDate)

	// Canonical headers: host and every header set here, lower case, sorted.
	names := []string{"host"}
	vals := map[string]string{"host": req.URL.Host}
	for k, v := range req.Header {
		lk := strings.ToLower(k)
		names = append(names, lk)
		vals[lk] = strings.Join(v, ",")
	}
	sort.Strings(names)
	var ch strings.Builder
	for _, n := range names {
		ch.WriteString(n + ":" + strings.TrimSpace(vals[n]) + "\n")
	}
	signed := strings.Join(names, ";")
	canon := strings.Join([]string{req.Method, req.URL.EscapedPath(), s3CanonicalQuery(req.URL.RawQuery),
		ch.String(), signed, payload}, "\n")
	scope := day + "/" + region + "/s3/aws4_request"
	sum := sha256.Sum256([]byte(canon))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(sum[:])
	key := hmacSHA256([]byte("AWS4"+s.o.SecretKey), day)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, "s3")
	key = hmacSHA256(key, "aws4_request")
	sig := hex.EncodeToString(hmacSHA256(key, toSign))
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+s.o.AccessKey+"/"+scope+
		", SignedHeaders="+signed+", Signature="+sig)
}

// s3CanonicalQuery sorts the query's parameters, each as key=value.
func s3CanonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	q, _ := url.ParseQuery(raw)
	var parts []string
	for k, vs := range q {
		for _, v := range vs {
			parts = append(parts, s3EscapeQuery(k)+"="+s3EscapeQuery(v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "&")
}

func s3EscapeQuery(s string) string {
	return strings.ReplaceAll(s3EscapePath(s), "/", "%2F")
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}
