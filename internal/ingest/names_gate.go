package ingest

import (
	"fmt"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// Catalog tells the tag gate which tags exist already, so that a restart
// does not count the store's old tags as new ones.
type Catalog interface {
	// HasTag reports whether tag is stored. It is called from many
	// goroutines at once, only for names the gate has not met before.
	HasTag(tag string) bool
}

// TooManyNewTagsError refuses a write that would create more new tags than
// the per-minute cap allows. Nothing of the write is stored.
type TooManyNewTagsError struct {
	Tag        string        // the first new tag refused
	New        int           // how many new tags the write held
	Limit      int           // the cap, in new tags per minute
	RetryAfter time.Duration // when enough budget is back for this write
}

func (e *TooManyNewTagsError) Error() string {
	return fmt.Sprintf("too many new tags: %q is one of %d new tags in this write, over the cap of %d new tags per minute (retry after %s)",
		e.Tag, e.New, e.Limit, e.RetryAfter.Round(time.Second))
}

// TagGate caps how many new tags the push inputs may create per minute, so
// a misconfigured sender (a timestamp in a tag, a random client id) cannot
// explode the store's cardinality. The budget is a token bucket: Limit
// tags, refilled at Limit per minute. A nil *TagGate admits everything.
// All methods are safe for concurrent use.
type TagGate struct {
	cat   Catalog
	limit int
	now   func() time.Time

	mu     sync.RWMutex
	known  map[string]struct{} // tags admitted or found in the catalog
	tokens float64
	last   time.Time
}

// NewTagGate returns a gate allowing newPerMinute new tags per minute
// (bursts up to that many). cat may be nil when the store starts empty;
// now may be nil for time.Now.
func NewTagGate(cat Catalog, newPerMinute int, now func() time.Time) *TagGate {
	if now == nil {
		now = time.Now
	}
	if newPerMinute < 1 {
		newPerMinute = 1
	}
	return &TagGate{cat: cat, limit: newPerMinute, now: now, known: make(map[string]struct{}),
		tokens: float64(newPerMinute), last: now()}
}

// Admit lets pts through when their new tags fit in the budget, and
// records those tags as known; otherwise it returns a
// *TooManyNewTagsError and admits none of them. A tag admitted by a write
// that the store then refuses stays known: the budget errs on the side of
// the sender.
func (g *TagGate) Admit(pts []model.Point) error {
	if g == nil || len(pts) == 0 {
		return nil
	}
	var fresh []string
	g.mu.RLock()
	prev := ""
	for i := range pts {
		t := pts[i].Tag
		if t == prev {
			continue
		}
		prev = t
		if _, ok := g.known[t]; !ok {
			fresh = append(fresh, t)
		}
	}
	g.mu.RUnlock()
	if len(fresh) == 0 {
		return nil
	}
	return g.admitFresh(fresh)
}

// AdmitText is Admit for the tags of text points.
func (g *TagGate) AdmitText(pts []model.TextPoint) error {
	if g == nil || len(pts) == 0 {
		return nil
	}
	var fresh []string
	g.mu.RLock()
	for i := range pts {
		if _, ok := g.known[pts[i].Tag]; !ok {
			fresh = append(fresh, pts[i].Tag)
		}
	}
	g.mu.RUnlock()
	if len(fresh) == 0 {
		return nil
	}
	return g.admitFresh(fresh)
}

func (g *TagGate) admitFresh(fresh []string) error {
	// Deduplicate and drop the names the store already has.
	seen := make(map[string]struct{}, len(fresh))
	n := 0
	for _, t := range fresh {
		if _, dup := seen[t]; dup {
			continue
		}
		seen[t] = struct{}{}
		if g.cat != nil && g.cat.HasTag(t) {
			g.mu.Lock()
			g.known[t] = struct{}{}
			g.mu.Unlock()
			continue
		}
		fresh[n] = t
		n++
	}
	fresh = fresh[:n]
	if n == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if dt := now.Sub(g.last); dt > 0 {
		g.tokens = min(float64(g.limit), g.tokens+dt.Minutes()*float64(g.limit))
		g.last = now
	}
	var need []string
	for _, t := range fresh {
		if _, ok := g.known[t]; !ok { // another write may have added it meanwhile
			need = append(need, t)
		}
	}
	if float64(len(need)) > g.tokens {
		retry := time.Duration((float64(len(need)) - g.tokens) / float64(g.limit) * float64(time.Minute))
		if len(need) > g.limit {
			retry = time.Minute // never fits: say when the bucket is full again
		}
		first := need[min(int(g.tokens), len(need)-1)] // the first one over budget
		return &TooManyNewTagsError{Tag: first, New: len(need), Limit: g.limit, RetryAfter: retry}
	}
	g.tokens -= float64(len(need))
	for _, t := range need {
		g.known[t] = struct{}{}
	}
	return nil
}
