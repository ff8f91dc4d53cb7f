package energy

import (
	"fmt"
	"math"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// Kind says how a tag measures energy.
type Kind uint8

// The kinds of energy source.
const (
	// Power is an instantaneous power (W or kW): energy is its integral.
	Power Kind = iota + 1
	// Counter is a cumulative energy register (Wh or kWh): energy is the
	// sum of its increases, a drop counted as a reset to zero.
	Counter
)

// String returns the API name of the kind.
func (k Kind) String() string {
	switch k {
	case Power:
		return "power"
	case Counter:
		return "counter"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Source is a tag read as energy.
type Source struct {
	Tag   string
	Kind  Kind
	Scale float64 // multiplies values into kW (Power) or kWh (Counter)
	// Until, when not 0, is now: a power piece reaching past it counts
	// its mean only up to it, so the hour in progress is not counted whole.
	Until int64
}

// SourceFor guesses the kind and scale of a tag from its unit: W and kW
// are power, Wh and kWh counters; "" and other units are taken as kW.
func SourceFor(tag, unit string) Source {
	switch unit {
	case "W":
		return Source{Tag: tag, Kind: Power, Scale: 0.001}
	case "kW":
		return Source{Tag: tag, Kind: Power, Scale: 1}
	case "MW":
		return Source{Tag: tag, Kind: Power, Scale: 1000}
	case "Wh":
		return Source{Tag: tag, Kind: Counter, Scale: 0.001}
	case "kWh":
		return Source{Tag: tag, Kind: Counter, Scale: 1}
	case "MWh":
		return Source{Tag: tag, Kind: Counter, Scale: 1000}
	}
	return Source{Tag: tag, Kind: Power, Scale: 1}
}

// Bucket is the energy of one calendar bucket [Start, End).
type Bucket struct {
	Start, End int64
	KWh        float64 // net energy: imported minus exported
	Import     float64 // kWh of the pieces with positive energy
	Export     float64 // kWh of the pieces with negative energy, as a positive number
	Cost       float64 // import at the tariff's prices, less export at its export price, plus the standing charge
	Pieces     int     // hour pieces in the bucket
	WithData   int     // pieces holding at least one sample
}

// piece is one part of a bucket, about an hour long.
type piece struct {
	a, b   int64
	bucket int
}

// lookahead bounds the search for the counter reading that closes the
// last piece: the first sample at most this long after the period.
const lookahead = 31 * 24 * hourMs

// Compute returns the energy of src in each bucket between consecutive
// edges, priced by tariff (nil: no cost). Each bucket is summed from
// pieces of an hour read from the rollups (docs/api.md, "Energy").
func Compute(q Queries, src Source, edges []int64, loc *time.Location, tariff *Tariff) ([]Bucket, error) {
	if len(edges) < 2 {
		return nil, nil
	}
	out := make([]Bucket, len(edges)-1)
	for i := range out {
		out[i].Start, out[i].End = edges[i], edges[i+1]
	}
	// One store call covers the period when every edge falls on a whole
	// hour from the first one (every zone but those with half-hour DST);
	// otherwise each bucket is split into its own equal parts near an hour.
	type call struct {
		from, to int64
		n        int
		first    int // index of its first piece
	}
	var calls []call
	var ps []piece
	whole := true
	for _, e := range edges {
		if (e-edges[0])%hourMs != 0 {
			whole = false
			break
		}
	}
	addCall := func(from, to int64, bucketOf func(a int64) int) {
		n := int((to - from + hourMs - 1) / hourMs)
		c := call{from, to, n, len(ps)}
		for i := 0; i < n; i++ {
			a := from + ceilDiv(int64(i)*(to-from), int64(n))
			b := from + ceilDiv(int64(i+1)*(to-from), int64(n))
			ps = append(ps, piece{a, b, bucketOf(a)})
		}
		calls = append(calls, c)
	}
	if whole {
		bi := 0
		addCall(edges[0], edges[len(edges)-1], func(a int64) int {
			for a >= edges[bi+1] {
				bi++
			}
			return bi
		})
	} else {
		for i := 0; i+1 < len(edges); i++ {
			addCall(edges[i], edges[i+1], func(int64) int { return i })
		}
	}
	aggs := []model.Agg{model.AggMean}
	if src.Kind == Counter {
		aggs = []model.Agg{model.AggFirst, model.AggLast, model.AggMin, model.AggMax}
	}
	vals := make([][]float64, len(aggs))
	ok := make([]bool, len(ps))
	for k, agg := range aggs {
		vals[k] = make([]float64, len(ps))
		for _, c := range calls {
			bs, err := q.Aggregate(src.Tag, c.from, c.to, c.n, agg)
			if err != nil {
				return nil, err
			}
			for i, b := range bs {
				vals[k][c.first+i] = b.V
				ok[c.first+i] = b.OK
			}
		}
	}
	e := make([]float64, len(ps)) // kWh per piece
	switch src.Kind {
	case Power:
		for i, p := range ps {
			if ok[i] {
				end := p.b
				if src.Until > p.a && src.Until < end {
					end = src.Until
				}
				e[i] = vals[0][i] * src.Scale * float64(end-p.a) / hourMs
			}
		}
	case Counter:
		first, last, lo, hi := vals[0], vals[1], vals[2], vals[3]
		prev := -1
		for i := range ps {
			if !ok[i] {
				continue
			}
			if lo[i] < first[i] || last[i] < hi[i] {
				e[i] = (hi[i] - first[i]) + last[i] // one reset inside the piece
			} else {
				e[i] = last[i] - first[i]
			}
			if prev >= 0 {
				e[prev] += step(last[prev], first[i])
			}
			prev = i
		}
		if prev >= 0 {
			end := edges[len(edges)-1]
			next, err := q.Raw(src.Tag, end, end+lookahead, 1)
			if err != nil {
				return nil, err
			}
			if len(next) == 1 {
				e[prev] += step(last[prev], next[0].V)
			}
		}
		for i := range e {
			e[i] *= src.Scale
		}
	default:
		return nil, fmt.Errorf("unknown energy kind %d", src.Kind)
	}
	for i, p := range ps {
		bk := &out[p.bucket]
		bk.Pieces++
		if !ok[i] {
			continue
		}
		bk.WithData++
		bk.KWh += e[i]
		if e[i] >= 0 {
			bk.Import += e[i]
			if tariff != nil {
				bk.Cost += e[i] * tariff.meanPrice(p.a, p.b, loc)
			}
		} else {
			bk.Export -= e[i]
			if tariff != nil {
				bk.Cost += e[i] * tariff.ExportPrice
			}
		}
	}
	if tariff != nil {
		for i := range out {
			out[i].Cost += tariff.standing(out[i].Start, out[i].End, loc)
		}
	}
	return out, nil
}

// step is a counter's increase from reading a to the next reading b: a drop
// is a reset, after which the register counted b from zero.
func step(a, b float64) float64 {
	if b >= a {
		return b - a
	}
	return math.Max(b, 0)
}

// ceilDiv returns ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
