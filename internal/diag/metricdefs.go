package diag

import (
	"math"
	"time"

	"github.com/pith-historian/pith/internal/archive"
	"github.com/pith-historian/pith/internal/tag"
)

// reading is one sample of every source. The slow fields are filled only
// on the slow clock.
type reading struct {
	t       time.Time
	arch    archive.Stats
	tab     tag.Stats
	httpReq uint64
	httpErr uint64
	inUse   int64       // bytes of the HTTP memory budget reserved
	refused int64       // requests the budget refused
	space   diskReading // fast: whether writes are refused for space

	// slow
	points, walBytes, runBytes, flushes, corrupt int64
	disk                                         int64
	proc                                         procSample
}

// read samples the sources; c.mu is held.
func (c *Collector) read(slow bool) reading {
	r := reading{t: c.opts.Now(), httpReq: c.httpRequests.Load(), httpErr: c.httpErrors.Load()}
	if c.src.Archive != nil {
		r.arch = c.src.Archive.Stats()
	}
	if c.src.Tags != nil {
		r.tab = c.src.Tags.Stats()
	}
	if c.src.Budget != nil {
		r.inUse, r.refused = c.src.Budget.InUse(), c.src.Budget.Refused()
	}
	if ds, ok := c.src.Store.(DiskSource); ok {
		r.space = readDisk(ds)
	}
	if !slow {
		return r
	}
	if c.src.Store != nil {
		st := c.src.Store.Stats()
		r.points = st.PointsWritten.Load()
		r.walBytes = st.WALBytes.Load()
		r.runBytes = st.RunBytes.Load()
		r.flushes = st.Flushes.Load()
		r.corrupt = st.CorruptBlocks.Load()
		r.disk = c.src.Store.DiskBytes()
	}
	r.proc = c.proc.read()
	return r
}

// metricDef describes one system tag and how to compute it from the
// current and previous readings of its clock (prev is nil on the first).
type metricDef struct {
	name, unit, help string
	fast, counter    bool
	value            func(r, prev *reading, c *Collector) float64
}

// perSec is (cur - old) per second between two readings, NaN on the first.
func perSec(r, prev *reading, cur, old float64) float64 {
	if prev == nil {
		return math.NaN()
	}
	dt := r.t.Sub(prev.t).Seconds()
	if dt <= 0 {
		return math.NaN()
	}
	return max(cur-old, 0) / dt
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricDefs lists the system tags of the sources present. docs/diag.md
// lists the same with their meaning; keep the two in step.
func metricDefs(src Sources) []metricDef {
	var d []metricDef
	add := func(name, unit, help string, fast, counter bool, f func(r, p *reading, c *Collector) float64) {
		d = append(d, metricDef{name: "pith.sys." + name, unit: unit, help: help, fast: fast, counter: counter, value: f})
	}
	if src.Archive != nil {
		add("archive.pending", "values", "values queued for the store and not yet durable", true, false,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.arch.Pending) })
		add("archive.pending_bytes", "B", "memory held by the queued values", true, false,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.arch.PendingBytes) })
		add("archive.performed_per_s", "values/s", "values written durably to the store per second", true, false,
			func(r, p *reading, _ *Collector) float64 {
				if p == nil {
					return math.NaN()
				}
				return perSec(r, p, float64(r.arch.Written), float64(p.arch.Written))
			})
		add("archive.requests_per_s", "values/s", "values accepted into the archive queue per second", true, false,
			func(r, p *reading, _ *Collector) float64 {
				if p == nil {
					return math.NaN()
				}
				return perSec(r, p, float64(r.arch.Enqueued), float64(p.arch.Enqueued))
			})
		add("archive.commit_ms", "ms", "p99 duration of the last 128 store commits", true, false,
			func(r, _ *reading, _ *Collector) float64 { return ms(r.arch.Commit.P99) })
		add("archive.commit_max_ms", "ms", "longest of the last 128 store commits", true, false,
			func(r, _ *reading, _ *Collector) float64 { return ms(r.arch.Commit.Max) })
		add("archive.frozen", "bool", "1 while a FREEZE holds archive writes", true, false,
			func(r, _ *reading, _ *Collector) float64 { return b2f(r.arch.Frozen) })
		add("archive.dropped", "values", "values refused because the queue was full (since start)", true, true,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.arch.Dropped) })
		add("archive.write_errors", "count", "failed store writes, each retried (since start)", true, true,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.arch.WriteErrors) })
		add("archive.last_drain_per_s", "values/s", "drain rate of the last FREEZE backlog", true, false,
			func(r, _ *reading, _ *Collector) float64 { return r.arch.LastDrain.PerSec })
	}
	if src.Tags != nil {
		add("tags.updates_per_s", "values/s", "samples applied to the tag table per second", true, false,
			func(r, p *reading, _ *Collector) float64 {
				if p == nil {
					return math.NaN()
				}
				return perSec(r, p, float64(r.tab.Updates), float64(p.tab.Updates))
			})
		add("tags.changes_per_s", "values/s", "samples that changed a current value or quality per second", true, false,
			func(r, p *reading, _ *Collector) float64 {
				if p == nil {
					return math.NaN()
				}
				return perSec(r, p, float64(r.tab.Changes), float64(p.tab.Changes))
			})
		add("tags.count", "tags", "defined tags", false, false,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.tab.Tags) })
		add("tags.refused", "values", "samples the archive queue refused (since start)", false, true,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.tab.Refused) })
	}
	add("http.requests_per_s", "req/s", "HTTP requests answered per second", true, false,
		func(r, p *reading, _ *Collector) float64 {
			if p == nil {
				return math.NaN()
			}
			return perSec(r, p, float64(r.httpReq), float64(p.httpReq))
		})
	add("http.requests", "count", "HTTP requests answered (since start)", true, true,
		func(r, _ *reading, _ *Collector) float64 { return float64(r.httpReq) })
	add("http.errors", "count", "HTTP answers with a 5xx status (since start)", true, true,
		func(r, _ *reading, _ *Collector) float64 { return float64(r.httpErr) })
	if src.Budget != nil {
		add("http.inflight_bytes", "B", "request bodies and answers in flight, reserved from the memory budget", true, false,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.inUse) })
		add("http.inflight_refused", "count", "requests refused by the memory budget, 503 or 413 (since start)", true, true,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.refused) })
	}
	if src.Store != nil {
		add("store.bytes", "B", "size of the data directory", false, false,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.disk) })
		add("store.bytes_written_per_s", "B/s", "WAL and run-file bytes written per second (SD-card wear)", false, false,
			func(r, p *reading, _ *Collector) float64 {
				if p == nil {
					return math.NaN()
				}
				return perSec(r, p, float64(r.walBytes+r.runBytes), float64(p.walBytes+p.runBytes))
			})
		add("store.points", "values", "samples written to the store since it was opened", false, true,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.points) })
		add("store.points_per_s", "values/s", "samples written to the store per second", false, false,
			func(r, p *reading, _ *Collector) float64 {
				if p == nil {
					return math.NaN()
				}
				return perSec(r, p, float64(r.points), float64(p.points))
			})
		add("store.flushes", "count", "head flushes to run files since open", false, true,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.flushes) })
		add("store.corrupt_blocks", "count", "damaged blocks skipped since open (should stay 0)", false, true,
			func(r, _ *reading, _ *Collector) float64 { return float64(r.corrupt) })
		if _, ok := src.Store.(DiskSource); ok {
			diskDefs(add)
		}
	}
	add("process.cpu_percent", "%", "CPU time of the process, percent of one core", false, false,
		func(r, p *reading, _ *Collector) float64 {
			if p == nil {
				return math.NaN()
			}
			return 100 * perSec(r, p, r.proc.cpu.Seconds(), p.proc.cpu.Seconds())
		})
	add("process.rss_bytes", "B", "resident memory", false, false,
		func(r, _ *reading, _ *Collector) float64 { return float64(r.proc.rss) })
	add("process.heap_bytes", "B", "live Go heap", false, false,
		func(r, _ *reading, _ *Collector) float64 { return float64(r.proc.heap) })
	add("process.goroutines", "count", "goroutines", false, false,
		func(r, _ *reading, _ *Collector) float64 { return float64(r.proc.goroutines) })
	add("process.gc_pause_ms", "ms", "longest GC stop-the-world pause since the previous reading", false, false,
		func(r, _ *reading, _ *Collector) float64 { return ms(r.proc.maxPause) })
	add("process.uptime_s", "s", "seconds since the collector was created", false, false,
		func(r, _ *reading, c *Collector) float64 { return r.t.Sub(c.started).Seconds() })
	add("diag.collect_us", "us", "wall time of the previous full reading (the diagnostics' own cost)", false, false,
		func(_, _ *reading, c *Collector) float64 { return float64(c.cost) / float64(time.Microsecond) })
	return d
}
