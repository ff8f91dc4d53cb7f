package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// plotPanel is one measured figure against the curve's x values.
type plotPanel struct {
	Name string
	Unit string
	Ys   []float64 // by x; NaN for not measured
}

// writePlotSVG draws one panel per figure, stacked, as the soak report's
// plot does (cmd/pith soak): a line with its points, y from 0 so that
// growth shows in proportion, x on a log scale when logX is set.
func writePlotSVG(w io.Writer, title string, xs []float64, xLabel func(float64) string, logX bool, panels []plotPanel) {
	const width, height, left, top, right, bottom = 720, 170, 90, 40, 30, 30
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n",
		width, height*len(panels)+20)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="%d" y="16" font-weight="bold" font-size="14">%s</text>`+"\n", left, xmlEscape(title))
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	fx := func(x float64) float64 {
		if logX {
			return math.Log10(max(x, 1e-9))
		}
		return x
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = min(lo, fx(x)), max(hi, fx(x))
	}
	if !(hi > lo) {
		lo, hi = lo-1, lo+1
	}
	xOf := func(x float64) float64 { return left + pw*(fx(x)-lo)/(hi-lo) }
	for i, p := range panels {
		y0 := float64(20 + i*height + top)
		top := 0.0
		for _, y := range p.Ys {
			if !math.IsNaN(y) {
				top = max(top, y*1.15)
			}
		}
		if top == 0 {
			top = 1
		}
		fmt.Fprintf(w, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", left, y0, pw, ph)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" font-weight="bold">%s (%s)</text>`+"\n", left, y0-8, xmlEscape(p.Name), xmlEscape(p.Unit))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-4, y0+10, fmtNum(top))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">0</text>`+"\n", left-4, y0+ph)
		for _, x := range xs {
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", xOf(x), y0+ph+16, xmlEscape(xLabel(x)))
		}
		var pts strings.Builder
		for k, x := range xs {
			if k >= len(p.Ys) || math.IsNaN(p.Ys[k]) {
				continue
			}
			px, py := xOf(x), y0+ph-ph*p.Ys[k]/top
			fmt.Fprintf(&pts, "%.1f,%.1f ", px, py)
			fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3" fill="#c33"/>`+"\n", px, py)
			fmt.Fprintf(w, `<text x="%.1f" y="%.1f" font-size="10" fill="#555">%s</text>`+"\n", px+5, py-5, fmtNum(p.Ys[k]))
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="#c33" stroke-width="1.5" points="%s"/>`+"\n", pts.String())
	}
	fmt.Fprintln(w, "</svg>")
}

// fmtNum prints a figure with three significant digits.
func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case a >= 1e4:
		return fmt.Sprintf("%.3gk", v/1e3)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
