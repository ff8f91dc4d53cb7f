package alarm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"

	"github.com/pith-historian/pith/internal/api"
)

// Limits of the HTTP handlers.
const (
	maxAckBytes         = 4 << 10
	defaultHistoryLimit = 1000
	maxHistoryLimit     = 100_000
)

// Handler serves GET /api/v1/alarms (current alarms; with history=1 the
// logged events between from and to, Unix ms) and POST
// /api/v1/alarms/ack {"id": NAME}. The acknowledging user is the API key's
// name (or the client address without keys).
func (e *Engine) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/alarms", e.handleList)
	mux.HandleFunc("/api/v1/alarms/ack", e.handleAck)
	return mux
}

// OffHandler answers GET /api/v1/alarms when the alarm engine is off:
// 200 {"enabled": false, "alarms": []}, so that the dashboard stops asking
// without an error in the browser's console.
func OffHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			api.WriteError(w, http.StatusMethodNotAllowed, "alarms are not enabled ([alarms] enabled = false)")
			return
		}
		api.WriteValue(w, http.StatusOK, map[string]any{"enabled": false, "alarms": []any{}})
	})
}

func (e *Engine) handleList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
		return
	}
	q := r.URL.Query()
	if h := q.Get("history"); h == "" || h == "0" || h == "false" {
		if a := q.Get("all"); a == "1" || a == "true" {
			// Every defined alarm, normal ones too: a lamp shows "normal".
			api.WriteValue(w, http.StatusOK, map[string]any{"alarms": e.All()})
			return
		}
		api.WriteValue(w, http.StatusOK, map[string]any{"alarms": e.Current()})
		return
	}
	from, err := msParam(q.Get("from"), math.MinInt64)
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, "from: "+err.Error())
		return
	}
	to, err := msParam(q.Get("to"), math.MaxInt64)
	if err != nil {
		api.WriteError(w, http.StatusBadRequest, "to: "+err.Error())
		return
	}
	limit := defaultHistoryLimit
	if s := q.Get("limit"); s != "" {
		if limit, err = strconv.Atoi(s); err != nil || limit < 1 || limit > maxHistoryLimit {
			api.WriteError(w, http.StatusBadRequest, fmt.Sprintf("limit: want 1 to %d", maxHistoryLimit))
			return
		}
	}
	evs, err := e.History(from, to, limit)
	if err != nil {
		api.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if evs == nil {
		evs = []Event{}
	}
	api.WriteValue(w, http.StatusOK, map[string]any{"events": evs})
}

func msParam(s string, def int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want Unix milliseconds, got %q", s)
	}
	return v, nil
}

func (e *Engine) handleAck(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
		return
	}
	var req struct {
		ID *string `json:"id"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxAckBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.ID == nil || *req.ID == "" {
		api.WriteError(w, http.StatusBadRequest, `want {"id": "alarm name"}`)
		return
	}
	who := api.KeyName(r.Context())
	if who == "" {
		who = r.RemoteAddr
	}
	st, err := e.Ack(*req.ID, who)
	switch {
	case errors.Is(err, ErrUnknownAlarm):
		api.WriteError(w, http.StatusNotFound, err.Error())
		return
	case errors.Is(err, ErrNothingToAck):
		api.WriteError(w, http.StatusConflict, err.Error())
		return
	case err != nil:
		// Acknowledged in memory but not logged: say so.
		api.WriteError(w, http.StatusInternalServerError, err.Error())
		return
	}
	api.WriteValue(w, http.StatusOK, st)
}
