package ingest

// Limits on the shape of what clients push. Each keeps the work one request
// costs proportional to its size: tag sets and label sets are sorted, and
// a remote_write request's series are held in memory. A request over a
// limit is refused whole with 400 and a message naming the limit. They are
// generous: Telegraf lines carry a few tags and Prometheus series a few
// labels, and Prometheus sends at most a few thousand series per request.
const (
	// MaxLineTags is the most tags one line protocol line may carry.
	MaxLineTags = 256
	// MaxSeriesLabels is the most labels, __name__ included, one
	// remote_write series may carry.
	MaxSeriesLabels = 256
	// MaxRequestSeries is the most series one remote_write request may
	// carry.
	MaxRequestSeries = 100_000
	// MaxKeyLen is the longest line protocol tag key or remote_write label
	// name accepted, in bytes. The values become parts of a tag name and
	// are bounded by MaxTagLen there.
	MaxKeyLen = 1024
)
