package agent

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/pith-historian/pith/internal/dashboard"
	"github.com/pith-historian/pith/internal/web"
)

// mountDashboards serves the dashboards kept in the data directory: their
// API, their public pages at /d/<token> (reading through mux, limited to
// each dashboard's tags) and /display, which opens the public dashboard
// marked as the display, else the [display] page of the config.
func mountDashboards(mux *routeMux, dataDir string, ws *web.Server, log *slog.Logger) error {
	st, err := dashboard.Open(dataDir)
	if err != nil {
		return fmt.Errorf("open dashboards: %w", err)
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
	return nil
}
