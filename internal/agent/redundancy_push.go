package agent

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/api"
	"github.com/pith-historian/pith/internal/redundancy"
)

// isPushPath reports whether path takes pushed values: line protocol,
// Prometheus remote_write, emoncms and the CSV/JSON import.
func isPushPath(path string) bool {
	switch path {
	case "/write", "/api/v2/write", "/api/v1/write", "/api/v1/import":
		return true
	}
	return strings.HasPrefix(path, "/input/")
}

// pushRefused is the body of a pushed write refused by the standby.
type pushRefused struct {
	Error     string `json:"error"`
	Active    string `json:"active,omitempty"`     // the box holding the lease, when known
	ActiveURL string `json:"active_url,omitempty"` // where clients reach it, when it said
}

// refusePushes answers pushed writes 503 on the standby box of a pair,
// with the active box's name and URL and a Retry-After of one lease
// renewal: the active box runs the input chains and the calculated tags
// over what is pushed, the standby would store it raw and forward it as
// its own. A sender with both boxes' addresses (Telegraf's urls, a load
// balancer's health check on GET /api/v1/redundancy) sends to the other
// one; one with a single address retries. Everything else passes. With
// r nil (no pair) next is returned unchanged.
func (r *redundancyPart) refusePushes(next http.Handler) http.Handler {
	if r == nil {
		return next
	}
	retry := strconv.Itoa(max(1, int(r.cfg.Redundancy.TTL().Seconds()/redundancy.RenewShare)))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !isPushPath(req.URL.Path) || r.el.Active() {
			next.ServeHTTP(w, req)
			return
		}
		st := r.el.Status()
		body := pushRefused{Active: st.Holder}
		if st.Holder != "" && st.Holder == st.Peer {
			body.ActiveURL = st.PeerURL
		}
		switch {
		case body.Active == "":
			body.Error = "this Pith is the standby of its redundant pair and no box holds the lease right now: retry in a moment"
		case body.ActiveURL != "":
			body.Error = fmt.Sprintf("this Pith is the standby of its redundant pair: send writes to the active box %q at %s", body.Active, body.ActiveURL)
		default:
			body.Error = fmt.Sprintf("this Pith is the standby of its redundant pair: send writes to the active box %q", body.Active)
		}
		w.Header().Set("Retry-After", retry)
		api.WriteValue(w, http.StatusServiceUnavailable, body)
	})
}
