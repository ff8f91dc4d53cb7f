package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
)

// finish checks and reports a soak run once its load has stopped: the
// counters read back from the API and from PostgreSQL, NATS, the clients'
// errors and the process's stability; it writes soak.csv and soak.svg.
func (s *soak) finish() {
	t := s.t
	defer s.writeOutputs()
	time.Sleep(3 * time.Second) // the last acknowledged MQTT messages reach the store
	tags, mods, want := s.soakTags()
	from, to := s.t0.Add(-time.Minute).UnixMilli(), time.Now().Add(time.Minute).UnixMilli()
	series := map[string]*soakSeries{}
	for _, tag := range tags {
		r, err := s.readSeries(tag, from, to, mods[tag])
		if err != nil {
			s.fail("%v", err)
			continue
		}
		series[tag] = r
		t.Logf("api %-13s %7d samples, values %v..%v, gaps %d (%d values missing), repeats %d, same-ts %d, longest interval %d ms %s",
			tag, r.n, r.first, r.last, r.gaps, r.missing, r.rep, r.dupTS, r.maxDT, r.worst)
		switch {
		case r.n == 0:
			s.fail("counter %s: nothing stored", tag)
		case r.gaps > 0 || r.rep > 0 || r.dupTS > 0:
			s.fail("counter %s: %d gaps (%d values missing), %d repeats, %d samples at a repeated timestamp; first: %s",
				tag, r.gaps, r.missing, r.rep, r.dupTS, r.worst)
		case want[tag] >= 0 && int64(r.n) != want[tag]:
			s.fail("counter %s: %d samples stored, the client had %d acknowledged", tag, r.n, want[tag])
		}
	}
	if mb := series["soak.mb.c32"]; mb != nil {
		s.pauses(mb)
	}
	s.logWarnings()
	s.checkPostgres(tags, series)
	s.checkNATS()
	m := s.metrics()
	for _, k := range []string{"pith_sys_archive_dropped", "pith_sys_tags_refused", "pith_sys_store_corrupt_blocks",
		"pith_sys_forward_soakpg_dropped", "pith_sys_forward_soaknats_dropped"} {
		if m[k] != 0 {
			s.fail("%s = %v, want 0", k, m[k])
		}
	}
	t.Logf("forward errors: postgres %v, nats %v; http 5xx answers %v", m["pith_sys_forward_soakpg_errors"],
		m["pith_sys_forward_soaknats_errors"], m["pith_sys_http_errors"])
	for name, c := range map[string]*soakCounts{"line protocol lines": &s.lp, "mqtt messages": &s.mq, "events": &s.ev, "queries": &s.qr} {
		t.Logf("%-19s %8d ok, %d retries, %d errors, slowest %v", name, c.ok.Load(), c.retries.Load(), c.errs.Load(),
			time.Duration(c.maxLatency.Load()).Round(time.Millisecond))
		if c.errs.Load() > 0 {
			s.fail("%s: %d failed requests", name, c.errs.Load())
		}
	}
	s.stability()
	s.stopped = true
	s.proc.stop(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.failures) > 0 {
		t.Errorf("soak of %v failed:\n%s", s.plan.dur, joinLines(s.failures))
	}
}

// pauses reports the longest interval between two Modbus samples during
// each reload and backup, against the longest of the whole run.
func (s *soak) pauses(mb *soakSeries) {
	longest := func(from, to time.Time) int64 {
		var m int64
		a, b := from.UnixMilli(), to.UnixMilli()
		for i := 1; i < len(mb.ts); i++ {
			if mb.ts[i] >= a && mb.ts[i-1] <= b {
				m = max(m, mb.ts[i]-mb.ts[i-1])
			}
		}
		return m
	}
	for _, e := range s.reloads {
		s.t.Logf("reload at %v took %v, longest Modbus interval around it %d ms: %s", e.at.Sub(s.t0).Round(time.Second),
			e.took.Round(time.Millisecond), longest(e.at.Add(-time.Second), e.at.Add(e.took+5*time.Second)), e.note)
	}
	for _, e := range s.backups {
		s.t.Logf("backup at %v took %v (%s), longest Modbus interval around it %d ms", e.at.Sub(s.t0).Round(time.Second),
			e.took.Round(time.Millisecond), e.note, longest(e.at.Add(-time.Second), e.at.Add(e.took+5*time.Second)))
	}
	s.t.Logf("longest Modbus interval of the run %d ms (period %v)", mb.maxDT, soakMBPeriod)
}

// logWarnings repeats pith's warnings and errors, which explain most gaps
// (a poll that timed out, a reconnection).
func (s *soak) logWarnings() {
	var n int
	for line := range strings.Lines(readFull(s.proc.log)) {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			if n++; n <= 20 {
				s.t.Logf("pith: %s", strings.TrimSpace(line))
			}
		}
	}
	s.t.Logf("pith logged %d warnings and errors", n)
}

// checkPostgres waits until the forwarded counters reach PostgreSQL (as
// many rows as the API holds, up to its last sample) and checks that each
// counts up by one with no repeated (tag, ts).
func (s *soak) checkPostgres(tags []string, series map[string]*soakSeries) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.pgURL)
	if err != nil {
		s.fail("connect postgres: %v", err)
		return
	}
	defer conn.Close(context.Background())
	q := `SELECT count(*), count(DISTINCT ts), count(*) FILTER (WHERE d <> 1 AND d <> -65535)
		FROM (SELECT ts, value - lag(value) OVER (ORDER BY ts) AS d FROM ` + s.pgTable() + `
		      WHERE tag = $1 AND ts <= to_timestamp($2::float8 / 1000)) x`
	waitFrom := time.Now()
	for _, tag := range tags {
		r := series[tag]
		if r == nil {
			continue
		}
		var rows, distinct, breaks int64
		for {
			err := conn.QueryRow(ctx, q, "soak"+s.id+"."+tag, r.lastTS).Scan(&rows, &distinct, &breaks)
			if err != nil && !strings.Contains(err.Error(), "does not exist") {
				s.fail("query postgres for %s: %v", tag, err)
				return
			}
			if rows >= int64(r.n) || ctx.Err() != nil {
				break
			}
			time.Sleep(time.Second)
		}
		s.t.Logf("postgres %-13s %7d rows (api %d), %d distinct ts, %d breaks in the count", tag, rows, r.n, distinct, breaks)
		if rows != int64(r.n) || distinct != rows || breaks != 0 {
			s.fail("postgres %s: %d rows, %d distinct timestamps, %d breaks in the count; the API holds %d samples",
				tag, rows, distinct, breaks, r.n)
		}
	}
	s.t.Logf("postgres caught up %v after the read-back", time.Since(waitFrom).Round(time.Second))
}

// checkNATS checks that the run's subject received batches.
func (s *soak) checkNATS() {
	nc, err := nats.Connect(s.natsURL)
	if err != nil {
		s.fail("connect nats: %v", err)
		return
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		s.fail("jetstream: %v", err)
		return
	}
	subj := "pith.soak" + s.id + ".samples"
	info, err := js.StreamInfo("PITH", &nats.StreamInfoRequest{SubjectsFilter: subj})
	if err != nil {
		s.fail("nats stream info: %v", err)
		return
	}
	s.t.Logf("nats %s: %d messages (batches)", subj, info.State.Subjects[subj])
	if info.State.Subjects[subj] == 0 {
		s.fail("nats: no message on %s", subj)
	}
}

// soakMetric is one of the judged readings.
type soakMetric struct {
	name string
	get  func(soakSample) float64
}

var soakMetrics = []soakMetric{
	{"rss_bytes", func(x soakSample) float64 { return float64(x.rss) }},
	{"goroutines", func(x soakSample) float64 { return float64(x.goroutines) }},
	{"fds", func(x soakSample) float64 { return float64(x.fds) }},
}

// stability judges RSS, goroutines and open files: the post-warm-up level
// is the median of the samples in [warm, warm+ref); every later sample
// must stay within 10% of it plus soakAllowance. It also reports bytes
// written per stored point.
func (s *soak) stability() {
	s.mu.Lock()
	defer s.mu.Unlock()
	report, failures := judgeSoak(s.samples, s.plan)
	report = append(report, spanMedians(s.samples, s.plan)...)
	for _, l := range report {
		s.t.Log(l)
	}
	s.failures = append(s.failures, failures...)
	loads := make([]float64, len(s.samples))
	for i, x := range s.samples {
		loads[i] = x.load1
	}
	slices.Sort(loads)
	s.t.Logf("host load average (1 min) over the run: min %.1f, median %.1f, max %.1f",
		loads[0], loads[len(loads)/2], loads[len(loads)-1])
	first, last := s.samples[0], s.samples[len(s.samples)-1]
	dw, dp := last.writeBytes-first.writeBytes, last.points-first.points
	if dp > 0 {
		s.t.Logf("device bytes written %d for %d stored points: %.1f B/point (%.1f B/point without the %d B backups copied)",
			dw, dp, float64(dw)/float64(dp), float64(dw-s.backupBytes)/float64(dp), s.backupBytes)
	}
}

// judgeSoak applies the stability rule to samples in time order and
// returns a report line per reading and the failures.
func judgeSoak(samples []soakSample, p soakPlan) (report, failures []string) {
	var ref, rest []soakSample
	for _, x := range samples {
		switch {
		case x.t >= p.warm && x.t < p.warm+p.ref:
			ref = append(ref, x)
		case x.t >= p.warm+p.ref:
			rest = append(rest, x)
		}
	}
	if len(ref) == 0 || len(rest) == 0 {
		return nil, []string{fmt.Sprintf("run too short to judge: %d reference and %d later samples", len(ref), len(rest))}
	}
	first, last := samples[0], samples[len(samples)-1]
	for _, m := range soakMetrics {
		vals := make([]float64, len(ref))
		for i, x := range ref {
			vals[i] = m.get(x)
		}
		slices.Sort(vals)
		level := vals[len(vals)/2]
		if len(vals)%2 == 0 {
			level = (vals[len(vals)/2-1] + vals[len(vals)/2]) / 2
		}
		peak, at := 0.0, time.Duration(0)
		for _, x := range rest {
			if v := m.get(x); v > peak {
				peak, at = v, x.t
			}
		}
		bound := level*1.10 + soakAllowance[m.name]
		report = append(report, fmt.Sprintf("%-10s start %.0f, warm (median %v-%v) %.0f, end %.0f, max after %v %.0f at %v (bound %.0f, %+.1f%%)",
			m.name, m.get(first), p.warm, p.warm+p.ref, level, m.get(last), p.warm+p.ref, peak, at.Round(time.Second),
			bound, 100*(peak-level)/level))
		if peak > bound {
			failures = append(failures, fmt.Sprintf("%s grew from %.0f (median of %v-%v) to %.0f at %v: over 10%% + %.0f",
				m.name, level, p.warm, p.warm+p.ref, peak, at.Round(time.Second), soakAllowance[m.name]))
		}
	}
	return report, failures
}

// spanMedians reports the medians of RSS, its anonymous part and the Go
// heap over the reference span and then over spans that end at every
// 20 minutes, so that a growth shows where it happens (a fill that ends,
// a leak that goes on).
func spanMedians(samples []soakSample, p soakPlan) []string {
	if len(samples) == 0 {
		return nil
	}
	last := samples[len(samples)-1].t
	end := last + time.Nanosecond
	bounds := []time.Duration{p.warm, p.warm + p.ref}
	for b := 20 * time.Minute; b < last; b += 20 * time.Minute {
		if b > bounds[len(bounds)-1] {
			bounds = append(bounds, b)
		}
	}
	bounds = append(bounds, end)
	median := func(v []float64) float64 {
		slices.Sort(v)
		if len(v)%2 == 0 {
			return (v[len(v)/2-1] + v[len(v)/2]) / 2
		}
		return v[len(v)/2]
	}
	var lines []string
	for _, m := range []soakMetric{
		{"rss MB", func(x soakSample) float64 { return float64(x.rss) / 1e6 }},
		{"anon MB", func(x soakSample) float64 { return float64(x.rssAnon) / 1e6 }},
		{"heap MB", func(x soakSample) float64 { return float64(x.heap) / 1e6 }},
	} {
		l := fmt.Sprintf("%-8s medians:", m.name)
		for i := 0; i+1 < len(bounds); i++ {
			var v []float64
			for _, x := range samples {
				if x.t >= bounds[i] && x.t < bounds[i+1] {
					v = append(v, m.get(x))
				}
			}
			if len(v) > 0 {
				l += fmt.Sprintf(" %v-%v %.1f;", bounds[i].Round(time.Second), bounds[i+1].Round(time.Second), median(v))
			}
		}
		lines = append(lines, l)
	}
	return lines
}

// TestSoakJudges checks, without running a soak, that its two judges
// catch what they are for: a counter that skips or repeats a value, and
// a reading that grows past 10% of its post-warm-up level.
func TestSoakJudges(t *testing.T) {
	series := []struct {
		name                string
		vals                []float64
		mod                 float64
		gaps, missing, reps int
	}{
		{"consecutive", []float64{5, 6, 7, 8}, 0, 0, 0, 0},
		{"wraps", []float64{65534, 65535, 0, 1}, 65536, 0, 0, 0},
		{"gap", []float64{1, 2, 5, 6}, 0, 1, 2, 0},
		{"repeat", []float64{1, 2, 2, 3}, 0, 0, 0, 1},
		{"back", []float64{1, 2, 3, 1, 2}, 0, 0, 0, 1},
	}
	for _, c := range series {
		r := &soakSeries{mod: c.mod}
		for i, v := range c.vals {
			r.add(int64(1000+100*i), v)
		}
		if r.gaps != c.gaps || r.missing != c.missing || r.rep != c.reps {
			t.Errorf("%s: gaps %d missing %d repeats %d, want %d %d %d", c.name, r.gaps, r.missing, r.rep, c.gaps, c.missing, c.reps)
		}
	}
	p := soakPlan{warm: time.Minute, ref: time.Minute}
	run := func(fds func(min int) int64) []soakSample {
		var s []soakSample
		for m := range 10 {
			s = append(s, soakSample{t: time.Duration(m) * time.Minute, rss: 100 << 20, goroutines: 50, fds: fds(m)})
		}
		return s
	}
	for _, c := range []struct {
		name string
		fds  func(min int) int64
		fail bool
	}{
		{"steady", func(int) int64 { return 40 }, false},
		{"warm-up growth", func(m int) int64 { return int64(10 + 30*min(m, 1)) }, false},
		{"within allowance", func(m int) int64 { return int64(40 + min(m, 8)) }, false},
		{"leak", func(m int) int64 { return int64(40 + 2*m) }, true},
	} {
		if _, f := judgeSoak(run(c.fds), p); (len(f) > 0) != c.fail {
			t.Errorf("%s: failures %q, want failing %v", c.name, f, c.fail)
		}
	}
	// Span medians: an hour sampled every minute, RSS in MB = the minute.
	var hour []soakSample
	for m := range 61 {
		hour = append(hour, soakSample{t: time.Duration(m) * time.Minute, rss: int64(m) * 1e6})
	}
	got := spanMedians(hour, newSoakPlan(time.Hour))[0]
	if want := "rss MB   medians: 5m0s-7m0s 5.5; 7m0s-20m0s 13.0; 20m0s-40m0s 29.5; 40m0s-1h0m0s 50.0;"; got != want {
		t.Errorf("span medians:\n%s, want\n%s", got, want)
	}
}

// writeOutputs writes the samples as soak.csv and plots them in soak.svg.
func (s *soak) writeOutputs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"t_s", "rss_bytes", "rss_anon_bytes", "goroutines", "fds", "write_bytes", "stored_points", "heap_bytes", "store_bytes", "load1"})
	for _, x := range s.samples {
		w.Write([]string{strconv.FormatFloat(x.t.Seconds(), 'f', 1, 64), itoa(x.rss), itoa(x.rssAnon), itoa(x.goroutines),
			itoa(x.fds), itoa(x.writeBytes), itoa(x.points), itoa(x.heap), itoa(x.storeBytes),
			strconv.FormatFloat(x.load1, 'f', 2, 64)})
	}
	w.Flush()
	var svg bytes.Buffer
	writeSoakSVG(&svg, s.samples, s.plan)
	for name, data := range map[string][]byte{"soak.csv": b.Bytes(), "soak.svg": svg.Bytes()} {
		if err := os.WriteFile(filepath.Join(s.out, name), data, 0o644); err != nil {
			s.t.Errorf("write %s: %v", name, err)
		}
	}
	s.t.Logf("samples: %s, plot: %s, pith log: %s", filepath.Join(s.out, "soak.csv"), filepath.Join(s.out, "soak.svg"), s.proc.log)
}

// writeSoakSVG plots each judged reading in a panel of its own over the
// run's minutes, from 0 so that growth shows in proportion, with the
// reference window shaded.
func writeSoakSVG(w io.Writer, samples []soakSample, p soakPlan) {
	const width, height, left, top, right, bottom = 900, 200, 80, 30, 20, 30
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n",
		width, height*len(soakMetrics))
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	tmax := 1.0
	if len(samples) > 0 {
		tmax = max(tmax, samples[len(samples)-1].t.Minutes())
	}
	pw, ph := float64(width-left-right), float64(height-top-bottom)
	for i, m := range soakMetrics {
		y0 := float64(i*height + top)
		hi := 1.0
		for _, x := range samples {
			hi = max(hi, m.get(x)*1.1)
		}
		scale, unit := 1.0, ""
		if m.name == "rss_bytes" {
			scale, unit = 1<<20, " MiB"
		}
		xOf := func(min float64) float64 { return left + pw*min/tmax }
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#eef"/>`+"\n",
			xOf(p.warm.Minutes()), y0, xOf((p.warm+p.ref).Minutes())-xOf(p.warm.Minutes()), ph)
		fmt.Fprintf(w, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", left, y0, pw, ph)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" font-weight="bold">%s</text>`+"\n", left, y0-8, m.name)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%.0f%s</text>`+"\n", left-4, y0+10, hi/scale, unit)
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">0</text>`+"\n", left-4, y0+ph)
		fmt.Fprintf(w, `<text x="%d" y="%.1f">0 min</text><text x="%d" y="%.1f" text-anchor="end">%.1f min</text>`+"\n",
			left, y0+ph+16, width-right, y0+ph+16, tmax)
		var pts strings.Builder
		for _, x := range samples {
			fmt.Fprintf(&pts, "%.1f,%.1f ", xOf(x.t.Minutes()), y0+ph-ph*m.get(x)/hi)
		}
		fmt.Fprintf(w, `<polyline fill="none" stroke="#c33" stroke-width="1.5" points="%s"/>`+"\n", pts.String())
	}
	fmt.Fprintln(w, "</svg>")
}

// cleanup stops pith if a failure left it running, drops the PostgreSQL
// table and purges the run's NATS subject.
func (s *soak) cleanup() {
	if !s.stopped {
		syscall.Kill(s.proc.pid, syscall.SIGKILL)
		<-s.proc.waitc
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, s.pgURL); err == nil {
		if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+s.pgTable()); err != nil {
			s.t.Logf("drop table %s: %v", s.pgTable(), err)
		}
		conn.Close(ctx)
	}
	if nc, err := nats.Connect(s.natsURL); err == nil {
		if js, err := nc.JetStream(); err == nil {
			if err := js.PurgeStream("PITH", &nats.StreamPurgeRequest{Subject: "pith.soak" + s.id + ".samples"}); err != nil {
				s.t.Logf("purge nats subject: %v", err)
			}
		}
		nc.Close()
	}
}

// TestSoakJudgeCSV judges a soak's saved samples again, with the rules
// and span medians of this build, and logs the report:
//
//	PITH_SOAK_CSV=DIR/soak.csv PITH_SOAK_MINUTES=60 go test -run '^TestSoakJudgeCSV$' -v ./cmd/pith
//
// PITH_SOAK_MINUTES is the run's length, which sets its warm-up.
func TestSoakJudgeCSV(t *testing.T) {
	path := os.Getenv("PITH_SOAK_CSV")
	if path == "" {
		t.Skip("judges a saved soak.csv again: set PITH_SOAK_CSV to its path")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	samples, err := parseSoakCSV(rows)
	if err != nil {
		t.Fatal(err)
	}
	plan := newSoakPlan(soakMinutes(t))
	report, failures := judgeSoak(samples, plan)
	for _, l := range append(report, spanMedians(samples, plan)...) {
		t.Log(l)
	}
	for _, l := range failures {
		t.Log("fails: " + l)
	}
}

// parseSoakCSV reads the rows writeOutputs wrote, header first.
func parseSoakCSV(rows [][]string) ([]soakSample, error) {
	if len(rows) == 0 || len(rows[0]) != 10 || rows[0][0] != "t_s" {
		return nil, fmt.Errorf("not a soak.csv: header %q", rows[:min(1, len(rows))])
	}
	var out []soakSample
	for i, r := range rows[1:] {
		if len(r) != 10 {
			return nil, fmt.Errorf("row %d: %d fields, want 10", i+2, len(r))
		}
		var n [8]int64
		for j := range n {
			v, err := strconv.ParseInt(r[j+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("row %d: %v", i+2, err)
			}
			n[j] = v
		}
		sec, err1 := strconv.ParseFloat(r[0], 64)
		load, err2 := strconv.ParseFloat(r[9], 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("row %d: %v", i+2, err)
		}
		out = append(out, soakSample{t: time.Duration(sec * float64(time.Second)), rss: n[0], rssAnon: n[1], goroutines: n[2],
			fds: n[3], writeBytes: n[4], points: n[5], heap: n[6], storeBytes: n[7], load1: load})
	}
	return out, nil
}
