package rule

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/api"
)

// maxOverrideBytes bounds an override request body.
const maxOverrideBytes = 4 << 10

// maxOverride is the longest override accepted.
const maxOverride = 7 * 24 * time.Hour

// Handler serves GET /api/v1/rules (every rule's state), POST
// /api/v1/rules/override {"rule": N, "value": V, "for": "30m"} and DELETE
// /api/v1/rules/override/{rule}.
func (e *Engine) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/rules", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
			return
		}
		api.WriteValue(w, http.StatusOK, map[string]any{"rules": e.Statuses()})
	})
	mux.HandleFunc("/api/v1/rules/override", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
			return
		}
		var req struct {
			Rule  string   `json:"rule"`
			Value *float64 `json:"value"`
			For   string   `json:"for"`
		}
		dec := json.NewDecoder(io.LimitReader(r.Body, maxOverrideBytes))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || req.Rule == "" || req.Value == nil ||
			math.IsNaN(*req.Value) || math.IsInf(*req.Value, 0) {
			api.WriteError(w, http.StatusBadRequest, `want {"rule": NAME, "value": NUMBER, "for": "30m"}`)
			return
		}
		d, err := time.ParseDuration(req.For)
		if err != nil || d <= 0 || d > maxOverride {
			api.WriteError(w, http.StatusBadRequest, "for: want a duration from 1s to 168h, e.g. \"30m\"")
			return
		}
		who := api.KeyName(r.Context())
		if who == "" {
			who = r.RemoteAddr
		}
		if err := e.Override(r.Context(), req.Rule, *req.Value, d, who); err != nil {
			status := http.StatusBadGateway
			switch {
			case errors.Is(err, ErrUnknownRule):
				status = http.StatusNotFound
			case errors.Is(err, api.ErrControlValue):
				status = http.StatusBadRequest
			}
			api.WriteError(w, status, err.Error())
			return
		}
		api.WriteValue(w, http.StatusOK, map[string]any{"rule": req.Rule, "value": *req.Value, "until": time.Now().Add(d).UnixMilli()})
	})
	mux.HandleFunc("/api/v1/rules/override/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete {
			w.Header().Set("Allow", "DELETE")
			api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/api/v1/rules/override/")
		if err := e.EndOverride(name); err != nil {
			api.WriteError(w, http.StatusNotFound, err.Error())
			return
		}
		api.WriteValue(w, http.StatusOK, map[string]any{"rule": name, "override": "ended"})
	})
	return mux
}
