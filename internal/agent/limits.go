package agent

import (
	"net/http"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/diag"
	"github.com/pith-historian/pith/internal/events"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/promapi"
)

// The memory budget (api.Budget) is shared by every route that holds a
// request body or a large answer in memory; each reserves what it may
// cost before reading, and what does not fit is refused with 503 and
// Retry-After rather than swapping the plant's board to death.
var (
	_ diag.BudgetSource = (*api.Budget)(nil)
	_ promapi.Reserver  = (*api.Budget)(nil)
)

// Bytes of memory a body byte costs while its handler runs: the body
// itself plus what it is parsed into, measured as the peak heap growth
// of one maximal request (line protocol: a 120-byte row, a 40-byte field
// and a 40-byte point for a line of about 30 bytes, and the slices'
// growth, plus about 2 for the tag table's road: an ID and a change per
// point; remote_write: per decoded byte, the samples and points; events
// and emoncms: the decoded values).
const (
	lineProtocolScale = 14
	remoteWriteScale  = 10
	emoncmsScale      = 8
	eventsScale       = 4
)

// Body limits of the routes the budget guards whose handlers do not
// export theirs.
const (
	// promFormBytes is what net/http's ParseForm reads of a POST body.
	promFormBytes = 10 << 20
	// importBuffers is what one running import holds however small its
	// body: a batch of points (64 Ki of about 40 bytes), the CSV reader's
	// buffer and a gzip window, rounded up. Its transaction stages about
	// one byte of points per body byte (a 35-byte row, a 32-byte sample),
	// up to the store's head size (1 Mi samples) before spilling to disk:
	// importMaxHeld in all.
	importBuffers = 4 << 20
	importMaxHeld = importBuffers + 32<<20
	// otherBodyBytes is charged to any other route with a body (control
	// writes, alarm acknowledgements, backup requests): their handlers
	// read a few KiB at most.
	otherBodyBytes = 64 << 10
)

// bodyGuard returns the wrapper that puts budget in front of the routes:
// each path is charged by the size of what its handler holds. The same
// wrapper guards the mux, the signed event posts and the light server's
// handlers, so no path to a handler skips the budget. readTimeout is the
// server's, which an import's answer gets instead of the write timeout.
func bodyGuard(b *api.Budget, readTimeout time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		lp := b.WrapScaled(next, ingest.DefaultLineProtocolOptions().MaxBodyBytes, lineProtocolScale)
		rw := b.WrapScaled(next, ingest.DefaultRemoteWriteOptions().MaxBodyBytes, remoteWriteScale)
		em := b.WrapScaled(next, ingest.DefaultEmoncmsOptions().MaxBodyBytes, emoncmsScale)
		ev := b.WrapScaled(next, events.DefaultMaxRequestBytes, eventsScale)
		prom := b.Wrap(next, promFormBytes)
		imp := api.WriteDeadline(readTimeout, b.WrapStream(next, importBuffers, importMaxHeld))
		other := b.Wrap(next, otherBodyBytes)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch p := r.URL.Path; {
			case p == "/write", p == "/api/v2/write":
				lp.ServeHTTP(w, r)
			case p == "/api/v1/write":
				rw.ServeHTTP(w, r)
			case strings.HasPrefix(p, "/input/"):
				em.ServeHTTP(w, r)
			case p == "/api/v1/events", p == "/api/v1/track":
				ev.ServeHTTP(w, r)
			case p == "/api/v1/import":
				imp.ServeHTTP(w, r)
			case isPromQL(p):
				prom.ServeHTTP(w, r)
			default:
				other.ServeHTTP(w, r)
			}
		})
	}
}

// A sixteenth of the budget is kept for requests costing at most 1 MiB
// (a Telegraf batch, an emoncms post, a dashboard's query), so that a
// flood of large requests never starves the small steady writers.
const (
	smallReserveShare = 16
	smallRequest      = 1 << 20
)

// promPaths are the Prometheus API routes (see routes).
var promPaths = []string{"/api/v1/query", "/api/v1/query_range", "/api/v1/labels", "/api/v1/label/",
	"/api/v1/series", "/api/v1/status/buildinfo", "/api/v1/metadata", "/api/v1/query_exemplars"}

func isPromQL(p string) bool {
	for _, pp := range promPaths {
		if p == pp || strings.HasSuffix(pp, "/") && strings.HasPrefix(p, pp) {
			return true
		}
	}
	return false
}
