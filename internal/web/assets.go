package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// files holds the pages and the vendored uPlot. Paths are served as they
// are embedded: /static/..., /vendor/....
//
//go:embed static vendor
var files embed.FS

// minGzipSize is the size below which an asset is sent uncompressed: the
// gzip header and a second request path are not worth it.
const minGzipSize = 512 // bytes

// asset is one embedded file ready to serve: its bytes, their gzip form
// (compressed once at start, at the best level) and a strong ETag.
type asset struct {
	name  string
	ctype string
	raw   []byte
	gz    []byte // nil when compression does not pay
	etag  string
}

// loadAssets reads and compresses every embedded file.
func loadAssets() (map[string]*asset, error) {
	out := make(map[string]*asset)
	// One compressor for all of them: each new one allocates about a
	// megabyte, garbage as soon as its file is done.
	zw, err := gzip.NewWriterLevel(nil, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasSuffix(p, ".md") || strings.HasPrefix(path.Base(p), "LICENSE") {
			return nil // documentation of the vendored files, not served
		}
		raw, err := files.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read embedded %s: %w", p, err)
		}
		a := &asset{name: p, ctype: contentType(p), raw: raw}
		sum := sha256.Sum256(raw)
		a.etag = `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
		if len(raw) >= minGzipSize && compressible(a.ctype) {
			gz, err := gzipBytes(zw, raw)
			if err != nil {
				return fmt.Errorf("compress %s: %w", p, err)
			}
			if len(gz) < len(raw) {
				a.gz = gz
			}
		}
		out["/"+p] = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load dashboard assets: %w", err)
	}
	return out, nil
}

func contentType(p string) string {
	switch path.Ext(p) {
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".json", ".webmanifest":
		return "application/json"
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || strings.HasPrefix(ctype, "application/json") ||
		strings.HasPrefix(ctype, "image/svg")
}

// gzipBytes compresses raw with zw, which it resets.
func gzipBytes(zw *gzip.Writer, raw []byte) ([]byte, error) {
	var b bytes.Buffer
	zw.Reset(&b)
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// serve answers a GET or HEAD of the asset. Assets are revalidated on
// every use (no-cache) rather than cached for long, because their URLs
// carry no version: after an upgrade a browser must not mix old and new
// modules. The ETag keeps the revalidation to a 304.
func (a *asset) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	h.Set("Vary", "Accept-Encoding")
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", a.ctype)
	body := a.raw
	if a.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body) //nolint:errcheck // the client went away; nothing to do
	}
}

// etagMatch reports whether an If-None-Match list names etag (weak
// comparison, as RFC 9110 asks for If-None-Match).
func etagMatch(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip
// (present and not refused with q=0).
func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") && strings.TrimSpace(name) != "*" {
			continue
		}
		q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}
