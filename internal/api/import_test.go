package api

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
)

func gzipBytes(t testing.TB, s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

const importCSV = "plant.ai00,1000,1.5\nplant.ai01,1000,2\r\n\nplant.ai00,2000,3,bad\n"

func TestImport(t *testing.T) {
	tests := []struct {
		name   string
		body   []byte
		header map[string]string
	}{
		{"plain", []byte(importCSV), nil},
		{"gzip header", gzipBytes(t, importCSV), map[string]string{"Content-Encoding": "gzip"}},
		{"gzip magic", gzipBytes(t, importCSV), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			h := NewServer(st, DefaultOptions(), nil).Handler()
			r := do(t, h, http.MethodPost, "/api/v1/import", bytes.NewReader(tt.body), tt.header)
			wantJSON(t, r, http.StatusOK, `{"points":3}`)
			if st.commits != 1 || st.rollbacks != 0 {
				t.Errorf("commits %d rollbacks %d", st.commits, st.rollbacks)
			}
			want := []model.Sample{{T: 1000, V: 1.5}, {T: 2000, V: 3, Q: model.QualityBad}}
			if got := st.data["plant.ai00"]; !equalSamples(got, want) {
				t.Errorf("stored %v, want %v", got, want)
			}
		})
	}
}

func equalSamples(a, b []model.Sample) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestImportEmpty(t *testing.T) {
	st := newFakeStore()
	r := do(t, NewServer(st, DefaultOptions(), nil).Handler(), http.MethodPost, "/api/v1/import", strings.NewReader(""), nil)
	wantJSON(t, r, http.StatusOK, `{"points":0}`)
}

// TestImportBatches checks that points reach the store in bounded batches
// and that none is lost or corrupted by the reuse of the batch slice.
func TestImportBatches(t *testing.T) {
	st := newFakeStore()
	opts := DefaultOptions()
	opts.ImportBatch = 3
	var body strings.Builder
	for i := 0; i < 10; i++ {
		body.WriteString("t" + string(rune('a'+i)) + ",1,2\n")
	}
	r := do(t, NewServer(st, opts, nil).Handler(), http.MethodPost, "/api/v1/import", strings.NewReader(body.String()), nil)
	wantJSON(t, r, http.StatusOK, `{"points":10}`)
	if st.adds != 4 || st.maxAdd != 3 {
		t.Errorf("adds %d max %d, want 4 and 3", st.adds, st.maxAdd)
	}
	if len(st.data) != 10 {
		t.Errorf("stored %d tags, want 10", len(st.data))
	}
}

func TestImportErrors(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		body       []byte
		header     map[string]string
		opts       func(*Options)
		store      func(*fakeStore)
		wantStatus int
		wantErr    string
		wantLine   string
	}{
		{name: "bad row", body: []byte("a,1,2\nb,2,3\n\nc,x,1\n"), wantStatus: 400, wantErr: "bad timestamp", wantLine: `"line":4`},
		{name: "bad row in second batch", body: []byte("a,1,2\nb,2,3\nc,3,4\nd,4,NaN\n"),
			opts: func(o *Options) { o.ImportBatch = 2 }, wantStatus: 400, wantErr: "not finite", wantLine: `"line":4`},
		{name: "bad tag gzip", body: gzipBytes(t, "a,1,2\nb c,2,3\n"), wantStatus: 400, wantErr: "tag contains", wantLine: `"line":2`},
		{name: "wrong method", method: http.MethodGet, wantStatus: 405, wantErr: "not allowed"},
		{name: "too large", body: []byte("a,1,2\nb,2,3\n"), opts: func(o *Options) { o.MaxImportBytes = 8 },
			wantStatus: 413, wantErr: "larger than 8 bytes"},
		{name: "gzip bomb", body: gzipBytes(t, strings.Repeat("a,1,2\n", 1000)),
			opts: func(o *Options) { o.MaxImportInflatedBytes = 100 }, wantStatus: 413, wantErr: "decompressed"},
		{name: "corrupt gzip", body: []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3}, wantStatus: 400, wantErr: "gzip"},
		{name: "not gzip but says so", body: []byte("a,1,2\n"), header: map[string]string{"Content-Encoding": "gzip"},
			wantStatus: 400, wantErr: "gzip"},
		{name: "unsupported encoding", body: []byte("a,1,2\n"), header: map[string]string{"Content-Encoding": "br"},
			wantStatus: 415, wantErr: "br"},
		{name: "store add fails", body: []byte("a,1,2\n"), store: func(s *fakeStore) { s.addErr = errors.New("disk full") },
			wantStatus: 500, wantErr: "disk full"},
		{name: "store closed", body: []byte("a,1,2\n"), store: func(s *fakeStore) { s.commitErr = store.ErrClosed },
			wantStatus: 503, wantErr: "closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newFakeStore()
			if tt.store != nil {
				tt.store(st)
			}
			opts := DefaultOptions()
			if tt.opts != nil {
				tt.opts(&opts)
			}
			method := tt.method
			if method == "" {
				method = http.MethodPost
			}
			r := do(t, NewServer(st, opts, nil).Handler(), method, "/api/v1/import", bytes.NewReader(tt.body), tt.header)
			wantError(t, r, tt.wantStatus, tt.wantErr)
			if tt.wantLine != "" && !strings.Contains(r.body, tt.wantLine) {
				t.Errorf("body %s lacks %s", r.body, tt.wantLine)
			}
			if len(st.data) != 0 || st.commits != 0 {
				t.Errorf("stored %d tags, %d commits after a failed import", len(st.data), st.commits)
			}
			if tt.wantStatus == 405 {
				if r.header.Get("Allow") != "POST" {
					t.Errorf("Allow %q", r.header.Get("Allow"))
				}
			}
			if st.rollbacks != st.begins {
				t.Errorf("%d transactions begun, %d rolled back", st.begins, st.rollbacks)
			}
		})
	}
}

// csvGen streams n generated plant rows without holding them.
type csvGen struct {
	n, i int
	line []byte
	pend []byte
}

func (g *csvGen) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(g.pend) == 0 {
			if g.i == g.n {
				if n == 0 {
					return 0, io.EOF
				}
				return n, nil
			}
			g.line = g.line[:0]
			g.line = append(g.line, "plant.ai"...)
			g.line = append(g.line, byte('0'+g.i%100/10), byte('0'+g.i%10), ',')
			g.line = appendInt(g.line, 1700000000000+int64(g.i/100)*1000)
			g.line = append(g.line, ",123.45\n"...)
			g.pend = g.line
			g.i++
		}
		c := copy(p[n:], g.pend)
		g.pend = g.pend[c:]
		n += c
	}
	return n, nil
}

func appendInt(b []byte, v int64) []byte {
	var tmp [20]byte
	i := len(tmp)
	for {
		i--
		tmp[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return append(b, tmp[i:]...)
}

// TestImportMemoryBounded streams a large body (about 150 MB, smaller in
// -short mode) and checks the heap stays far below the body size: the
// handler must never hold the body or all points.
func TestImportMemoryBounded(t *testing.T) {
	rows := 4_700_000 // 32 bytes a row: about 150 MB
	if testing.Short() || raceEnabled {
		rows = 300_000
	}
	st := newFakeStore()
	st.discard = true
	var peak uint64
	var ms runtime.MemStats
	st.onAdd = func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	r := do(t, NewServer(st, DefaultOptions(), nil).Handler(), http.MethodPost, "/api/v1/import", &csvGen{n: rows}, nil)
	wantJSON(t, r, http.StatusOK, "")
	if want := `{"points":` + string(appendInt(nil, int64(rows))) + `}`; r.body != want {
		t.Fatalf("body %s, want %s", r.body, want)
	}
	const limit = 64 << 20
	if peak > base+limit {
		t.Errorf("heap grew by %d MB while importing, want < %d MB", (peak-base)>>20, limit>>20)
	}
	t.Logf("%d rows, heap peak %d MB above base", rows, (int64(peak)-int64(base))>>20)
}

// TestImportConcurrencyLimit checks that an import beyond the limit waits
// for a slot: with the only slot held, a request whose client has gone
// gets 503 without touching the store, and the held import completes.
func TestImportConcurrencyLimit(t *testing.T) {
	st := newFakeStore()
	opts := DefaultOptions()
	opts.MaxConcurrentImports = 1
	h := NewServer(st, opts, nil).Handler()
	entered, release := make(chan struct{}), make(chan struct{})
	st.onAdd = func() {
		close(entered)
		<-release
	}
	done := make(chan response, 1)
	go func() { done <- do(t, h, http.MethodPost, "/api/v1/import", strings.NewReader("a,1,1\n"), nil) }()
	<-entered

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodPost, "/api/v1/import", strings.NewReader("b,1,1\n")).WithContext(ctx)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("waiting import: status %d, want 503", rec.Code)
	}
	close(release)
	if r := <-done; r.status != http.StatusOK {
		t.Errorf("held import: status %d: %s", r.status, r.body)
	}
	if st.begins != 1 || st.commits != 1 {
		t.Errorf("begins %d commits %d, want 1 and 1", st.begins, st.commits)
	}
}
