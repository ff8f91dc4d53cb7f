package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/dashboard"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/picture"
	"github.com/pith-historian/pith/internal/sitedocs"
	"github.com/pith-historian/pith/internal/web"
)

// mountDashboards serves the dashboards kept in the data directory: their
// API, their public pages at /d/<token> (reading through mux, limited to
// each dashboard's tags) and /display, which opens the public dashboard
// marked as the display, else the [display] page of the config. With
// [[forward.nats]], the dashboards go upstream to the central Pith (see
// forwardDocs); a central Pith serves its sites' documents. The returned
// func stops the forwarding.
func mountDashboards(mux *routeMux, cfg *config.Config, ws *web.Server, pics *picture.Store, log *slog.Logger) (func(), error) {
	st, err := dashboard.Open(cfg.Store.Dir)
	if err != nil {
		return nil, fmt.Errorf("open dashboards: %w", err)
	}
	h := dashboard.NewHandler(st, mux, ws.BoardPage(), log)
	for _, p := range dashboard.Paths {
		mux.Handle(p, h)
	}
	mux.Handle(dashboard.PublicPrefix, h)
	mux.Handle("/dashboard", ws.BoardPage()) // the editor: data through the keyed API
	legacy := ws.Handler()
	mux.Handle("/display", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := st.Display(); d != nil {
			http.Redirect(w, r, dashboard.PublicPrefix+d.Token, http.StatusFound)
			return
		}
		legacy.ServeHTTP(w, r)
	}))
	if cfg.Central.NATS != "" {
		docs := sitedocs.Open(cfg.Store.Dir)
		mux.Handle(sitedocs.Prefix, docs)
		mux.Handle(sitedocs.Prefix+"/", docs)
	}
	srcs := map[string]forward.DocSource{dashboard.DocKind: dashDocs{st}, picture.DocKind: picDocs{pics}}
	return forwardDocs(cfg, srcs, func(f func()) { st.OnChange(f); pics.OnChange(f) }, log)
}

// forwardDocs publishes the stored documents (kind -> source) to every
// [[forward.nats]] upstream, each with its own state file in its
// forwarder's folder. onChange registers the wake-up of the publishers.
// Other kinds of documents (process pictures) are added to the map.
func forwardDocs(cfg *config.Config, srcs map[string]forward.DocSource, onChange func(func()), log *slog.Logger) (func(), error) {
	if len(cfg.Forward.NATS) == 0 {
		return func() {}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	var pubs []*forward.DocPublisher
	done := make(chan struct{}, len(cfg.Forward.NATS))
	for _, c := range cfg.Forward.NATS {
		o := forward.DefaultNATSOptions()
		o.URL, o.Site = c.URL, cfg.Site.Name
		p, err := forward.NewDocPublisher(forward.DocOptions{NATS: o,
			StateFile: forward.DocStateFile(filepath.Join(cfg.Store.Dir, "forward", c.Name))}, log.With("forward", c.Name))
		if err != nil {
			cancel()
			return nil, fmt.Errorf("forward.nats %s: documents: %w", c.Name, err)
		}
		for kind, src := range srcs {
			p.Register(kind, src)
		}
		pubs = append(pubs, p)
	}
	onChange(func() {
		for _, p := range pubs {
			p.Changed()
		}
	})
	for _, p := range pubs {
		go func() { p.Run(ctx); done <- struct{}{} }()
	}
	return func() {
		cancel()
		for range pubs {
			<-done
		}
	}, nil
}

// dashDocs lists the dashboards as documents to forward, without their
// public tokens: a token opens this Pith's public page and stays here.
type dashDocs struct{ st *dashboard.Store }

func (d dashDocs) Docs() []forward.Doc {
	list := d.st.List()
	out := make([]forward.Doc, 0, len(list))
	for _, b := range list {
		c := *b
		c.Token = ""
		j, err := json.Marshal(&c)
		if err != nil || !forward.ValidDocName(c.ID) {
			continue
		}
		out = append(out, forward.Doc{ID: c.ID, Version: c.Version, Updated: c.Updated, JSON: j})
	}
	return out
}

// picDocs lists the process pictures as documents to forward.
type picDocs struct{ st *picture.Store }

func (d picDocs) Docs() []forward.Doc {
	list := d.st.List()
	out := make([]forward.Doc, 0, len(list))
	for _, p := range list {
		j, err := json.Marshal(p)
		if err != nil || !forward.ValidDocName(p.ID) {
			continue
		}
		out = append(out, forward.Doc{ID: p.ID, Version: p.Version, Updated: p.Updated, JSON: j})
	}
	return out
}

// mountPictures serves the process pictures kept in the data directory:
// their API (/api/v1/pictures) and their page (/pictures), which reads
// values through the keyed API and the live stream and writes through
// /api/v1/control like every other control path. mountDashboards
// forwards them with the dashboards.
func mountPictures(mux *routeMux, dataDir string, ws *web.Server, log *slog.Logger) (*picture.Store, error) {
	st, err := picture.Open(dataDir)
	if err != nil {
		return nil, fmt.Errorf("open pictures: %w", err)
	}
	h := picture.NewHandler(st, log)
	for _, p := range picture.Paths {
		mux.Handle(p, h)
	}
	mux.Handle("/pictures", ws.PicturePage())
	return st, nil
}
