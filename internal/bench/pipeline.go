package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"runtime"
	"time"

	"github.com/pith-historian/pith/internal/archive"
	"github.com/pith-historian/pith/internal/diag"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// PipelineOptions configure RunPipeline: a synthetic producer feeding the
// tag table, which hands every sample through the archive queue to a real
// store, all in this process.
type PipelineOptions struct {
	Dir      string        // the store's directory (fresh)
	Tags     int           // tags per scan (default 1000)
	Rate     float64       // values/s; 0 produces as fast as the pipeline writes
	Duration time.Duration // how long to produce (with Freeze: the warm-up before it)
	// Freeze, when set, runs a FREEZE of this length after Duration while
	// the producer continues at Rate, and watches the drain up to Watch.
	Freeze     time.Duration
	Watch      time.Duration
	Durability store.Durability
	Writers    int       // archive writer goroutines (0: the queue's default)
	MaxProcs   int       // GOMAXPROCS during the run (0: unchanged)
	Verify     bool      // count every tag's samples in the store afterwards
	Out        io.Writer // progress lines (nil: none)
	Log        *slog.Logger
}

// PipelineResult is what a run measured.
type PipelineResult struct {
	Tags     int     `json:"tags"`
	Produced uint64  `json:"produced"` // samples handed to the tag table
	Written  uint64  `json:"written"`  // samples the queue wrote to the store
	Dropped  uint64  `json:"dropped"`  // samples refused by a full queue
	Seconds  float64 `json:"seconds"`  // from the first sample until all were durable
	PerSec   float64 `json:"values_per_s"`
	// CPUCores is the process's CPU time over the wall time: 1.0 is one
	// core busy.
	CPUCores float64 `json:"cpu_cores"`
	MaxProcs int     `json:"gomaxprocs"`
	// ReadBack counts the samples found in the store when Verify is set;
	// Verified says it equals Produced.
	ReadBack uint64              `json:"read_back"`
	Verified bool                `json:"verified"`
	Freeze   *diag.FreezeSummary `json:"freeze,omitempty"`
	Commit   string              `json:"commit_latency"`
}

// RunPipeline measures the whole archive path: producer -> tag table ->
// archive queue -> store. Without a Rate the producer waits whenever the
// queue holds more than a few batches, so the figure is the rate the path
// sustains rather than the rate memory absorbs.
func RunPipeline(ctx context.Context, o PipelineOptions) (*PipelineResult, error) {
	if o.Tags <= 0 {
		o.Tags = 1000
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MaxProcs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(o.MaxProcs))
	}
	sopts := store.DefaultOptions()
	sopts.Durability = o.Durability
	sopts.Logger = o.Log
	db, err := store.Open(o.Dir, sopts)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	qopts := archive.DefaultOptions()
	qopts.Writers = o.Writers
	qopts.MaxBytes = 2 << 30 // a 60 s FREEZE at 100k values/s holds ~240 MB
	q := archive.New(db, o.Log, qopts)
	tab := tag.New(o.Log, tag.DefaultOptions(), q)
	ids := make([]tag.ID, o.Tags)
	for i := range ids {
		if ids[i], err = tab.Define(tag.Def{Name: fmt.Sprintf("bench.t%04d", i), Archive: tag.ArchiveAll}); err != nil {
			return nil, err
		}
	}
	res := &PipelineResult{Tags: o.Tags, MaxProcs: runtime.GOMAXPROCS(0)}
	t0 := time.Now().Truncate(time.Second).UnixMilli()
	batch := make([]tag.Sample, o.Tags)
	round := int64(0)
	produce := func() {
		for i := range batch {
			// Two-decimal process values that move a little each scan,
			// like the plant dataset's analog tags.
			v := math.Round(100*(250+50*math.Sin(float64(round+int64(i))/500))) / 100
			batch[i] = tag.Sample{ID: ids[i], T: t0 + round, V: v, Q: model.QualityGood}
		}
		tab.Update(batch)
		round++
	}
	// A backlog of this many values means the writers are behind.
	highWater := int64(4 * qopts.MaxBatch * max(qopts.Writers, 2))

	cpu0, start := diag.CPUTime(), time.Now()
	var freezeSum *diag.FreezeSummary
	var freezeErr error
	if o.Freeze > 0 {
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer cancel()
			if err := diag.SleepUntil(fctx, start.Add(o.Duration)); err != nil {
				freezeErr = err
				return
			}
			s, err := diag.RunFreeze(fctx, q, diag.FreezeOptions{Freeze: o.Freeze, Watch: o.Watch}, func(ev diag.FreezeEvent) error {
				fmt.Fprintf(o.Out, "  %-6s t=%5.1fs pending %9d  in %9.0f/s  out %9.0f/s\n", ev.Phase, ev.Seconds, ev.Pending, ev.InPerSec, ev.OutPerSec)
				return nil
			})
			freezeSum, freezeErr = &s, err
		}()
		pace(fctx, o.Rate, o.Tags, start, produce)
		<-done
		if freezeErr != nil {
			return nil, freezeErr
		}
	} else {
		pctx, cancel := context.WithTimeout(ctx, o.Duration)
		if o.Rate > 0 {
			pace(pctx, o.Rate, o.Tags, start, produce)
		} else {
			for pctx.Err() == nil {
				if q.Stats().Pending > highWater {
					time.Sleep(time.Millisecond)
					continue
				}
				produce()
			}
		}
		cancel()
	}
	if err := q.Close(context.Background()); err != nil {
		return nil, err
	}
	el := time.Since(start)
	st := q.Stats()
	res.Produced = uint64(round) * uint64(o.Tags)
	res.Written, res.Dropped = st.Written, st.Dropped
	res.Seconds = el.Seconds()
	res.PerSec = float64(st.Written) / el.Seconds()
	res.CPUCores = (diag.CPUTime() - cpu0).Seconds() / el.Seconds()
	res.Freeze = freezeSum
	res.Commit = fmt.Sprintf("p50 %v p99 %v max %v", st.Commit.P50.Round(time.Microsecond),
		st.Commit.P99.Round(time.Microsecond), st.Commit.Max.Round(time.Microsecond))
	if o.Verify {
		for i := range ids {
			b, err := db.Aggregate(fmt.Sprintf("bench.t%04d", i), t0, t0+round, 1, model.AggCount)
			if err != nil {
				return nil, fmt.Errorf("verify tag %d: %w", i, err)
			}
			if len(b) == 1 && b[0].OK {
				res.ReadBack += uint64(b[0].V)
			}
		}
		res.Verified = res.ReadBack == res.Produced
	}
	return res, nil
}

// pace calls produce (one scan of tags values) at rate values/s until ctx
// ends, catching up in a burst when it falls behind.
func pace(ctx context.Context, rate float64, tags int, start time.Time, produce func()) {
	every := time.Duration(float64(time.Second) * float64(tags) / rate)
	due := start
	for ctx.Err() == nil {
		now := time.Now()
		for !due.After(now) {
			produce()
			due = due.Add(every)
		}
		diag.SleepUntil(ctx, due)
	}
}
