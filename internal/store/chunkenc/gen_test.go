package chunkenc

import (
	"math"
	"math/rand/v2"
)

// The generators below make the realistic data the compression targets are
// stated on. They are deterministic for a given seed.

// feedChunks returns chunks of an emoncms-like feed: one integer value every
// 10 s around a slow sine from 180 to 300 with gaussian noise (sigma 15)
// and rare spikes of +2000 lasting 3 to 60 samples, cut into chunks of 256
// to 512 samples.
func feedChunks(seed uint64, points int) (ts [][]int64, vs [][]float64) {
	r := rand.New(rand.NewPCG(seed, 1))
	t := int64(1_700_000_000_000)
	spike := 0
	var cts []int64
	var cvs []float64
	size := 256 + r.IntN(257)
	for i := range points {
		base := 240 + 60*math.Sin(2*math.Pi*float64(i)/8640)
		v := math.Trunc(base + r.NormFloat64()*15)
		if spike == 0 && r.IntN(3000) == 0 {
			spike = 3 + r.IntN(58)
		}
		if spike > 0 {
			v += 2000
			spike--
		}
		cts = append(cts, t)
		cvs = append(cvs, v)
		t += 10_000
		if len(cts) == size {
			ts, vs = append(ts, cts), append(vs, cvs)
			cts, cvs = nil, nil
			size = 256 + r.IntN(257)
		}
	}
	if len(cts) > 0 {
		ts, vs = append(ts, cts), append(vs, cvs)
	}
	return ts, vs
}

// plantKind names one kind of plant signal.
type plantKind int

const (
	plantAnalog    plantKind = iota // sine + gaussian noise, rounded to 0.01
	plantCounter                    // energy counter, +uniform(0, 0.05) per second, rounded to 0.001
	plantDigital                    // 0/1 state flipping about every 60 s
	plantSetpoint                   // constant
	plantAnalogLog                  // like plantAnalog, sigma log-uniform in 0.01..0.5
)

func (k plantKind) String() string {
	return [...]string{"analog", "counter", "digital", "setpoint", "analog-log-sigma"}[k]
}

// plantSignal returns n one-second samples of one plant signal.
func plantSignal(r *rand.Rand, kind plantKind, n int) []float64 {
	vs := make([]float64, n)
	switch kind {
	case plantAnalog, plantAnalogLog:
		sigma := 0.01 + r.Float64()*0.49
		if kind == plantAnalogLog {
			sigma = 0.01 * math.Pow(50, r.Float64())
		}
		period := 600 + r.Float64()*3000
		amp := 1 + r.Float64()*20
		off := r.Float64() * 100
		for i := range vs {
			x := off + amp*math.Sin(2*math.Pi*float64(i)/period) + r.NormFloat64()*sigma
			vs[i] = math.Round(x*100) / 100
		}
	case plantCounter:
		c := r.Float64() * 10000
		for i := range vs {
			c += r.Float64() * 0.05
			vs[i] = math.Round(c*1000) / 1000
		}
	case plantDigital:
		v, next := float64(r.IntN(2)), 30+r.IntN(60)
		for i := range vs {
			if i == next {
				v = 1 - v
				next += 30 + r.IntN(60)
			}
			vs[i] = v
		}
	case plantSetpoint:
		c := math.Round(r.Float64()*1000) / 10
		for i := range vs {
			vs[i] = c
		}
	}
	return vs
}

// regularTimestamps returns n timestamps step ms apart.
func regularTimestamps(n int, step int64) []int64 {
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = 1_700_000_000_000 + int64(i)*step
	}
	return ts
}
