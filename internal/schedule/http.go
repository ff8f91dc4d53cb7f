package schedule

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/pith-historian/pith/internal/api"
)

// maxBookingBytes bounds a booking request body.
const maxBookingBytes = 4 << 10

// Handler serves GET /api/v1/schedules (schedules, states and bookings),
// POST /api/v1/schedules/bookings {"schedule", "start", "end", "note"}
// (201 with the booking and its id) and DELETE
// /api/v1/schedules/bookings/{id}.
func (e *Engine) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/schedules", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
			return
		}
		api.WriteValue(w, http.StatusOK, e.Info(e.clk.Now()))
	})
	mux.HandleFunc("/api/v1/schedules/bookings", func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			api.WriteValue(w, http.StatusOK, map[string]any{"bookings": e.Info(e.clk.Now()).Bookings})
		case http.MethodPost:
			var b Booking
			dec := json.NewDecoder(io.LimitReader(r.Body, maxBookingBytes))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&b); err != nil {
				api.WriteError(w, http.StatusBadRequest, "decode booking: "+err.Error())
				return
			}
			if b.ID != "" || b.Source != "" {
				api.WriteError(w, http.StatusBadRequest, "id and source are set by the server")
				return
			}
			out, err := e.AddBooking(b)
			if err != nil {
				api.WriteError(w, http.StatusBadRequest, err.Error())
				return
			}
			api.WriteValue(w, http.StatusCreated, out)
		default:
			w.Header().Set("Allow", "GET, HEAD, POST")
			api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
		}
	})
	mux.HandleFunc("/api/v1/schedules/bookings/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodDelete {
			w.Header().Set("Allow", "DELETE")
			api.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
			return
		}
		id := strings.TrimPrefix(r.URL.Path, "/api/v1/schedules/bookings/")
		if err := e.DeleteBooking(id); err != nil {
			status := http.StatusInternalServerError
			if errors.Is(err, ErrUnknownBooking) {
				status = http.StatusNotFound
			}
			api.WriteError(w, status, err.Error())
			return
		}
		api.WriteValue(w, http.StatusOK, map[string]any{"deleted": id})
	})
	return mux
}
