package chunkenc

import (
	"math/rand/v2"
	"testing"
)

// Run the benchmarks with:
//
//	go test -run '^$' -bench . -benchmem ./internal/store/chunkenc/
//
// B/point is the encoded size of timestamps, values and qualities together
// per sample; ns/point is the time per sample.

// encodedChunk is one chunk encoded as the store lays it out: timestamps,
// values, then qualities.
type encodedChunk struct {
	n   int
	buf []byte
}

func encodeChunk(dst []byte, ts []int64, vs []float64, qs []uint8) []byte {
	dst = AppendTimestamps(dst, ts)
	dst = AppendFloats(dst, vs)
	return AppendQualities(dst, qs)
}

func decodeChunk(ts []int64, vs []float64, qs []uint8, c encodedChunk) ([]int64, []float64, []uint8, error) {
	ts, rest, err := DecodeTimestamps(ts, c.buf, c.n)
	if err != nil {
		return ts, vs, qs, err
	}
	vs, rest, err = DecodeFloats(vs, rest, c.n)
	if err != nil {
		return ts, vs, qs, err
	}
	qs, _, err = DecodeQualities(qs, rest, c.n)
	return ts, vs, qs, err
}

// feedCorpus is about two weeks of the feed, cut into chunks.
func feedCorpus() (chunks []encodedChunk, points int, ts [][]int64, vs [][]float64) {
	ts, vs = feedChunks(42, 120_000)
	for i := range ts {
		qs := make([]uint8, len(ts[i]))
		chunks = append(chunks, encodedChunk{n: len(ts[i]), buf: encodeChunk(nil, ts[i], vs[i], qs)})
		points += len(ts[i])
	}
	return chunks, points, ts, vs
}

func corpusBytes(chunks []encodedChunk) int {
	total := 0
	for _, c := range chunks {
		total += len(c.buf)
	}
	return total
}

func BenchmarkDecodeFeedChunk(b *testing.B) {
	chunks, points, _, _ := feedCorpus()
	ts, vs, qs := make([]int64, 0, 512), make([]float64, 0, 512), make([]uint8, 0, 512)
	b.ReportAllocs()
	cpu := startCPU(b)
	for i := 0; i < b.N; i++ {
		for _, c := range chunks {
			var err error
			if ts, vs, qs, err = decodeChunk(ts[:0], vs[:0], qs[:0], c); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(corpusBytes(chunks))/float64(points), "B/point")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(points), "ns/point")
	cpu.report(points)
}

func BenchmarkEncodeFeedChunk(b *testing.B) {
	chunks, points, ts, vs := feedCorpus()
	qs := make([]uint8, 512)
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	cpu := startCPU(b)
	for i := 0; i < b.N; i++ {
		for k := range ts {
			buf = encodeChunk(buf[:0], ts[k], vs[k], qs[:len(ts[k])])
		}
	}
	b.ReportMetric(float64(corpusBytes(chunks))/float64(points), "B/point")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(points), "ns/point")
	cpu.report(points)
}

// plantCorpus is 512-sample chunks of each plant signal kind, 1 s apart.
func plantCorpus(kind plantKind, signals int) []encodedChunk {
	r := rand.New(rand.NewPCG(uint64(kind), 9))
	ts := regularTimestamps(512, 1000)
	qs := make([]uint8, 512)
	var chunks []encodedChunk
	for range signals {
		vs := plantSignal(r, kind, 8*512)
		for k := 0; k < len(vs); k += 512 {
			chunks = append(chunks, encodedChunk{n: 512, buf: encodeChunk(nil, ts, vs[k:k+512], qs)})
		}
	}
	return chunks
}

func BenchmarkDecodePlant(b *testing.B) {
	for kind := plantAnalog; kind <= plantAnalogLog; kind++ {
		b.Run(kind.String(), func(b *testing.B) {
			chunks := plantCorpus(kind, 20)
			points := 512 * len(chunks)
			ts, vs, qs := make([]int64, 0, 512), make([]float64, 0, 512), make([]uint8, 0, 512)
			b.ReportAllocs()
			cpu := startCPU(b)
			for i := 0; i < b.N; i++ {
				for _, c := range chunks {
					var err error
					if ts, vs, qs, err = decodeChunk(ts[:0], vs[:0], qs[:0], c); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(corpusBytes(chunks))/float64(points), "B/point")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(points), "ns/point")
			cpu.report(points)
		})
	}
}

// BenchmarkDecodeRegular512 is the query hot path: timestamps and values of
// one regular decimal chunk of 512 samples.
func BenchmarkDecodeRegular512(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	ts := regularTimestamps(512, 1000)
	vs := plantSignal(r, plantAnalog, 512)
	enc := AppendFloats(AppendTimestamps(nil, ts), vs)
	dts, dvs := make([]int64, 0, 512), make([]float64, 0, 512)
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	cpu := startCPU(b)
	for i := 0; i < b.N; i++ {
		var rest []byte
		var err error
		dts, rest, _ = DecodeTimestamps(dts[:0], enc, 512)
		if dvs, _, err = DecodeFloats(dvs[:0], rest, 512); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/512, "ns/point")
	cpu.report(512)
	b.ReportMetric(float64(len(enc))/512, "B/point")
}

func BenchmarkEncodeRegular512(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	ts := regularTimestamps(512, 1000)
	vs := plantSignal(r, plantAnalog, 512)
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	cpu := startCPU(b)
	for i := 0; i < b.N; i++ {
		buf = AppendFloats(AppendTimestamps(buf[:0], ts), vs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/512, "ns/point")
	cpu.report(512)
	b.ReportMetric(float64(len(buf))/512, "B/point")
}

// BenchmarkFloatsNonDecimal measures the XOR fallback on math.Pi*i-like data.
func BenchmarkFloatsNonDecimal(b *testing.B) {
	vs := piRamp(512)
	enc := AppendFloats(nil, vs)
	dst := make([]float64, 0, 512)
	b.Run("encode", func(b *testing.B) {
		// Room for the decimal, XOR and bits candidates the encoder tries
		// one after the other in the buffer's spare capacity.
		buf := make([]byte, 0, 32<<10)
		b.ReportAllocs()
		cpu := startCPU(b)
		for i := 0; i < b.N; i++ {
			buf = AppendFloats(buf[:0], vs)
		}
		b.ReportMetric(float64(len(enc))/512, "B/point")
		cpu.report(512)
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		cpu := startCPU(b)
		for i := 0; i < b.N; i++ {
			dst, _, _ = DecodeFloats(dst[:0], enc, 512)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/512, "ns/point")
		cpu.report(512)
	})
}

// BenchmarkInts measures integer columns (rollup counts): a count of about
// 60 per cell with small variations.
func BenchmarkInts(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	vs := make([]int64, 512)
	for i := range vs {
		vs[i] = 60 - int64(r.IntN(3))
	}
	enc := AppendInts(nil, vs)
	b.Run("encode", func(b *testing.B) {
		buf := make([]byte, 0, 8192)
		b.ReportAllocs()
		cpu := startCPU(b)
		for i := 0; i < b.N; i++ {
			buf = AppendInts(buf[:0], vs)
		}
		b.ReportMetric(float64(len(enc))/512, "B/point")
		cpu.report(512)
	})
	b.Run("decode", func(b *testing.B) {
		dst := make([]int64, 0, 512)
		b.ReportAllocs()
		cpu := startCPU(b)
		for i := 0; i < b.N; i++ {
			dst, _, _ = DecodeInts(dst[:0], enc, 512)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/512, "ns/point")
		cpu.report(512)
	})
}

// TestCompressionTargets checks the sizes the design promises; sizes are
// deterministic, unlike timings.
func TestCompressionTargets(t *testing.T) {
	chunks, points, _, _ := feedCorpus()
	feed := float64(corpusBytes(chunks)) / float64(points)
	t.Logf("feed: %.3f B/point", feed)
	if feed > 0.90 {
		t.Errorf("feed: %.3f B/point, want <= 0.90", feed)
	}
	var total, n float64
	for kind := plantAnalog; kind <= plantAnalogLog; kind++ {
		c := plantCorpus(kind, 20)
		bpp := float64(corpusBytes(c)) / float64(512*len(c))
		t.Logf("plant %s: %.3f B/point", kind, bpp)
		if kind == plantAnalogLog {
			continue
		}
		total += bpp
		n++
		if kind >= plantDigital && bpp > 0.1 {
			t.Errorf("plant %s: %.3f B/point, want about 0", kind, bpp)
		}
	}
	t.Logf("plant mean over analog, counter, digital, setpoint: %.3f B/point", total/n)
}
