package store

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Month packs. The day is the store's partition, and each day ends as one
// run file: ten years of a tag would be 3,650 files. Once a month is over
// and its days are quiet, the merge loop copies the runs of its days, byte
// for byte, into one pack file, runs/m<day>-<seq>.pack, and MANIFEST lists
// each of them as "<pack>@<offset>+<length>" instead of its own file. A
// run in a pack is read as a run file is (its header, index, footers and
// checksums are those it had alone), so queries, merges, deletes and
// retention go on per day: a day rewritten later (late samples, a delete,
// raw retention) becomes its own file again, its bytes in the pack are
// dead, and a later pack job takes it back. A pack is never changed once
// written (a backup may hard-link it); it is removed when none of its runs
// is listed any more, and rewritten when more of it is dead than live.
//
// Bounds: a closed month holds at most packsPerMonth small packs and one
// day of its own before a job folds them into one, plus the full packs
// (packMax); a day larger than packDayMax stays its own file (its size
// already bounds how many such files there are). Packing writes each
// packed byte once more, and a rewrite of dead-heavy packs at most once
// more again.

const (
	// packDayMax is the largest day run that is packed.
	packDayMax = 64 << 20
	// packMax is the size a pack job stops adding runs at.
	packMax = 1 << 30
	// packsPerMonth is how many packs of a month under packMax/2 a job
	// folds into one.
	packsPerMonth = 3
	// packAfter is how long after its end a month is packed: late
	// samples of its last day are then rare.
	packAfter = 24 * time.Hour
)

// packFile is a pack that MANIFEST lists runs of. live and liveBytes
// count them (guarded by flushMu and mu, read under either).
type packFile struct {
	name      string // in runs/
	month     int64  // the day partition of the month's first day
	size      int64
	live      int
	liveBytes int64
	// pinned counts the runs of live that could not be read at Open
	// (db.broken): they stay listed, so the pack stays, and no job can
	// move them.
	pinned int
}

// foldable reports whether a pack job may fold pk: it holds runs a job
// can move, and it is small or holds more dead bytes than live.
func (pk *packFile) foldable() bool {
	return pk.live > pk.pinned && (pk.size < packMax/2 || pk.deadHeavy())
}

func (pk *packFile) deadHeavy() bool { return pk.liveBytes < pk.size-pk.liveBytes }

// listName is how MANIFEST lists r.
func (r *runFile) listName() string {
	if r.pack == nil {
		return filepath.Base(r.path)
	}
	return fmt.Sprintf("%s@%d+%d", r.pack.name, r.base, r.size)
}

// parseListName splits a MANIFEST entry into its file and, for a run in a
// pack, the run's bytes in it (packed false: the whole file).
func parseListName(name string) (file string, base, size int64, packed bool, err error) {
	file, rng, ok := strings.Cut(name, "@")
	if !ok {
		return name, 0, -1, false, nil
	}
	b, s, ok := strings.Cut(rng, "+")
	if ok {
		base, err = strconv.ParseInt(b, 10, 64)
		if err == nil {
			size, err = strconv.ParseInt(s, 10, 64)
		}
	}
	if !ok || err != nil || base < 0 || size <= 0 || !strings.HasSuffix(file, ".pack") {
		return "", 0, 0, false, fmt.Errorf("manifest entry %q is not a run nor a run in a pack", name)
	}
	return file, base, size, true, nil
}

// monthOf returns the day partition of the first day of p's month, and
// that of the next month's.
func monthOf(p int64) (first, next int64) {
	t := time.UnixMilli(p * partitionMs).UTC()
	m := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return m.UnixMilli() / partitionMs, m.AddDate(0, 1, 0).UnixMilli() / partitionMs
}

// openListed opens the run of a MANIFEST entry (parseListName), counting
// a run in a pack in db.packs. A packed run that cannot be read counts too
// (pinned): it stays listed (db.broken), so its pack stays on disk.
func (db *DB) openListed(file string, base, size int64, packed bool) (*runFile, error) {
	r, err := openRunAt(db.fs, filepath.Join(db.dir, "runs", file), base, size)
	if !packed {
		return r, err
	}
	pk := db.packRef(file)
	pk.live++
	if err != nil {
		pk.pinned++
		return nil, err
	}
	r.pack = pk
	pk.liveBytes += r.size
	return r, nil
}

// packRef returns the pack named file, registering it at first use.
func (db *DB) packRef(file string) *packFile {
	pk := db.packs[file]
	if pk == nil {
		// m<first day of the month>-<seq>.pack
		d, _, _ := strings.Cut(strings.TrimPrefix(file, "m"), "-")
		first, _ := strconv.ParseInt(d, 10, 64)
		pk = &packFile{name: file, month: first}
		if info, err := os.Stat(filepath.Join(db.dir, "runs", file)); err == nil {
			pk.size = info.Size()
		}
		db.packs[file] = pk
	}
	return pk
}

// releaseRun is called, under flushMu and mu, for a run an install
// removed from the store: it returns the file to remove now, or "" while
// the run's pack still holds listed runs.
func (db *DB) releaseRun(r *runFile) string {
	pk := r.pack
	if pk == nil {
		return r.path
	}
	pk.live--
	pk.liveBytes -= r.size
	if pk.live > 0 {
		return ""
	}
	delete(db.packs, pk.name)
	return r.path
}

// nextPack chooses the next pack job, under flushMu: the oldest month that
// ended packAfter ago and holds two or more of its days in files of their
// own (each a single run of at most packDayMax that took no run for
// compactQuiet), or packsPerMonth small packs, or a pack with more bytes
// dead than live. force (Close) skips the quiet wait.
func (db *DB) nextPack(force bool) (job *mergeJob, wait time.Duration) {
	if db.merging != nil {
		return nil, 0
	}
	now := db.opts.Now().UnixMilli()
	newest := db.newestPart()
	type month struct {
		loose []*runFile
		packs map[*packFile]bool // small or dead-heavy
	}
	months := map[int64]*month{}
	get := func(m int64) *month {
		if months[m] == nil {
			months[m] = &month{packs: map[*packFile]bool{}}
		}
		return months[m]
	}
	for _, pk := range db.packs {
		if pk.foldable() {
			get(pk.month).packs[pk] = true
		}
	}
	for p, rs := range db.parts {
		// Cheap tests first: this runs after every flush, and most days
		// of a long history are packed already.
		if len(rs) != 1 || rs[0].pack != nil || rs[0].size > packDayMax || (p == newest && !force) {
			continue
		}
		r := rs[0]
		m, next := monthOf(p)
		if next*partitionMs+packAfter.Milliseconds() > now {
			continue
		}
		if left := compactQuiet - time.Since(db.touched[p]); left > 0 && !force {
			if wait == 0 || left < wait {
				wait = left
			}
			continue
		}
		get(m).loose = append(get(m).loose, r)
	}
	keys := make([]int64, 0, len(months))
	for m := range months {
		keys = append(keys, m)
	}
	slices.Sort(keys)
	for _, key := range keys {
		m := months[key]
		if _, next := monthOf(key); next*partitionMs+packAfter.Milliseconds() > now {
			continue
		}
		fold := len(m.packs) >= packsPerMonth
		for pk := range m.packs {
			if pk.deadHeavy() {
				fold = true
			}
		}
		runs := m.loose
		if fold {
			for _, rs := range db.parts {
				for _, r := range rs {
					if m.packs[r.pack] {
						runs = append(runs, r)
					}
				}
			}
		} else if len(runs) < 2 {
			continue
		}
		slices.SortFunc(runs, func(a, b *runFile) int {
			if c := cmp.Compare(a.part, b.part); c != 0 {
				return c
			}
			return cmp.Compare(a.seq, b.seq)
		})
		var n int64
		for i, r := range runs {
			if n += r.size; n > packMax && i > 0 {
				runs = runs[:i]
				break
			}
		}
		if len(runs) == 0 || (len(runs) == 1 && runs[0].pack == nil) {
			continue
		}
		return &mergeJob{pack: true, runs: runs}, 0
	}
	return nil, wait
}

// writePack copies runs (a pack job's) into a new pack file and opens
// them there. abort stops it (Close); the pack is then removed.
func (db *DB) writePack(runs []*runFile, abort <-chan struct{}) (_ []*runFile, err error) {
	first, _ := monthOf(runs[0].part)
	name := fmt.Sprintf("m%d-%08d.pack", first, db.allocSeq())
	path := filepath.Join(db.dir, "runs", name)
	f, err := db.fs.OpenFile(path+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create pack: %w", err)
	}
	done := false
	defer func() {
		if !done {
			f.Close()
			db.fs.Remove(path + ".tmp")
		}
	}()
	offs := make([]int64, len(runs))
	var off int64
	for i, r := range runs {
		offs[i] = off
		for b := r.data; len(b) > 0; {
			select {
			case <-abort:
				return nil, errMergeAborted
			default:
			}
			n := min(len(b), 1<<20)
			if _, err := f.Write(b[:n]); err != nil {
				return nil, fmt.Errorf("write pack: %w", err)
			}
			b = b[n:]
			off += int64(n)
		}
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("sync pack: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("close pack: %w", err)
	}
	done = true
	if err := db.fs.Rename(path+".tmp", path); err != nil {
		db.fs.Remove(path + ".tmp")
		return nil, fmt.Errorf("install pack: %w", err)
	}
	db.stats.RunBytes.Add(off)
	db.stats.MergeBytes.Add(off)
	pk := &packFile{name: name, month: first, size: off, live: len(runs)}
	out := make([]*runFile, 0, len(runs))
	for i, r := range runs {
		pr, err := openRunAt(db.fs, path, offs[i], r.size)
		if err != nil {
			for _, o := range out {
				o.close()
			}
			db.fs.Remove(path)
			return nil, fmt.Errorf("open packed run: %w", err)
		}
		pr.pack = pk
		pk.liveBytes += pr.size
		out = append(out, pr)
	}
	return out, nil
}

// packJob writes a pack job's pack, without flushMu, and returns its runs
// (installPack installs them).
func (db *DB) packJob(job *mergeJob, abort <-chan struct{}) ([]*runFile, error) {
	if err := db.raiseVersion(formatPacks); err != nil {
		return nil, err
	}
	return db.writePack(job.runs, abort)
}

// installPack installs the packed runs made of job's runs, under flushMu.
func (db *DB) installPack(job *mergeJob, made []*runFile) error {
	added := map[int64][]*runFile{}
	replaced := map[int64][]*runFile{}
	for i, r := range job.runs {
		added[r.part] = append(added[r.part], made[i])
		replaced[r.part] = append(replaced[r.part], r)
	}
	if err := db.install(added, replaced, nil, 0); err != nil {
		return err
	}
	db.packs[made[0].pack.name] = made[0].pack
	db.stats.Compactions.Add(1)
	return nil
}

// packAll packs what nextPack finds, without the quiet wait, in the
// caller's goroutine (Close, after compactAll).
func (db *DB) packAll() error {
	for {
		db.flushMu.Lock()
		db.awaitMerge()
		job, _ := db.nextPack(true)
		db.merging = job
		db.flushMu.Unlock()
		if job == nil {
			return nil
		}
		made, err := db.packJob(job, nil)
		db.flushMu.Lock()
		db.merging = nil
		if err == nil {
			err = db.installPack(job, made)
		}
		db.mergeDone.Broadcast()
		db.flushMu.Unlock()
		if err != nil {
			return err
		}
	}
}

// holds reports whether job (a merge of day p's runs, or a pack job of
// runs of several days) holds runs of day p.
func (job *mergeJob) holds(p int64) bool {
	if !job.pack {
		return job.p == p
	}
	for _, r := range job.runs {
		if r.part == p {
			return true
		}
	}
	return false
}
