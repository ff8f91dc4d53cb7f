package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/golang/snappy"
	"github.com/pith-historian/pith/internal/store"
)

// fullSink fails every write as the store does on a full disk.
type fullSink struct{}

func (fullSink) Write(context.Context, []model.Point) error {
	return fmt.Errorf("commit write: %w: %w", store.ErrDiskFull, syscall.ENOSPC)
}

// TestDiskFullAnswers507: every push input answers a full disk with 507
// Insufficient Storage and a JSON body holding "error".
func TestDiskFullAnswers507(t *testing.T) {
	lp := NewLineProtocol(fullSink{}, DefaultLineProtocolOptions())
	em := NewEmoncms(fullSink{}, DefaultEmoncmsOptions())
	rw := NewRemoteWrite(fullSink{}, DefaultRemoteWriteOptions())
	rwBody := snappy.Encode(nil, encodeWriteRequest(goldenSeries[:1]))
	tests := []struct {
		name   string
		h      http.Handler
		method string
		target string
		body   []byte
		header map[string]string
	}{
		{"influx v1", lp, "POST", "/write?db=x", []byte("cpu value=1 1700000000000000000\n"), nil},
		{"influx v2", lp, "POST", "/api/v2/write?bucket=x", []byte("cpu value=1 1700000000000000000\n"), nil},
		{"emoncms", em, "GET", "/input/post?node=n&json={a:1}", nil, nil},
		{"remote_write", rw, "POST", "/api/v1/write", rwBody, map[string]string{"Content-Encoding": "snappy"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.target, bytes.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			tt.h.ServeHTTP(rec, req)
			if rec.Code != http.StatusInsufficientStorage {
				t.Fatalf("status %d, want 507 (body %s)", rec.Code, rec.Body)
			}
			var e struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || !strings.Contains(e.Error, "disk full") {
				t.Fatalf("body %s: want JSON error naming the full disk (%v)", rec.Body, err)
			}
		})
	}
}
