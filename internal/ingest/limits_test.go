package ingest

import (
	"bytes"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang/snappy"
)

// manyTagsLine returns a line protocol line with n tags whose keys
// descend, the worst order for an insertion sort, in under MaxLineLen bytes
// for n up to 12,000.
func manyTagsLine(n int) []byte {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" // 62
	b := []byte("m")
	for i := n - 1; i >= 0; i-- {
		k := i * (62*62 - 1) / max(n-1, 1)
		b = append(b, ',', digits[k/62], digits[k%62], '=', 'v')
	}
	return append(b, " f=1\n"...)
}

// manyLabelsRequest returns a snappy-compressed remote_write request with
// one series of n labels whose names descend.
func manyLabelsRequest(n int) []byte {
	labels := []string{"__name__", "x"}
	for i := n - 2; i >= 0; i-- {
		labels = append(labels, "l"+strconv.Itoa(i), "v")
	}
	return snappy.Encode(nil, encodeWriteRequest([]testSeries{{labels: labels, samples: []RWSample{{1, 1}}}}))
}

func TestIngestLimits(t *testing.T) {
	sink := &memSink{}
	mux := testMux(sink, NewTagGate(nil, 1000, func() time.Time { return emNow }))
	rw := NewRemoteWrite(sink, DefaultRemoteWriteOptions())
	manySeries := make([]testSeries, MaxRequestSeries+1)
	for i := range manySeries {
		manySeries[i] = testSeries{labels: []string{"__name__", "m"}}
	}
	long := strings.Repeat("k", MaxKeyLen+1)
	for _, tc := range []struct {
		name    string
		handler http.Handler
		target  string
		body    []byte
		want    string // in a 400's body
	}{
		{"line tags", mux, "/write", manyTagsLine(MaxLineTags + 1), "more than 256 tags on one line (MaxLineTags)"},
		{"line 12000 tags", mux, "/write", manyTagsLine(12_000), "MaxLineTags"},
		{"line tag key", mux, "/write", []byte("m," + long + "=v f=1\n"), "tag key of 1025 bytes is longer than the limit of 1024 (MaxKeyLen)"},
		{"series labels", rw, "/api/v1/write", manyLabelsRequest(MaxSeriesLabels + 1), "series 1: more than 256 labels (MaxSeriesLabels)"},
		{"series 200000 labels", rw, "/api/v1/write", manyLabelsRequest(200_000), "MaxSeriesLabels"},
		{"label name", rw, "/api/v1/write", snappy.Encode(nil, encodeWriteRequest([]testSeries{{labels: []string{"__name__", "m", long, "v"}}})),
			"label name of 1025 bytes is longer than the limit of 1024 (MaxKeyLen)"},
		{"request series", rw, "/api/v1/write", snappy.Encode(nil, encodeWriteRequest(manySeries)), "more than 100000 series (MaxRequestSeries)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			tc.handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, tc.target, bytes.NewReader(tc.body)))
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.want) {
				t.Errorf("got %d %.200q, want 400 with %q", rec.Code, rec.Body, tc.want)
			}
			if got := sink.take(); len(got) != 0 {
				t.Errorf("stored %d points of a refused request", len(got))
			}
		})
	}
	// At the limits, the sets are sorted and the names built as always.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/write", bytes.NewReader([]byte("m,b=2,a=1,"+long[1:]+"=3 f=1\n"))))
	if got := sink.take(); rec.Code != 204 || len(got) != 1 || got[0].Tag != "m.1.2.3.f" {
		t.Errorf("reversed tags: %d %s %v, want m.1.2.3.f", rec.Code, rec.Body, got)
	}
	rec = httptest.NewRecorder()
	rw.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(snappy.Encode(nil,
		encodeWriteRequest([]testSeries{{labels: []string{"z", "3", "b", "2", "__name__", "m"}, samples: []RWSample{{1, 1}}}})))))
	if got := sink.take(); rec.Code != 204 || len(got) != 1 || got[0].Tag != "m.2.3" {
		t.Errorf("reversed labels: %d %s %v, want m.2.3", rec.Code, rec.Body, got)
	}
}

// TestSortTagsStable checks the sort against the insertion sort it
// replaced, which kept equal keys in line order, on random tag sets.
func TestSortTagsStable(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		tags := make([]LPTag, r.IntN(MaxLineTags+1))
		for i := range tags {
			tags[i] = LPTag{Key: []byte{byte('a' + r.IntN(5))}, Value: []byte(strconv.Itoa(i))}
		}
		want := slices.Clone(tags)
		for i := 1; i < len(want); i++ {
			for j := i; j > 0 && bytes.Compare(want[j-1].Key, want[j].Key) > 0; j-- {
				want[j-1], want[j] = want[j], want[j-1]
			}
		}
		sortTags(tags)
		if !slices.EqualFunc(tags, want, func(a, b LPTag) bool { return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) }) {
			t.Fatalf("sortTags = %s, want %s", tags, want)
		}
	}
}
