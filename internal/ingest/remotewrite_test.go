package ingest

import (
	"bytes"
	"encoding/binary"
	"flag"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"

	"github.com/golang/snappy"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata")

// The test encoder writes prompb's WriteRequest the way Prometheus does,
// so the decoder is checked against the wire format, not against itself.
func pbAppendLen(b []byte, num int, val []byte) []byte {
	b = binary.AppendUvarint(b, uint64(num)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(val)))
	return append(b, val...)
}

type testSeries struct {
	labels  []string // name, value, name, value...
	samples []RWSample
}

func encodeWriteRequest(series []testSeries) []byte {
	var req []byte
	for _, s := range series {
		var ts []byte
		for i := 0; i < len(s.labels); i += 2 {
			var l []byte
			l = pbAppendLen(l, 1, []byte(s.labels[i]))
			l = pbAppendLen(l, 2, []byte(s.labels[i+1]))
			ts = pbAppendLen(ts, 1, l)
		}
		for _, smp := range s.samples {
			var sb []byte
			sb = binary.AppendUvarint(sb, 1<<3|1)
			sb = binary.LittleEndian.AppendUint64(sb, math.Float64bits(smp.Value))
			sb = binary.AppendUvarint(sb, 2<<3|0)
			sb = binary.AppendUvarint(sb, uint64(smp.Timestamp))
			ts = pbAppendLen(ts, 2, sb)
		}
		req = pbAppendLen(req, 1, ts)
	}
	// A metadata entry (field 3), which the decoder must skip.
	req = pbAppendLen(req, 3, []byte{0x08, 0x01})
	return req
}

var goldenSeries = []testSeries{
	{[]string{"__name__", "up", "instance", "pi:9100", "job", "node"}, []RWSample{{1, 1_700_000_000_000}, {0, 1_700_000_015_000}}},
	{[]string{"job", "plant", "__name__", "boiler_temp_celsius", "zone", "hall A"}, []RWSample{{61.5, 1_700_000_000_000}, {math.NaN(), 1_700_000_015_000}}},
	{[]string{"__name__", "neg_ts"}, []RWSample{{-2.5, -1000}}},
}

func TestRemoteWriteGolden(t *testing.T) {
	raw := encodeWriteRequest(goldenSeries)
	path := filepath.Join("testdata", "remotewrite", "basic.pb")
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(golden, raw) {
		t.Fatalf("encoder output differs from %s (run with -update if intended)", path)
	}
	sink := &memSink{}
	h := NewRemoteWrite(sink, DefaultRemoteWriteOptions())
	req := httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(snappy.Encode(nil, golden)))
	req.Header.Set("Content-Encoding", "snappy")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("X-Pith-Skipped-Samples"); got != "1" {
		t.Errorf("skipped %s, want 1", got)
	}
	want := []model.Point{
		{Tag: "neg_ts", T: -1000, V: -2.5},
		{Tag: "boiler_temp_celsius.plant.hall_A", T: 1_700_000_000_000, V: 61.5},
		{Tag: "up.pi:9100.node", T: 1_700_000_000_000, V: 1},
		{Tag: "up.pi:9100.node", T: 1_700_000_015_000, V: 0},
	}
	got := sink.take()
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("point %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRemoteWriteErrors(t *testing.T) {
	h := NewRemoteWrite(&memSink{}, DefaultRemoteWriteOptions())
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"not snappy", []byte{0xff, 0xff, 0xff}, "decode snappy"},
		{"truncated", snappy.Encode(nil, encodeWriteRequest(goldenSeries)[:20]), "truncated"},
		{"no name", snappy.Encode(nil, encodeWriteRequest([]testSeries{{[]string{"job", "x"}, []RWSample{{1, 1}}}})), "no __name__"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/write", bytes.NewReader(tc.body)))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("%s: got %d %q, want 400 %q", tc.name, rec.Code, rec.Body, tc.want)
		}
	}
}

// FuzzRemoteWriteDecode feeds arbitrary bytes to the WriteRequest decoder:
// it must return an error or series whose slices stay inside the input.
//
//	go test -run '^$' -fuzz FuzzRemoteWriteDecode ./internal/ingest/
func FuzzRemoteWriteDecode(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "remotewrite", "basic.pb"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add(golden[:len(golden)/2])
	f.Add([]byte{0x0a, 0x80})
	var rq RWRequest
	f.Fuzz(func(t *testing.T, b []byte) {
		rq.Reset()
		if err := rq.Unmarshal(b); err != nil {
			return
		}
		for _, s := range rq.Series {
			for _, l := range s.Labels {
				if len(l.Name) > len(b) || len(l.Value) > len(b) {
					t.Fatal("label longer than the input")
				}
			}
		}
		var st rwState
		st.decode(snappy.Encode(nil, b), 1<<20)
	})
}

// BenchmarkRemoteWriteDecode measures snappy + protobuf decoding and naming
// of a Prometheus-sized request (500 series of 10 samples):
//
//	go test -run '^$' -bench RemoteWriteDecode -benchmem ./internal/ingest/
func BenchmarkRemoteWriteDecode(b *testing.B) {
	var series []testSeries
	for i := 0; i < 500; i++ {
		s := testSeries{labels: []string{"__name__", "node_cpu_seconds_total", "cpu", string(rune('0' + i%8)), "instance", "pi:9100", "job", "node", "mode", "m" + string(rune('a'+i/8%26)) + string(rune('a'+i/208))}}
		for j := 0; j < 10; j++ {
			s.samples = append(s.samples, RWSample{float64(i*j) + 0.5, 1_700_000_000_000 + int64(j)*15_000})
		}
		series = append(series, s)
	}
	body := snappy.Encode(nil, encodeWriteRequest(series))
	var st rwState
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		pts, _, err := st.decode(body, 1<<26)
		if err != nil || len(pts) != 5000 {
			b.Fatal(err, len(pts))
		}
		st.labels.done() // as a stored request does
	}
	b.ReportMetric(float64(b.N)*5000/b.Elapsed().Seconds(), "samples/s")
}
