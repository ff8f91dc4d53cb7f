package config

import (
	"os"
	"testing"
)

// Configuration is read once at start and on reload, so these benchmarks
// guard against accidental blow-ups (a quadratic check, a huge station
// list) rather than chase nanoseconds.
//
// Run: go test ./internal/config -run '^$' -bench . -benchmem

func BenchmarkParseExample(b *testing.B) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExpandedTags expands a station of 1,000 tags, the size of a
// large PLC, and reports the cost per tag.
func BenchmarkExpandedTags(b *testing.B) {
	spec := DefaultModbusTagSpec()
	spec.Name, spec.Register, spec.Type, spec.Count = "plc.r{i}", "holding:0", "uint16", 1000
	c := ModbusClient{Tags: []ModbusTagSpec{spec}}
	b.ReportAllocs()
	for b.Loop() {
		tags, err := c.ExpandedTags()
		if err != nil || len(tags) != 1000 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/tag")
}
