package diag

import (
	"math"

	"github.com/pith-historian/pith/internal/store"
)

// DiskSource is the store's view of its disk, implemented by *store.DB.
// All methods are safe for concurrent use and cheap (FreeBytes is one
// statfs), so they are read on the fast clock: a full disk shows within
// a second.
type DiskSource interface {
	// DiskFull reports whether writes or flushes are being refused
	// because the filesystem is full.
	DiskFull() bool
	// DiskFullErrors counts operations that failed for lack of space.
	DiskFullErrors() int64
	// FreeBytes returns the bytes available on the data directory's
	// filesystem.
	FreeBytes() (int64, error)
}

var _ DiskSource = (*store.DB)(nil)

type diskReading struct {
	full   bool
	errors int64
	free   float64 // NaN when unknown
}

func readDisk(ds DiskSource) diskReading {
	d := diskReading{full: ds.DiskFull(), errors: ds.DiskFullErrors(), free: math.NaN()}
	if n, err := ds.FreeBytes(); err == nil {
		d.free = float64(n)
	}
	return d
}

// diskDefs adds the system tags of the store's disk.
func diskDefs(add func(name, unit, help string, fast, counter bool, f func(r, p *reading, c *Collector) float64)) {
	add("store.disk_full", "bool", "1 while writes are refused because the disk is full (see the log)", true, false,
		func(r, _ *reading, _ *Collector) float64 { return b2f(r.space.full) })
	add("store.free_bytes", "B", "bytes available on the data directory's filesystem", true, false,
		func(r, _ *reading, _ *Collector) float64 { return r.space.free })
	add("store.disk_full_errors", "count", "writes, flushes and merges that failed for lack of space (since open)", true, true,
		func(r, _ *reading, _ *Collector) float64 { return float64(r.space.errors) })
}
