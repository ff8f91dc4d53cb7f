package store

import (
	"github.com/pith-historian/pith/internal/store/vfs"
	"log/slog"
	"time"
)

// Durability says when a write is acknowledged.
type Durability uint8

const (
	// DurabilityFsync acknowledges a write only once its WAL record is fsynced.
	DurabilityFsync Durability = iota
	// DurabilityRelaxed acknowledges a write once it is handed to the OS; the WAL
	// is fsynced every CommitInterval, so a power cut loses at most that window.
	// A crash of the process alone loses nothing.
	DurabilityRelaxed
)

// Options tune a DB. Start from DefaultOptions.
type Options struct {
	Durability     Durability    // when a write is acknowledged
	CommitInterval time.Duration // relaxed mode: WAL fsync period (the power-cut loss window)

	HeadMaxSamples int           // the in-memory head is flushed to run files beyond this many samples (up to 4x with many series, headLimit)
	HeadMaxAge     time.Duration // ... or once its oldest sample arrived this long ago
	MaxRunsPerPart int           // a day partition with more runs than this is merged into one
	BulkPoints     int           // a transaction larger than this is a bulk load (no WAL copy)

	RetentionRaw     time.Duration // days older than this keep only rollups; older writes are refused (0: forever)
	RetentionRollups time.Duration // days older than this are removed (0: forever)

	// FollowMaxBytes bounds the WAL kept for followers (db.Follow): past
	// it the oldest segments are released even if a follower still needs
	// them, and that follower counts the loss.
	FollowMaxBytes int64

	TierCacheBytes  int // decoded rollup tiers kept in memory for queries
	ChunkCacheBytes int // decoded raw chunks (bucket edges) kept for queries

	// FS is the filesystem every file goes through; nil is the real one.
	// Tests use vfs.FaultFS to cut the power.
	FS vfs.FS

	Logger *slog.Logger
	// Now returns the current time; tests replace it.
	Now func() time.Time

	walSegmentSize int64 // tests: the WAL's segment size (0: its default)
}

// DefaultQueryCacheBytes is the memory queries keep decoded when the
// config says nothing: a fifth for rollup tiers, the rest for the raw
// chunks at bucket edges, which long charts need most (1000 buckets
// over years touch 1000 edge chunks).
const DefaultQueryCacheBytes = 40 << 20

// SetQueryCacheBytes shares n bytes between the two query caches as the
// default does.
func (o *Options) SetQueryCacheBytes(n int64) {
	o.TierCacheBytes = int(n / 5)
	o.ChunkCacheBytes = int(n - n/5)
}

// DefaultOptions returns the options Pith runs with when the config says nothing.
func DefaultOptions() Options {
	return Options{
		Durability:      DurabilityFsync,
		CommitInterval:  time.Second,
		HeadMaxSamples:  1 << 20,
		HeadMaxAge:      10 * time.Minute,
		MaxRunsPerPart:  8,
		BulkPoints:      1 << 16,
		FollowMaxBytes:  DefaultFollowMaxBytes,
		TierCacheBytes:  DefaultQueryCacheBytes / 5,
		ChunkCacheBytes: DefaultQueryCacheBytes - DefaultQueryCacheBytes/5,
		Logger:          slog.Default(),
		Now:             time.Now,
	}
}

// String returns the config name of d.
func (d Durability) String() string {
	if d == DurabilityRelaxed {
		return "relaxed"
	}
	return "fsync"
}
