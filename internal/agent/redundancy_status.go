package agent

import (
	"net/http"

	"github.com/pith-historian/pith/internal/api"
)

// redundancyStatus answers GET /api/v1/redundancy: whether this Pith is
// one box of a redundant pair and, if so, its role, so the dashboard can
// show the badge without asking for a system tag a single Pith does not
// have.
type redundancyStatus struct{ r *redundancyPart }

func (h redundancyStatus) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		api.WriteError(w, http.StatusMethodNotAllowed, "use GET")
		return
	}
	if h.r == nil {
		api.WriteValue(w, http.StatusOK, map[string]any{"pair": false})
		return
	}
	st := h.r.el.Status()
	role := "standby"
	if h.r.el.Active() {
		role = "active"
	}
	api.WriteValue(w, http.StatusOK, map[string]any{
		"pair":               true,
		"group":              h.r.cfg.Redundancy.Group,
		"node":               h.r.cfg.Redundancy.Node,
		"role":               role,
		"active":             st.Holder,
		"peer":               st.Peer,
		"lease_remaining_ms": st.LeaseLeft.Milliseconds(),
	})
}
