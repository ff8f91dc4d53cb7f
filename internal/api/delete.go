package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/pith-historian/pith/internal/store"
)

// Deleter removes samples, as *store.DB does. Delete is called
// concurrently with queries and writes; it returns how many samples of tag
// in [from, to) it removed, store.ErrUnknownTag for a tag never seen and
// an error wrapping store.ErrTooOld for a range whose raw data expired.
type Deleter interface {
	Delete(ctx context.Context, tag string, from, to int64) (int64, error)
}

var _ Deleter = (*store.DB)(nil)

// Delete passes to the wrapped store when it can delete.
func (s dbStore[T, D]) Delete(ctx context.Context, tag string, from, to int64) (int64, error) {
	d, ok := any(s.db).(Deleter)
	if !ok {
		return 0, errNoDelete
	}
	return d.Delete(ctx, tag, from, to)
}

var errNoDelete = errors.New("this store cannot delete samples")

// routeData sends DELETE /api/v1/data to handleDelete and every other
// method to handleData.
func (s *Server) routeData(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		s.handleDelete(w, r)
		return
	}
	s.handleData(w, r)
}

// handleDelete serves DELETE /api/v1/data?tag=T&from=MS&to=MS (admin
// scope, see ScopeFor): it removes the samples of T in [from, to) from the
// raw data and every rollup, durably, and answers {"deleted": N}. Every
// delete is logged with who asked, what and how it ended.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	tag := q.Get("tag")
	if tag == "" {
		writeError(w, http.StatusBadRequest, "missing parameter tag")
		return
	}
	from, err := intParam(q, "from")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	to, err := intParam(q, "to")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if to <= from {
		writeError(w, http.StatusBadRequest, "parameter to must be greater than from")
		return
	}
	d, ok := s.opts.Deleter, s.opts.Deleter != nil
	if !ok {
		d, ok = s.st.(Deleter)
	}
	if !ok {
		writeError(w, http.StatusNotImplemented, errNoDelete.Error())
		return
	}
	who := KeyName(r.Context())
	if who == "" {
		who = "anonymous"
	}
	start := time.Now()
	n, err := d.Delete(r.Context(), tag, from, to)
	attrs := []any{"who", who, "remote", r.RemoteAddr, "tag", tag, "from", from, "to", to,
		"took", time.Since(start).Round(time.Microsecond)}
	if err != nil {
		status := deleteStatus(err)
		s.log.Warn("data delete refused", append(attrs, "status", status, "err", err)...)
		writeError(w, status, err.Error())
		return
	}
	s.log.Info("data delete done", append(attrs, "deleted", n)...)
	b := append(make([]byte, 0, 32), `{"deleted":`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, '}')
	writeJSON(w, http.StatusOK, b)
}

func deleteStatus(err error) int {
	switch {
	case errors.Is(err, store.ErrUnknownTag):
		return http.StatusNotFound
	case errors.Is(err, store.ErrTooOld):
		return http.StatusBadRequest
	case errors.Is(err, errNoDelete):
		return http.StatusNotImplemented
	}
	return writeErrStatus(err)
}

// writeErrStatus is the status of a failed write to the store: 507 when
// the disk is full, 503 when the store is closing or the client gave up,
// 500 otherwise.
func writeErrStatus(err error) int {
	switch {
	case store.IsDiskFull(err):
		return http.StatusInsufficientStorage
	case errors.Is(err, store.ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
