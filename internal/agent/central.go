package agent

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/sitedocs"
	"github.com/pith-historian/pith/internal/store"
)

// Central mode tuning.
const (
	centralRetryMin   = time.Second      // first wait after the consumer stopped (server away, no stream yet)
	centralRetryMax   = 15 * time.Second // longest wait between attempts
	centralNameCache  = 1 << 20          // prefixed tag names kept per worker before the cache is reset
	centralMaxRefused = 1 << 16          // points of one batch skipped one by one before the batch is refused
)

// centralWriter is the store as a central Pith writes to it; *store.DB
// implements it. Both methods are called from every worker at once.
type centralWriter interface {
	Write(ctx context.Context, pts []model.Point) error
	// Delete removes the samples of tag in [from, to), Unix ms, and
	// returns how many there were.
	Delete(ctx context.Context, tag string, from, to int64) (int64, error)
	// SetLabels keeps tag labels with the store's series.
	SetLabels(ctx context.Context, series []model.Series) error
}

var _ centralWriter = (*store.DB)(nil)

// startCentral runs [central]: Workers consumers sharing the JetStream
// durable consumer, each storing the batches it pulls under "<site>."
// before acknowledging them (forward.Consume acks only after the sink
// returned nil, and db.Write returns once the points are durable under the
// store's durability). Other central Piths with the same durable share the
// same work. A consumer that stops (server unreachable, stream not created
// yet because no edge published) is restarted with a growing pause. The
// returned stop waits for the workers.
func startCentral(ctx context.Context, c config.Central, db centralWriter, log *slog.Logger) func() {
	return startCentralWith(ctx, c, db, nil, log)
}

// startCentralWith is startCentral publishing the sites it stores in dir
// (nil publishes nothing), consuming its partition when the sites are split.
func startCentralWith(ctx context.Context, c config.Central, db centralWriter, dir *siteDirectory, log *slog.Logger) func() {
	c.Subjects, c.Durable = c.EffectiveSubjects(), c.EffectiveDurable()
	ctx, cancel := context.WithCancel(ctx)
	log = log.With("central", c.Durable)
	var wg sync.WaitGroup
	for i := range c.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &centralWorker{db: db, log: log, names: map[siteTag]string{}, dir: dir}
			wait := centralRetryMin
			for ctx.Err() == nil {
				start := time.Now()
				err := forward.Consume(ctx, c.NATS, c.Subjects, c.Durable, forward.Handlers{Points: w.sink(ctx), Sites: w.sites(ctx), Delete: w.delete(ctx), Labels: w.labels(ctx), Text: w.text(ctx), Document: w.document()}, log.With("worker", i))
				if ctx.Err() != nil {
					return
				}
				if time.Since(start) > centralRetryMax {
					wait = centralRetryMin
				}
				log.Warn("central consumer stopped; retrying", "worker", i, "in", wait, "err", err)
				sleepCtx(ctx, wait)
				wait = min(2*wait, centralRetryMax)
			}
		}()
	}
	log.Info("central mode", "nats", c.NATS, "subjects", c.Subjects, "durable", c.Durable, "workers", c.Workers)
	return func() {
		cancel()
		wg.Wait()
	}
}

// siteTag keys the cache of prefixed names.
type siteTag struct{ site, tag string }

// centralWorker stores the batches of one consumer; it is used by one
// goroutine.
type centralWorker struct {
	db    centralWriter
	log   *slog.Logger
	names map[siteTag]string // (site, tag) -> "site.tag", so a batch costs no string per point
	dir   *siteDirectory     // where the sites stored are published; nil for none
	all   []model.Point      // the points of a multi-site group, renamed
}

// sink returns the forward.SinkFunc of w. It renames the points in place
// (Consume reuses the slice for the next batch) and writes them. A point
// the store refuses (a name too long once prefixed, a time older than the
// raw retention) is logged and skipped, so that it cannot hold up the
// stream; any other error makes Consume redeliver the batch later.
func (w *centralWorker) sink(ctx context.Context) forward.SinkFunc {
	return func(site string, pts []model.Point) error {
		if len(w.names) > centralNameCache {
			clear(w.names)
		}
		for i := range pts {
			if site == "" { // renamed already (sites)
				break
			}
			k := siteTag{site, pts[i].Tag}
			name, ok := w.names[k]
			if !ok {
				name = site + "." + pts[i].Tag
				w.names[k] = name
			}
			pts[i].Tag = name
		}
		for refused := 0; ; refused++ {
			err := w.db.Write(ctx, pts)
			var pe *model.PointError
			if err == nil || !errors.As(err, &pe) || refused >= centralMaxRefused || pe.Index < 0 || pe.Index >= len(pts) {
				return err
			}
			w.log.Error("central store refused a point; skipping it", "site", site, "tag", pe.Tag, "err", pe.Err)
			pts = append(pts[:pe.Index], pts[pe.Index+1:]...)
		}
	}
}

// sites returns the forward.SitesFunc of w: the points of several sites
// renamed and stored with one write (one commit of the store instead of
// one per site's message), then each site published in w.dir. A point
// the store refuses is skipped as sink does.
func (w *centralWorker) sites(ctx context.Context) forward.SitesFunc {
	sink := w.sink(ctx)
	return func(groups []forward.SitePoints) error {
		w.all = w.all[:0]
		for _, g := range groups {
			w.all = append(w.all, g.Points...)
			// Renamed in w.all below by sink, under each point's own site.
			for i := len(w.all) - len(g.Points); i < len(w.all); i++ {
				w.all[i].Tag = w.name(g.Site, w.all[i].Tag)
			}
		}
		if err := sink("", w.all); err != nil {
			return err
		}
		if w.dir != nil {
			for _, g := range groups {
				w.dir.seen(ctx, g.Site)
			}
		}
		return nil
	}
}

// name returns "site.tag" from the cache of w.
func (w *centralWorker) name(site, tag string) string {
	k := siteTag{site, tag}
	name, ok := w.names[k]
	if !ok {
		name = site + "." + tag
		w.names[k] = name
	}
	return name
}

// centralTextWriter is a centralWriter that stores text, as *store.DB does.
type centralTextWriter interface {
	WriteText(ctx context.Context, pts []model.TextPoint) error
}

// text returns the forward.TextFunc of w: an edge's text values stored
// under "<site>.<tag>". A value the store refuses (text for a tag that
// holds numbers here) is logged and skipped, as a refused point is.
func (w *centralWorker) text(ctx context.Context) forward.TextFunc {
	tw, ok := w.db.(centralTextWriter)
	if !ok {
		return nil
	}
	return func(site string, pts []model.TextPoint) error {
		for i := range pts {
			pts[i].Tag = site + "." + pts[i].Tag
		}
		for refused := 0; ; refused++ {
			err := tw.WriteText(ctx, pts)
			var pe *model.PointError
			if err == nil || !errors.As(err, &pe) || refused >= centralMaxRefused || pe.Index < 0 || pe.Index >= len(pts) {
				return err
			}
			w.log.Error("central store refused a text value; skipping it", "site", site, "tag", pe.Tag, "err", pe.Err)
			pts = append(pts[:pe.Index], pts[pe.Index+1:]...)
			if len(pts) == 0 {
				return nil
			}
		}
	}
}

// delete returns the forward.DeleteFunc of w: an edge's delete applied to
// "<site>.<tag>". A tag the store does not know has nothing to delete.
func (w *centralWorker) delete(ctx context.Context) forward.DeleteFunc {
	return func(site, tag string, from, to int64) error {
		name := site + "." + tag
		n, err := w.db.Delete(ctx, name, from, to)
		if errors.Is(err, store.ErrUnknownTag) {
			return nil
		}
		if errors.Is(err, store.ErrTooOld) {
			// Retrying cannot help: skip it rather than hold up the stream.
			w.log.Error("central store refused an edge's delete; skipping it", "tag", name, "from", from, "to", to, "err", err)
			return nil
		}
		if err != nil {
			return err
		}
		w.log.Info("applied an edge's delete", "tag", name, "from", from, "to", to, "samples", n)
		return nil
	}
}

// labels returns the forward.LabelsFunc of w: an edge's tag labels kept
// for "<site>.<tag>", with the label _site=<site> added, so that the same
// series scraped at two sites stays two series in PromQL. Labels the store
// refuses (a name too long once prefixed) are logged and skipped, so they
// cannot hold up the stream.
func (w *centralWorker) labels(ctx context.Context) forward.LabelsFunc {
	return func(site string, series []model.Series) error {
		out := make([]model.Series, len(series))
		for i, x := range series {
			ls := x.Labels
			if len(ls) > 0 {
				ls = append(ls.Clone(), model.Label{Name: model.LabelSite, Value: site}).Sorted()
			}
			out[i] = model.Series{Tag: site + "." + x.Tag, Labels: ls}
		}
		err := w.db.SetLabels(ctx, out)
		var pe *model.PointError
		if errors.As(err, &pe) {
			w.log.Error("central store refused an edge's labels; skipping them", "site", site, "tag", pe.Tag, "err", pe.Err)
			return nil
		}
		return err
	}
}

// centralDocWriter is a centralWriter that keeps the sites' documents
// (dashboards, ...), as centralDB does.
type centralDocWriter interface {
	PutDoc(site string, d forward.Doc) (bool, error)
}

// document returns the forward.DocFunc of w: the newest version of each
// document of each site kept under DATA/sites (internal/sitedocs).
func (w *centralWorker) document() forward.DocFunc {
	dw, ok := w.db.(centralDocWriter)
	if !ok {
		return nil
	}
	return func(site string, d forward.Doc) error {
		kept, err := dw.PutDoc(site, d)
		var bad *sitedocs.NameError
		if errors.As(err, &bad) {
			w.log.Error("central refused a site's document; skipping it", "site", site, "kind", d.Kind, "id", d.ID, "err", err)
			return nil
		}
		if err == nil && kept {
			w.log.Info("stored a site's document", "site", site, "kind", d.Kind, "id", d.ID, "version", d.Version, "deleted", d.Deleted)
		}
		return err
	}
}

// centralDB is the store and the sites' documents, as a central Pith
// writes to them.
type centralDB struct {
	*store.DB
	docs *sitedocs.Store
}

// PutDoc keeps a site's document.
func (c centralDB) PutDoc(site string, d forward.Doc) (bool, error) { return c.docs.Put(site, d) }

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
