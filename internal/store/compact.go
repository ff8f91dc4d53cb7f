package store

import (
	"errors"
	"slices"
	"time"
)

// Compaction merges the runs of a day, outside the flush: a day written
// for hours holds most of its samples in its oldest runs, and a merge of
// them takes seconds to minutes. Writers that find the head full wait for
// the flush (backpressure), so a merge done inside the flush would hold
// them up as long. The merge loop instead takes one job at a time: it
// chooses the runs under flushMu, merges them without it (flushes,
// queries and bulk commits go on), and installs the merge under flushMu.
//
// While a job is in flight its runs stay in db.parts and in place on
// disk: nothing else replaces them meanwhile. Whatever would (a flush
// whose late samples meet them, a delete of their day, the merges at
// Close) first waits for the job (mergeMeets, awaitMerge), releasing
// flushMu while it waits; retention leaves their day to its next round.
// Flushes of new data meet nothing and go on.

// compactQuiet is how long a day takes no new run before it is merged
// whole: merging a day at every flush while it is written is quadratic.
const compactQuiet = time.Minute

// errMergeAborted is returned by a merge stopped by Close.
var errMergeAborted = errors.New("merge aborted: the store is closing")

// mergeJob is the merge in flight: runs (oldest first, all of day p)
// become one.
type mergeJob struct {
	p    int64
	runs []*runFile
	// pack makes it a pack job (pack.go): runs, one a day, of one month,
	// are copied into a new pack.
	pack bool
}

// requestMerge wakes the merge loop: an install changed a day's runs.
func (db *DB) requestMerge() {
	select {
	case db.mergeReq <- struct{}{}:
	default:
	}
}

// mergeLoop runs the merge jobs until the store closes; a merge under way
// then stops, and Close merges what is left. It wakes when an install
// asks (requestMerge) and when a day it passed over becomes quiet, and
// sleeps otherwise: an idle store with one run a day costs it nothing.
func (db *DB) mergeLoop() {
	defer db.wg.Done()
	var quiet <-chan time.Time
	for {
		select {
		case <-db.stop:
			return
		case <-db.mergeReq:
		case <-quiet:
		}
		quiet = nil
		for {
			did, wait := db.mergeOne()
			if !did {
				if wait > 0 {
					quiet = time.After(wait)
				}
				break
			}
		}
	}
}

// mergeRetry is when a merge that failed (out of space, say) is tried
// again if no install asks sooner.
const mergeRetry = compactQuiet

// mergeOne runs the next merge job, if any, and reports whether it did
// one (the caller then looks for the next); when it did none, wait is how
// long until a day becomes quiet enough to merge (0: none waits).
func (db *DB) mergeOne() (did bool, wait time.Duration) {
	db.flushMu.Lock()
	job, wait := db.nextMerge()
	if job == nil {
		db.flushMu.Unlock()
		return false, wait
	}
	db.merging = job
	db.flushMu.Unlock()
	if db.mergeHook != nil {
		db.mergeHook(job)
	}

	var m *runFile
	var made []*runFile
	var err error
	if job.pack {
		made, err = db.packJob(job, db.stop)
	} else {
		m, err = db.mergeRuns(job.p, job.runs, false, db.stop)
	}

	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	defer db.mergeDone.Broadcast()
	db.merging = nil
	switch {
	case err == nil && job.pack:
		err = db.installPack(job, made)
	case err == nil:
		err = db.replaceRuns(job.p, job.runs, m)
	}
	if err == nil {
		return true, 0
	}
	if !errors.Is(err, errMergeAborted) && !isNoSpace(err) { // out of space: retried, as flushes are
		db.log.Error("compact runs", "err", err)
	}
	return false, mergeRetry
}

// replaceRuns installs m, the merge of runs of day p, in their place.
func (db *DB) replaceRuns(p int64, runs []*runFile, m *runFile) error {
	return db.install(map[int64][]*runFile{p: {m}}, map[int64][]*runFile{p: runs}, nil, 0)
}

// nextMerge chooses the next job, under flushMu: first a day over
// MaxRunsPerPart runs (its newest runs, see tail), then, oldest first, a
// day with several runs that is not the newest and took no run for
// compactQuiet (merged whole). Without a job, wait is how long until the
// first day passed over for being written lately becomes quiet.
func (db *DB) nextMerge() (job *mergeJob, wait time.Duration) {
	if db.merging != nil {
		return nil, 0
	}
	newest := db.newestPart()
	for p, rs := range db.parts {
		if len(rs) > db.opts.MaxRunsPerPart {
			if !disjoint(rs) {
				// Runs of an older release that meet: merged whole.
				return &mergeJob{p: p, runs: slices.Clone(rs)}, 0
			}
			from := tail(rs, len(rs)-db.opts.MaxRunsPerPart, db.opts.MaxRunsPerPart)
			return &mergeJob{p: p, runs: slices.Clone(rs[from:])}, 0
		}
		if len(rs) < 2 || p == newest {
			continue
		}
		if left := compactQuiet - time.Since(db.touched[p]); left > 0 {
			if wait == 0 || left < wait {
				wait = left
			}
		} else if job == nil || p < job.p {
			job = &mergeJob{p: p, runs: slices.Clone(rs)}
		}
	}
	if job != nil {
		return job, 0
	}
	pj, pwait := db.nextPack(false)
	if pj != nil {
		return pj, 0
	}
	if pwait > 0 && (wait == 0 || pwait < wait) {
		wait = pwait
	}
	return nil, wait
}

// newestPart returns the newest day partition with runs (0 without any),
// under flushMu.
func (db *DB) newestPart() int64 {
	var newest int64
	first := true
	for p := range db.parts {
		if first || p > newest {
			newest, first = p, false
		}
	}
	return newest
}

// awaitMerge waits, holding flushMu, until no merge is in flight. A
// caller that replaces runs calls it before it reads db.parts.
func (db *DB) awaitMerge() {
	for db.merging != nil {
		db.mergeDone.Wait()
	}
}

// mergeMeets reports, under flushMu, whether new runs about to be
// installed meet the merge in flight: they meet a run of their day (then
// installRuns merges them with it, and that run may be the job's) or the
// span the job's merge will cover. The caller then waits for the job
// (mergeDone) and looks again, since what it read under flushMu may have
// changed meanwhile.
func (db *DB) mergeMeets(added map[int64][]*runFile) bool {
	job := db.merging
	if job == nil {
		return false
	}
	if job.pack {
		// Runs that meet a run being packed would be merged with it.
		for p, rs := range added {
			if job.holds(p) && !disjoint(append(slices.Clone(db.parts[p]), rs...)) {
				return true
			}
		}
		return false
	}
	rs, ok := added[job.p]
	if !ok {
		return false
	}
	all := append(slices.Clone(db.parts[job.p]), rs...)
	return !disjoint(all) || !disjointMerged(rs, job.runs)
}

// errMergeMet is returned by flushHead when, while its runs waited for a
// merge they met, another flusher wrote the head.
var errMergeMet = errors.New("the head was flushed while its runs waited for a merge")

// compactAll merges every day with several runs into one, then packs the
// closed months, in the caller's goroutine (Close, once the merge loop
// stopped).
func (db *DB) compactAll() error {
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	db.awaitMerge()
	var todo []int64
	for p, rs := range db.parts {
		if len(rs) > 1 {
			todo = append(todo, p)
		}
	}
	slices.Sort(todo)
	for _, p := range todo {
		old := db.parts[p]
		r, err := db.mergeRuns(p, old, false, nil)
		if err != nil {
			return err
		}
		if err := db.replaceRuns(p, old, r); err != nil {
			return err
		}
	}
	db.flushMu.Unlock()
	err := db.packAll()
	db.flushMu.Lock()
	return err
}
