package events

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"
)

// TestS3SignatureV4Example signs the GET example of Amazon's Signature
// Version 4 documentation for S3 and expects its published signature.
func TestS3SignatureV4Example(t *testing.T) {
	s, err := NewS3(S3Options{Endpoint: "s3.amazonaws.com", Secure: true, Region: "us-east-1", Bucket: "examplebucket",
		AccessKey: "AKIAIOSFODNN7EXAMPLE", SecretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC) }
	req, _ := http.NewRequest("GET", s.objectURL("test.txt").String(), nil)
	if req.URL.Host != "examplebucket.s3.amazonaws.com" {
		t.Fatalf("host %q, want virtual-hosted style", req.URL.Host)
	}
	req.Header.Set("Range", "bytes=0-9")
	s.sign(req, emptySHA256, "us-east-1")
	want := "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
		"SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, " +
		"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
	if got := req.Header.Get("Authorization"); got != want {
		t.Errorf("Authorization\n got %s\nwant %s", got, want)
	}
}

// TestS3SignatureMatchesMinio signs PUTs the way Pith sends them and
// compares with the signer of MinIO's Go SDK (used only by this test) on
// the same request, for keys that need escaping and for both URL styles.
func TestS3SignatureMatchesMinio(t *testing.T) {
	for _, c := range []struct{ endpoint, bucket, key string }{
		{"127.0.0.1:9000", "events", "site1/2026/11/22/101500-000001.ndjson.gz"},
		{"minio.local:9000", "ev.ents", "a b/ü+=&?%.csv.zst"},
		{"s3.eu-central-1.amazonaws.com", "events", "x/y~z.gz"},
	} {
		s, err := NewS3(S3Options{Endpoint: c.endpoint, Region: "eu-central-1", Bucket: c.bucket,
			AccessKey: "key", SecretKey: "secret/+"})
		if err != nil {
			t.Fatal(err)
		}
		mk := func() *http.Request {
			req, _ := http.NewRequest("PUT", s.objectURL(c.key).String(), nil)
			req.Header.Set("Content-Type", "application/gzip")
			req.Header.Set("Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg==")
			req.Header.Set("X-Amz-Content-Sha256", emptySHA256)
			return req
		}
		theirs := signer.SignV4(*mk(), "key", "secret/+", "", "eu-central-1")
		at, err := time.Parse("20060102T150405Z", theirs.Header.Get("X-Amz-Date"))
		if err != nil {
			t.Fatal(err)
		}
		s.now = func() time.Time { return at }
		ours := mk()
		s.sign(ours, emptySHA256, "eu-central-1")
		if got, want := ours.Header.Get("Authorization"), theirs.Header.Get("Authorization"); got != want {
			t.Errorf("%s %s/%s:\n ours   %s\n minio  %s", c.endpoint, c.bucket, c.key, got, want)
		}
		if u, _ := url.Parse(ours.URL.String()); u.Path != ours.URL.Path {
			t.Errorf("path %q does not survive a round trip: %q", ours.URL.Path, u.Path)
		}
	}
}

// TestS3AsksRegion: with no region configured the uploader asks the
// service for the bucket's location once, and refusals are errors that
// name the key and the service's code.
func TestS3AsksRegion(t *testing.T) {
	var gets int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == "GET" && r.URL.RawQuery == "location=":
			gets++
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><LocationConstraint xmlns="http://s3.amazonaws.com/doc/2006-03-01/">eu-west-3</LocationConstraint>`)
		case r.Method == "PUT":
			if !strings.Contains(r.Header.Get("Authorization"), "/eu-west-3/s3/aws4_request") {
				t.Errorf("PUT signed for another region: %s", r.Header.Get("Authorization"))
			}
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `<Error><Code>AccessDenied</Code><Message>no</Message></Error>`)
		}
	}))
	defer srv.Close()
	s, err := NewS3(S3Options{Endpoint: strings.TrimPrefix(srv.URL, "http://"), Bucket: "b", AccessKey: "k", SecretKey: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		err := s.Upload(context.Background(), "k.gz", strings.NewReader("abc"), 3)
		if err == nil || !strings.Contains(err.Error(), "403 AccessDenied: no") || !strings.Contains(err.Error(), "k.gz") {
			t.Errorf("err = %v", err)
		}
	}
	if gets != 1 {
		t.Errorf("%d location requests, want 1", gets)
	}
	if _, err := NewS3(S3Options{Endpoint: "http://x:9000", Bucket: "b"}); err == nil {
		t.Error("an endpoint with a scheme was accepted")
	}
}
