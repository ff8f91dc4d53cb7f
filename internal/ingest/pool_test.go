package ingest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/golang/snappy"
)

// TestPoolsKeepNoHugeState serves one small and one large request to each
// push handler: the state of the small one goes back to the free list,
// the large one's (over poolKeepBytes) does not, so one maximal body
// cannot pin tens of MB for the life of the process.
func TestPoolsKeepNoHugeState(t *testing.T) {
	lpBody := func(lines int) []byte {
		var b bytes.Buffer
		for i := range lines {
			fmt.Fprintf(&b, "m,host=h%d v=%d 1700000000000000000\n", i%100, i)
		}
		return b.Bytes()
	}
	rwBody := func(series int) []byte {
		var ss []testSeries
		for i := range series {
			ss = append(ss, testSeries{labels: []string{"__name__", "up", "instance", fmt.Sprintf("pi%d:9100", i)},
				samples: []RWSample{{1, 1_700_000_000_000}}})
		}
		return snappy.Encode(nil, encodeWriteRequest(ss))
	}
	emBody := func(n int) []byte {
		var b strings.Builder
		b.WriteString("node=1&fulljson={")
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"k%d":%d`, i%50, i)
		}
		b.WriteString("}")
		return []byte(b.String())
	}
	sink := &memSink{}
	lp := NewLineProtocol(sink, DefaultLineProtocolOptions())
	rw := NewRemoteWrite(sink, DefaultRemoteWriteOptions())
	em := NewEmoncms(sink, DefaultEmoncmsOptions())
	for _, tt := range []struct {
		name        string
		h           http.Handler
		path, ctype string
		small, big  []byte
		bigPooled   int                 // states pooled after the big body; -1: any (its limit keeps it small)
		pooled      func() (int, int64) // states in the free list and the most one retains
	}{
		{"line protocol", lp, "/write", "text/plain", lpBody(10), lpBody(200_000), 0, func() (int, int64) { return drain(lp.free) }},
		{"remote_write", rw, "/api/v1/write", "application/x-protobuf", rwBody(10), rwBody(100_000), 0, func() (int, int64) { return drain(rw.free) }},
		{"emoncms", em, "/input/post", "application/x-www-form-urlencoded", emBody(10), emBody(60_000), -1, func() (int, int64) { return drain(em.free) }},
	} {
		for _, c := range []struct {
			body []byte
			want int
		}{{tt.small, 1}, {tt.big, tt.bigPooled}} {
			req := httptest.NewRequest(http.MethodPost, tt.path, bytes.NewReader(c.body))
			req.Header.Set("Content-Type", tt.ctype)
			if tt.name == "remote_write" {
				req.Header.Set("Content-Encoding", "snappy")
			}
			rec := httptest.NewRecorder()
			tt.h.ServeHTTP(rec, req)
			if rec.Code/100 != 2 {
				t.Fatalf("%s, %d bytes: status %d %s", tt.name, len(c.body), rec.Code, rec.Body)
			}
			n, most := tt.pooled()
			if c.want >= 0 && n != c.want || most > poolKeepBytes {
				t.Errorf("%s, %d-byte body: %d states pooled, the largest keeping %d bytes; want %d, at most %d",
					tt.name, len(c.body), n, most, c.want, poolKeepBytes)
			}
		}
	}
}

// drain empties a free list and reports what it held.
func drain[S interface{ retained() int64 }](free chan S) (n int, most int64) {
	for {
		select {
		case st := <-free:
			n++
			most = max(most, st.retained())
		default:
			return n, most
		}
	}
}

// TestWithMaxBody checks that a request's context can lower each push
// handler's body limit, compressed or decoded: a body over it gets 413.
func TestWithMaxBody(t *testing.T) {
	sink := &memSink{}
	lp := bytes.Repeat([]byte("m v=1 1700000000000000000\n"), 100) // 2.6 kB
	rw := snappy.Encode(nil, encodeWriteRequest([]testSeries{{labels: []string{"__name__", "up"}, samples: make([]RWSample, 200)}}))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(lp)
	zw.Close()
	for _, tt := range []struct {
		name     string
		h        http.Handler
		body     []byte
		encoding string
	}{
		{"line protocol", NewLineProtocol(sink, DefaultLineProtocolOptions()), lp, ""},
		{"line protocol gzip", NewLineProtocol(sink, DefaultLineProtocolOptions()), gz.Bytes(), "gzip"},
		{"remote_write", NewRemoteWrite(sink, DefaultRemoteWriteOptions()), rw, "snappy"},
		{"emoncms", NewEmoncms(sink, DefaultEmoncmsOptions()), []byte("node=1&csv=" + strings.Repeat("1,", 1000) + "1"), ""},
	} {
		for _, limit := range []int64{1 << 20, 1000} {
			req := httptest.NewRequest(http.MethodPost, "/x", bytes.NewReader(tt.body))
			if tt.encoding != "" {
				req.Header.Set("Content-Encoding", tt.encoding)
			}
			if tt.name == "emoncms" {
				req.URL.Path = "/input/post"
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			req = req.WithContext(WithMaxBody(req.Context(), limit))
			rec := httptest.NewRecorder()
			tt.h.ServeHTTP(rec, req)
			if want := limit < 1000+1; (rec.Code == http.StatusRequestEntityTooLarge) != want {
				t.Errorf("%s, limit %d: status %d %s", tt.name, limit, rec.Code, rec.Body)
			}
		}
	}
}
