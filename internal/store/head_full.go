package store

// When the active head is full: the rule a write's backpressure applies.

// A flush writes an index entry, chunk and tier blocks for every series
// of its head, about 200 bytes, and every run it adds is merged again as
// the day grows. At HeadMaxSamples (1 M) and 10,000 tags at 10 Hz a head
// held 100 samples a series, and flushes and merges wrote several times
// what the day's merged run keeps (BenchmarkLiveWriteAmp). So an active
// head of more than liveSeries series waits for livePerSeries samples a
// series, within liveMaxHeads heads of HeadMaxSamples, and while its
// sealed blocks take less than liveBytesPerSample bytes for each of
// HeadMaxSamples: for values that compress badly (about 9 bytes a sample)
// the blocks stay within what the 4 x HeadMaxSamples of the rule before
// took, and well-compressed values get the longer head. Up to liveSeries
// series nothing changes.
const (
	liveSeries         = 2048
	livePerSeries      = 2048
	liveMaxHeads       = 16
	liveBytesPerSample = 32
)

// headLimit is the number of samples at which an active head of count
// series is full.
func (db *DB) headLimit(count int) int {
	most := db.opts.HeadMaxSamples
	if count <= liveSeries {
		return most
	}
	return max(most, min(count*livePerSeries, liveMaxHeads*most))
}

// headFull reports whether an active head of samples in count series,
// bytes of them sealed, is full.
func (db *DB) headFull(samples, count, bytes int) bool {
	return samples >= db.headLimit(count) ||
		samples >= db.opts.HeadMaxSamples && bytes >= liveBytesPerSample*db.opts.HeadMaxSamples
}

// backpressure rotates a full head and, when flushing falls behind, waits
// for it so memory stays bounded.
func (db *DB) backpressure() error {
	db.mu.RLock()
	full := db.headFull(db.active.fill())
	backlog := len(db.frozen)
	db.mu.RUnlock()
	if !full {
		return nil
	}
	db.rotate()
	if backlog >= 1 {
		if err := db.waitFlushed(); !isNoSpace(err) {
			return err
		}
		// The write is durable in the WAL; its head waits in memory for
		// space (headRoom refuses writes once that is full too).
	}
	return nil
}
