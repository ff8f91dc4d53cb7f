package tagseq

import (
	"strconv"
	"testing"
)

// BenchmarkResolve resolves the names of a time-major load of 1,000 and
// 100,000 tags to ids, by a map alone and by a Guess before the map:
//
//	go test -run '^$' -bench Resolve ./internal/tagseq
func BenchmarkResolve(b *testing.B) {
	for _, tags := range []int{1000, 100_000} {
		names := make([]string, tags)
		for i := range names {
			names[i] = "scale.t" + strconv.Itoa(i)
		}
		b.Run("map/"+strconv.Itoa(tags), func(b *testing.B) {
			b.ReportAllocs()
			ids := make(map[string]uint32, tags)
			for i, n := range names {
				ids[n] = uint32(i)
			}
			var sum uint32
			for i := 0; b.Loop(); i++ {
				sum += ids[names[i%tags]]
			}
			_ = sum
		})
		b.Run("guess/"+strconv.Itoa(tags), func(b *testing.B) {
			b.ReportAllocs()
			r := &resolver{ids: make(map[string]uint32, tags)}
			for _, n := range names {
				r.id(n, false)
			}
			var sum uint32
			for i := 0; b.Loop(); i++ {
				sum += r.id(names[i%tags], false)
			}
			_ = sum
		})
	}
}
