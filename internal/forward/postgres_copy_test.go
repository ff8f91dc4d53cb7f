package forward

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestPgTimestamp checks the binary timestamptz of Unix ms, and that
// bounds past a microsecond count become infinities instead of wrapping.
func TestPgTimestamp(t *testing.T) {
	for _, c := range []struct {
		ms   int64
		want int64
	}{
		{0, -946_684_800_000_000},
		{946_684_800_000, 0},
		{946_684_800_001, 1000},
		{pgMaxMillis, (pgMaxMillis - pgEpochMillis) * 1000},
		{pgMinMillis, (pgMinMillis - pgEpochMillis) * 1000},
		{math.MaxInt64, math.MaxInt64},
		{math.MinInt64, math.MinInt64},
		{math.MaxInt64/1000 + pgEpochMillis, math.MaxInt64 / 1000 * 1000},
		{math.MaxInt64/1000 + pgEpochMillis + 1, math.MaxInt64},
		{math.MinInt64/1000 + pgEpochMillis, math.MinInt64 / 1000 * 1000},
		{math.MinInt64/1000 + pgEpochMillis - 1, math.MinInt64},
	} {
		if got := int64(binary.BigEndian.Uint64(pgTimestamp(c.ms))); got != c.want {
			t.Errorf("pgTimestamp(%d) = %d, want %d", c.ms, got, c.want)
		}
	}
}

func TestPgIdentSanitize(t *testing.T) {
	if got, want := (pgIdent{"s", `a"b` + "\x00c"}).Sanitize(), `"s"."a""bc"`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// BenchmarkPgCopyEncode measures the binary COPY encoding of one
// 10,000-point batch: go test -run '^$' -bench PgCopyEncode ./internal/forward
func BenchmarkPgCopyEncode(b *testing.B) {
	pts := benchPoints()
	var r pgStageRows
	var buf []byte
	b.ReportAllocs()
	for range b.N {
		r.reset("bench", pts)
		buf = r.appendCopy(buf[:0])
	}
	b.SetBytes(int64(len(buf)))
	b.ReportMetric(float64(b.N*len(pts))/b.Elapsed().Seconds(), "points/s")
}
