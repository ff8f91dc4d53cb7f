//go:build !unix

package chunkenc

import "testing"

// cpuMeter is a no-op where getrusage is missing.
type cpuMeter struct{}

func startCPU(b *testing.B) *cpuMeter { b.ResetTimer(); return &cpuMeter{} }

func (m *cpuMeter) report(points int) {}
