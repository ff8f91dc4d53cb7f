package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/pith-historian/pith/internal/jsonenc"
	"io"
	"math"
	"net/http"

	"github.com/pith-historian/pith/internal/store"
)

// Errors a Controller wraps so the API answers the right status.
var (
	// ErrNoControlPath: the tag has no device to write to (404).
	ErrNoControlPath = errors.New("no control path")
	// ErrControlForbidden: the caller may not write this tag (403).
	ErrControlForbidden = errors.New("control forbidden")
	// ErrControlValue: the value is out of the tag's range or type (400).
	ErrControlValue = errors.New("bad control value")
)

// controlRequest is the body of POST /api/v1/control. Pointers tell a
// missing field from a zero one.
type controlRequest struct {
	Tag   *string  `json:"tag"`
	Value *float64 `json:"value"`
}

// handleControl serves POST /api/v1/control {"tag": T, "value": V}: it
// writes the value through the Controller and answers 200 once the device
// acknowledged. This path is rare, so it uses encoding/json.
func (s *Server) handleControl(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) {
		return
	}
	if s.opts.Controller == nil {
		writeError(w, http.StatusNotFound, ErrNoControlPath.Error())
		return
	}
	req, err := decodeControl(http.MaxBytesReader(w, r.Body, s.opts.MaxControlBytes))
	if err != nil {
		status := http.StatusBadRequest
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			status = http.StatusRequestEntityTooLarge
		}
		writeError(w, status, err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.ControlTimeout)
	defer cancel()
	if err := s.opts.Controller.Control(ctx, *req.Tag, *req.Value, r.RemoteAddr); err != nil {
		status := controlStatus(err)
		if status >= 500 {
			s.log.Warn("control write failed", "tag", *req.Tag, "remote", r.RemoteAddr, "err", err)
		}
		writeError(w, status, err.Error())
		return
	}
	s.log.Info("control write", "tag", *req.Tag, "value", *req.Value, "remote", r.RemoteAddr)
	b := make([]byte, 0, 64)
	b = append(b, `{"tag":`...)
	b = jsonenc.AppendString(b, *req.Tag)
	b = append(b, `,"value":`...)
	b = jsonenc.AppendFloat(b, *req.Value)
	b = append(b, '}')
	writeJSON(w, http.StatusOK, b)
}

func decodeControl(body io.Reader) (controlRequest, error) {
	var req controlRequest
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("decode control request: %w", err)
	}
	if dec.More() {
		return req, errors.New("decode control request: trailing data after the object")
	}
	switch {
	case req.Tag == nil || *req.Tag == "":
		return req, errors.New("missing field tag")
	case req.Value == nil:
		return req, errors.New("missing field value")
	case math.IsNaN(*req.Value) || math.IsInf(*req.Value, 0):
		return req, errors.New("field value must be finite")
	}
	return req, nil
}

// controlStatus maps a Controller error to an HTTP status.
func controlStatus(err error) int {
	var hs interface{ HTTPStatus() int }
	switch {
	case errors.As(err, &hs) && hs.HTTPStatus() >= 400 && hs.HTTPStatus() <= 599:
		return hs.HTTPStatus()
	case errors.Is(err, ErrNoControlPath), errors.Is(err, store.ErrUnknownTag):
		return http.StatusNotFound
	case errors.Is(err, ErrControlForbidden):
		return http.StatusForbidden
	case errors.Is(err, ErrControlValue):
		return http.StatusBadRequest
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	case errors.Is(err, context.Canceled):
		return http.StatusServiceUnavailable
	}
	return http.StatusBadGateway
}
