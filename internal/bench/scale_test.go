package bench

import (
	"bytes"
	"encoding/xml"
	"math"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestWriteScaleCSV: the generated history has every tag at every step,
// time-major, with time stamps from scaleT0 and two-decimal values.
func TestWriteScaleCSV(t *testing.T) {
	var b bytes.Buffer
	n, err := writeScaleCSV(&b, 3, 60, 1)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if n != 3*1440 || len(lines) != 3*1440 {
		t.Fatalf("%d points, %d lines, want %d", n, len(lines), 3*1440)
	}
	for i, l := range lines {
		f := strings.Split(l, ",")
		if len(f) != 3 || f[0] != "scale.t"+strconv.Itoa(i%3) {
			t.Fatalf("line %d: %q", i, l)
		}
		ms, _ := strconv.ParseInt(f[1], 10, 64)
		if want := scaleT0 + int64(i/3)*60000; ms != want {
			t.Fatalf("line %d: time %d, want %d", i, ms, want)
		}
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil || math.Abs(v*100-math.Round(v*100)) > 1e-6 {
			t.Fatalf("line %d: value %q", i, f[2])
		}
	}
}

// TestScalePlots: the plots are well-formed SVG with one point per size.
func TestScalePlots(t *testing.T) {
	r := &ScaleResult{Profile: "p", plots: map[string][]byte{},
		Tags:    []ScaleRow{{Tags: 100, PointsPerSec: 1e6, MeanMs: 1}, {Tags: 1000, PointsPerSec: 9e5, MeanMs: math.NaN()}},
		History: []ScaleRow{{Tags: 1, SpanDays: 365}, {Tags: 1, SpanDays: 3650, Files: 3700}},
		Live:    &LiveResult{Tags: 10, RateHz: 10, Seconds: 60, Windows: []float64{100, 100, 90}},
	}
	r.makePlots()
	for _, name := range []string{"scale-tags.svg", "scale-history.svg", "scale-live.svg"} {
		b := r.plots[name]
		d := xml.NewDecoder(bytes.NewReader(b))
		circles := 0
		for {
			tok, err := d.Token()
			if err != nil {
				if err.Error() != "EOF" {
					t.Fatalf("%s: %v", name, err)
				}
				break
			}
			if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
				circles++
			}
		}
		if circles == 0 {
			t.Fatalf("%s has no points:\n%s", name, b)
		}
	}
	if bytes.Contains(r.plots["scale-tags.svg"], []byte("NaN")) {
		t.Fatal("a NaN figure was drawn")
	}
}

// TestProfileCommand: the small profile confines the server.
func TestProfileCommand(t *testing.T) {
	if _, err := ParseProfile("big"); err == nil {
		t.Fatal("unknown profile accepted")
	}
	p, err := ParseProfile("small")
	if err != nil {
		t.Fatal(err)
	}
	cmd := p.command("/bin/pith", "serve")
	for _, kv := range []string{"GOMAXPROCS=1", "GOMEMLIMIT=1GiB"} {
		if !slices.Contains(cmd.Env, kv) {
			t.Fatalf("env lacks %s", kv)
		}
	}
	if _, err := exec.LookPath("taskset"); err == nil && !slices.Equal(cmd.Args[:3], []string{cmd.Args[0], "-c", "0"}) {
		t.Fatalf("args %q: want taskset -c 0", cmd.Args)
	}
	if d := ProfileDefault.command("/bin/pith", "serve"); d.Env != nil || d.Args[0] != "/bin/pith" {
		t.Fatalf("default profile changed the command: %q %q", d.Args, d.Env)
	}
}

// TestScaleImportMedian: a row's rate is the median of its imports, and the
// Tags table gives each size's import time against the first size's.
func TestScaleImportMedian(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Fatalf("median of 3: %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("median of 4: %v", got)
	}
	if !math.IsNaN(median(nil)) {
		t.Fatal("median of nothing is not NaN")
	}
	r := &ScaleResult{Profile: "p", Tags: []ScaleRow{
		{Name: "a", Tags: 100, PointsPerSec: 4e6, ImportRates: []float64{3e6, 4e6, 5e6}},
		{Name: "b", Tags: 1000, PointsPerSec: 2e6, ImportRates: []float64{2e6}},
	}}
	var b bytes.Buffer
	r.WriteMarkdown(&b)
	out := b.String()
	for _, want := range []string{"| a | 0 | 4000000 (median of 3: 3000000-5000000) | 1.00x |", "| b | 0 | 2000000 | 2.00x |"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
}
