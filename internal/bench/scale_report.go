package bench

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// makePlots draws the curves (scale-tags.svg, scale-history.svg,
// scale-live.svg).
func (r *ScaleResult) makePlots() {
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	if len(r.Tags) > 1 {
		var xs []float64
		var rate, bpp, idle, open, latest, mean []float64
		for _, t := range r.Tags {
			xs = append(xs, float64(t.Tags))
			rate = append(rate, t.PointsPerSec)
			bpp = append(bpp, t.BytesPerPoint)
			idle = append(idle, mb(t.IdleRSSBytes))
			open = append(open, t.OpenSeconds)
			latest = append(latest, t.LatestAllMs)
			mean = append(mean, t.MeanMs)
		}
		var b bytes.Buffer
		writePlotSVG(&b, "Tags curve: tags at 1/min ("+r.Profile+")", xs, func(x float64) string { return fmtNum(x) + " tags" }, true, []plotPanel{
			{"import", "points/s", rate}, {"disk", "bytes/point", bpp}, {"idle RSS", "MiB", idle},
			{"open", "s", open}, {"latest of all tags", "ms", latest}, {"one tag, 1000-bucket mean", "ms", mean},
		})
		r.plots["scale-tags.svg"] = b.Bytes()
	}
	var hx []float64
	var hopen, hfiles, hmean, hraw []float64
	for _, h := range r.History {
		if h.Tags != 1 {
			continue
		}
		hx = append(hx, float64(h.SpanDays)/365)
		hopen = append(hopen, h.OpenSeconds)
		hfiles = append(hfiles, float64(h.Files))
		hmean = append(hmean, h.MeanMs)
		hraw = append(hraw, h.RawHourMs)
	}
	if len(hx) > 1 {
		var b bytes.Buffer
		writePlotSVG(&b, "History curve: one tag at 10 s ("+r.Profile+")", hx, func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) + " y" }, false, []plotPanel{
			{"open", "s", hopen}, {"files", "count", hfiles}, {"1000-bucket mean over the span", "ms", hmean}, {"raw hour", "ms", hraw},
		})
		r.plots["scale-history.svg"] = b.Bytes()
	}
	if r.Live != nil && len(r.Live.Windows) > 1 {
		var xs []float64
		for i := range r.Live.Windows {
			xs = append(xs, (float64(i)+0.5)*r.Live.Seconds/float64(len(r.Live.Windows))/60)
		}
		var b bytes.Buffer
		writePlotSVG(&b, fmt.Sprintf("Live: %d tags at %.0f Hz (%s)", r.Live.Tags, r.Live.RateHz, r.Profile), xs,
			func(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) + " min" }, false,
			[]plotPanel{{"values acknowledged durable", "values/s", r.Live.Windows}})
		r.plots["scale-live.svg"] = b.Bytes()
	}
}

// WritePlots writes the SVG plots into dir and returns their names.
func (r *ScaleResult) WritePlots(dir, prefix string) ([]string, error) {
	var names []string
	for n := range r.plots {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		names[i] = filepath.Join(dir, prefix+n)
		if err := os.WriteFile(names[i], r.plots[n], 0o644); err != nil {
			return nil, err
		}
	}
	return names, nil
}

// WriteMarkdown prints the tables of docs/scaling.md.
func (r *ScaleResult) WriteMarkdown(w io.Writer) {
	mb := func(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
	ms := func(v float64) string {
		if math.IsNaN(v) {
			return "n/a"
		}
		return fmt.Sprintf("%.2f ms", v)
	}
	fmt.Fprintf(w, "Profile: %s. Load average (1, 5, 15 min) at start -> end: %s. Took %.0f s.\n\n", r.Profile, r.LoadAvg, r.Took)
	if len(r.Tags) > 0 {
		fmt.Fprintln(w, "**Tags** (1 value/min per tag):")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| store | points | import points/s | import time against the first size | bytes/point | peak RSS | idle RSS | open | files | latest of all tags | one tag, 1000-bucket mean | raw hour |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, t := range r.Tags {
			writeScaleRow(w, t, fmt.Sprintf(" %.2fx |", r.Tags[0].PointsPerSec/t.PointsPerSec), mb, ms)
		}
		fmt.Fprintln(w)
	}
	if len(r.History) > 0 {
		fmt.Fprintln(w, "**History**:")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| store | points | import points/s | bytes/point | peak RSS | idle RSS | open | files | latest of all tags | one tag, 1000-bucket mean over the span | raw hour |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
		for _, t := range r.History {
			writeScaleRow(w, t, "", mb, ms)
		}
		fmt.Fprintln(w)
	}
	if l := r.Live; l != nil {
		fmt.Fprintf(w, "**Live** (%d tags at %.0f Hz through `POST /api/v1/import`, answered once durable, %.0f s):\n\n", l.Tags, l.RateHz, l.Seconds)
		fmt.Fprintln(w, "| offered values/s | held values/s | commit p50 | p99 | max | CPU (% of a core) | RSS (peak) | device bytes/point | disk bytes/point | files | batches failed or not sent |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
		fmt.Fprintf(w, "| %.0f | %.0f | %s | %s | %s | %.1f%% | %s (%s) | %.2f | %.2f | %d | %d |\n\n",
			l.Offered, l.Held, ms(l.P50Ms), ms(l.P99Ms), ms(l.MaxMs), l.CPUPercent, mb(l.RSSBytes), mb(l.PeakRSS), l.BytesPerPt, l.DiskPerPt, l.Files, l.Errors)
	}
}

// writeScaleRow writes one row; ratio is an extra cell after the import
// rate (with its closing bar), or empty. A rate that is the median of
// several imports is followed by their range.
func writeScaleRow(w io.Writer, t ScaleRow, ratio string, mb func(int64) string, ms func(float64) string) {
	note := ""
	if t.Checked != "" {
		note = " (wrong answer: " + t.Checked + ")"
	}
	rate := fmt.Sprintf("%.0f", t.PointsPerSec)
	if len(t.ImportRates) > 1 {
		rate += fmt.Sprintf(" (median of %d: %.0f-%.0f)", len(t.ImportRates), slices.Min(t.ImportRates), slices.Max(t.ImportRates))
	}
	fmt.Fprintf(w, "| %s%s | %d | %s |%s %.2f | %s | %s (anon %s) | %.2f s | %d | %s | %s | %s |\n",
		t.Name, note, t.Points, rate, ratio, t.BytesPerPoint, mb(t.PeakRSSBytes), mb(t.IdleRSSBytes), mb(t.IdleAnonBytes), t.OpenSeconds, t.Files,
		ms(t.LatestAllMs), ms(t.MeanMs), ms(t.RawHourMs))
}

// Wrong lists the answers that were wrong (empty when all were right) and
// a Live test that stored nothing.
func (r *ScaleResult) Wrong() string {
	var out []string
	for _, rows := range [][]ScaleRow{r.Tags, r.History} {
		for _, t := range rows {
			if t.Checked != "" {
				out = append(out, t.Name+": "+t.Checked)
			}
		}
	}
	if r.Live != nil && r.Live.Held == 0 {
		out = append(out, "live: no batch was stored")
	}
	return strings.Join(out, "; ")
}
