package api

import (
	"net/http"
	"time"
)

// NoWriteDeadline lifts the server's WriteTimeout for h: a live stream
// that sends for as long as the client listens, or an admin task (a
// backup) whose answer comes when it is done. Such handlers bound their
// own writes or serve trusted clients.
func NoWriteDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Not every writer can (a recorder in a test); those have no
		// deadline to lift.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		h.ServeHTTP(w, r)
	})
}

// WriteDeadline gives h d to answer instead of the server's WriteTimeout:
// an import, whose answer follows a body that may take ReadTimeout to
// arrive.
func WriteDeadline(d time.Duration, h http.Handler) http.Handler {
	if d <= 0 {
		return NoWriteDeadline(h)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
		h.ServeHTTP(w, r)
	})
}
