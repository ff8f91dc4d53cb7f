package energy

import (
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// Report is a period's energy per local day and the statistics of other
// tags, each beside the period before.
type Report struct {
	From, To         int64
	PrevFrom, PrevTo int64
	Days             []int64 // day starts; len(Days)+1 edges with To
	Energy           []EnergyReport
	Stats            []StatReport
}

// EnergyReport is one energy tag's part of a report.
type EnergyReport struct {
	Source
	Days              []Bucket // one per day of the period
	KWh, Cost         float64
	PrevKWh, PrevCost float64
	PeakKW            float64 // highest power (Power) or highest hourly energy over the hour (Counter)
	PeakAt            int64   // when: the sample's time, or the hour's start
	HasPeak           bool
}

// StatReport is the minimum, mean and maximum of a tag over the period
// and the one before; Has* say whether any sample was found.
type StatReport struct {
	Tag                        string
	Min, Mean, Max             float64
	Has                        bool
	PrevMin, PrevMean, PrevMax float64
	PrevHas                    bool
}

// PreviousPeriod returns the period before [from, to): the previous
// calendar month when [from, to) is one whole local month, else the same
// length immediately before.
func PreviousPeriod(from, to int64, loc *time.Location) (int64, int64) {
	f := time.UnixMilli(from).In(loc)
	if floorLocal(f, Month, loc).UnixMilli() == from && nextLocal(f, Month, loc).UnixMilli() == to {
		return time.Date(f.Year(), f.Month()-1, 1, 0, 0, 0, 0, loc).UnixMilli(), from
	}
	return from - (to - from), from
}

// ComputeReport builds the report of energy sources and stat tags over the
// local days covering [from, to).
func ComputeReport(q Queries, energy []Source, stats []string, from, to int64, loc *time.Location, tariff *Tariff) (*Report, error) {
	edges, err := Edges(from, to, Day, loc)
	if err != nil {
		return nil, err
	}
	from, to = edges[0], edges[len(edges)-1]
	r := &Report{From: from, To: to, Days: edges[:len(edges)-1]}
	r.PrevFrom, r.PrevTo = PreviousPeriod(from, to, loc)
	prevEdges := []int64{r.PrevFrom, r.PrevTo}
	for _, src := range energy {
		er := EnergyReport{Source: src}
		if er.Days, err = Compute(q, src, edges, loc, tariff); err != nil {
			return nil, err
		}
		for _, d := range er.Days {
			er.KWh += d.KWh
			er.Cost += d.Cost
		}
		prev, err := Compute(q, src, prevEdges, loc, tariff)
		if err != nil {
			return nil, err
		}
		er.PrevKWh, er.PrevCost = prev[0].KWh, prev[0].Cost
		if er.PeakKW, er.PeakAt, er.HasPeak, err = peak(q, src, from, to); err != nil {
			return nil, err
		}
		r.Energy = append(r.Energy, er)
	}
	for _, tag := range stats {
		sr := StatReport{Tag: tag}
		if sr.Min, sr.Mean, sr.Max, sr.Has, err = minMeanMax(q, tag, from, to); err != nil {
			return nil, err
		}
		if sr.PrevMin, sr.PrevMean, sr.PrevMax, sr.PrevHas, err = minMeanMax(q, tag, r.PrevFrom, r.PrevTo); err != nil {
			return nil, err
		}
		r.Stats = append(r.Stats, sr)
	}
	return r, nil
}

func minMeanMax(q Queries, tag string, from, to int64) (lo, mean, hi float64, ok bool, err error) {
	var v [3]float64
	for i, agg := range [3]model.Agg{model.AggMin, model.AggMean, model.AggMax} {
		b, err := q.Aggregate(tag, from, to, 1, agg)
		if err != nil {
			return 0, 0, 0, false, err
		}
		if !b[0].OK {
			return 0, 0, 0, false, nil
		}
		v[i] = b[0].V
	}
	return v[0], v[1], v[2], true, nil
}

// peak finds the highest demand in [from, to): for a power tag its highest
// sample (the hour holding it found from the rollups, then the sample from
// that hour's raw data); for a counter the hour with the most energy.
func peak(q Queries, src Source, from, to int64) (kw float64, at int64, ok bool, err error) {
	n := int(ceilDiv(to-from, hourMs))
	if src.Kind == Counter {
		edges := make([]int64, 0, n+1)
		for t := from; t < to; t += hourMs {
			edges = append(edges, t)
		}
		edges = append(edges, to)
		hours, err := Compute(q, src, edges, time.UTC, nil)
		if err != nil {
			return 0, 0, false, err
		}
		for _, h := range hours {
			if h.WithData == 0 {
				continue
			}
			d := h.KWh * hourMs / float64(h.End-h.Start)
			if !ok || d > kw {
				kw, at, ok = d, h.Start, true
			}
		}
		return kw, at, ok, nil
	}
	bs, err := q.Aggregate(src.Tag, from, to, n, model.AggMax)
	if err != nil {
		return 0, 0, false, err
	}
	best := -1
	for i, b := range bs {
		if b.OK && (best < 0 || b.V > bs[best].V) {
			best = i
		}
	}
	if best < 0 {
		return 0, 0, false, nil
	}
	a := from + ceilDiv(int64(best)*(to-from), int64(n))
	b := from + ceilDiv(int64(best+1)*(to-from), int64(n))
	for a < b {
		smp, err := q.Raw(src.Tag, a, b, rawPage)
		if err != nil {
			return 0, 0, false, err
		}
		for _, s := range smp {
			if s.V == bs[best].V {
				return s.V * src.Scale, s.T, true, nil
			}
		}
		if len(smp) < rawPage {
			break
		}
		a = smp[len(smp)-1].T + 1
	}
	return bs[best].V * src.Scale, a, true, nil
}
