package ingest

import (
	"bytes"
	"io"
	"strconv"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

// plantCSV returns rows shaped like the plant data set: 100 analog tags
// sampled every second, values with two decimals.
func plantCSV(rows int) []byte {
	var b []byte
	for i := 0; i < rows; i++ {
		tag := i % 100
		b = append(b, "plant.ai"...)
		b = append(b, byte('0'+tag/10), byte('0'+tag%10), ',')
		b = strconv.AppendInt(b, 1700000000000+int64(i/100)*1000, 10)
		b = append(b, ',')
		v := float64((i*7919)%100000) / 100
		b = strconv.AppendFloat(b, v, 'f', 2, 64)
		b = append(b, '\n')
	}
	return b
}

// BenchmarkCSVReader measures the import parser on the plant data set shape.
// Run with: go test -run '^$' -bench CSVReader -benchmem ./internal/ingest/
func BenchmarkCSVReader(b *testing.B) {
	const rows = 200_000
	data := plantCSV(rows)
	br := bytes.NewReader(data)
	c := NewCSVReader(br)
	batch := make([]model.Point, 0, 65536)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		br.Reset(data)
		c.Reset(br)
		n := 0
		for {
			pts, err := c.Next(batch[:0], cap(batch))
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += len(pts)
		}
		if n != rows {
			b.Fatalf("parsed %d rows, want %d", n, rows)
		}
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkParseValue measures the float fast path alone.
func BenchmarkParseValue(b *testing.B) {
	in := [][]byte{[]byte("123.45"), []byte("-0.5"), []byte("99999.99"), []byte("7")}
	b.ReportAllocs()
	var sum float64
	for i := 0; i < b.N; i++ {
		v, err := parseValue(in[i&3])
		if err != nil {
			b.Fatal(err)
		}
		sum += v
	}
	_ = sum
}

// BenchmarkCSVReaderTags parses rows of 100,000 tags in time order, as
// `pith bench scale` posts them (a request is 200 minutes of every tag;
// here 5 minutes a request, the reader reset between them as the import
// handler's pool does):
//
//	go test -run '^$' -bench CSVReaderTags -benchmem ./internal/ingest/
func BenchmarkCSVReaderTags(b *testing.B) {
	const tags, minutes = 100_000, 5
	var data []byte
	for m := range minutes {
		for i := range tags {
			data = append(data, "scale.t"...)
			data = strconv.AppendInt(data, int64(i), 10)
			data = append(data, ',')
			data = strconv.AppendInt(data, 1577836800000+int64(m)*60_000, 10)
			data = append(data, ',')
			data = strconv.AppendFloat(data, float64((i*7919+m)%100000)/100, 'f', -1, 64)
			data = append(data, '\n')
		}
	}
	br := bytes.NewReader(data)
	c := NewCSVReader(br)
	batch := make([]model.Point, 0, 65536)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		br.Reset(data)
		c.Reset(br)
		for {
			_, err := c.Next(batch[:0], cap(batch))
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(tags*minutes)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}
