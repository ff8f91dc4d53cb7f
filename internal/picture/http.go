package picture

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/docstore"
)

// Handler serves the pictures API at /api/v1/pictures.
type Handler struct {
	st  *Store
	log *slog.Logger
}

// NewHandler returns the handler of the pictures kept in st.
func NewHandler(st *Store, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{st: st, log: log}
}

// Paths are the routes to mount.
var Paths = []string{"/api/v1/pictures", "/api/v1/pictures/"}

// svgPolicy is the Content-Security-Policy of a picture served as an SVG
// file: nothing loads and nothing runs, even if the sanitiser missed one.
const svgPolicy = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; sandbox"

func writeErr(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func writeDoc(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func (h *Handler) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, docstore.ErrNotFound):
		writeErr(w, http.StatusNotFound, err.Error())
	case errors.Is(err, docstore.ErrExists), errors.Is(err, docstore.ErrConflict):
		writeErr(w, http.StatusConflict, err.Error())
	case errors.Is(err, docstore.ErrStorage):
		h.log.Error("picture store", "err", err)
		writeErr(w, http.StatusInternalServerError, err.Error())
	default:
		writeErr(w, http.StatusBadRequest, err.Error())
	}
}

func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m || (m == http.MethodGet && r.Method == http.MethodHead) {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeErr(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed (allowed: "+strings.Join(methods, ", ")+")")
	return false
}

func readDoc(r *http.Request) (*Picture, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, MaxBytes+1))
	if err != nil {
		return nil, errors.New("read body: " + err.Error())
	}
	return Decode(b)
}

// served returns a copy of p whose SVG is sanitised again: a file edited
// on disk, or written by an older Pith, is served as safely as an upload.
func served(p *Picture) (*Picture, error) {
	c := *p
	clean, err := Sanitize([]byte(p.SVG))
	if err != nil {
		return nil, err
	}
	c.SVG = string(clean)
	return &c, nil
}

type summary struct {
	ID       string `json:"id"`
	Title    string `json:"title"`
	Version  int64  `json:"version"`
	Updated  int64  `json:"updated"`
	Bindings int    `json:"bindings"`
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, _ := strings.CutPrefix(r.URL.Path, "/api/v1/pictures")
	rest = strings.TrimPrefix(rest, "/")
	if rest == "" {
		if !allow(w, r, http.MethodGet, http.MethodPost) {
			return
		}
		if r.Method == http.MethodPost {
			p, err := readDoc(r)
			if err == nil {
				p, err = h.st.Create(p, false)
			}
			if err != nil {
				h.fail(w, err)
				return
			}
			writeDoc(w, http.StatusCreated, p)
			return
		}
		list := []summary{}
		for _, p := range h.st.List() {
			list = append(list, summary{p.ID, p.Title, p.Version, p.Updated, len(p.Bindings)})
		}
		writeDoc(w, http.StatusOK, map[string]any{"pictures": list})
		return
	}
	if rest == "sanitize" {
		h.sanitize(w, r)
		return
	}
	id, action, _ := strings.Cut(rest, "/")
	if !ValidID(id) {
		writeErr(w, http.StatusNotFound, "no such picture: "+strconv.Quote(id))
		return
	}
	switch action {
	case "":
		if !allow(w, r, http.MethodGet, http.MethodPut, http.MethodDelete) {
			return
		}
		switch r.Method {
		case http.MethodPut:
			p, err := readDoc(r)
			if err == nil {
				p, err = h.st.Put(id, p)
			}
			if err != nil {
				h.fail(w, err)
				return
			}
			writeDoc(w, http.StatusOK, p)
		case http.MethodDelete:
			if err := h.st.Delete(id); err != nil {
				h.fail(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			p, err := h.st.Get(id)
			if err == nil {
				p, err = served(p)
			}
			if err != nil {
				h.fail(w, err)
				return
			}
			writeDoc(w, http.StatusOK, p)
		}
	case "svg":
		if !allow(w, r, http.MethodGet) {
			return
		}
		p, err := h.st.Get(id)
		if err == nil {
			p, err = served(p)
		}
		if err != nil {
			h.fail(w, err)
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Content-Security-Policy", svgPolicy)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Disposition", `inline; filename="`+id+`.svg"`)
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, p.SVG)
	default:
		writeErr(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
}

// sanitize answers POST /api/v1/pictures/sanitize {"svg": "..."} with the
// drawing as it would be stored: the editor shows an uploaded file only
// after this.
func (h *Handler) sanitize(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodPost) {
		return
	}
	var req struct {
		SVG string `json:"svg"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxBytes+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeErr(w, http.StatusBadRequest, "decode body: "+err.Error())
		return
	}
	clean, err := Sanitize([]byte(req.SVG))
	if err != nil {
		writeErr(w, http.StatusBadRequest, "svg: "+err.Error())
		return
	}
	writeDoc(w, http.StatusOK, map[string]string{"svg": string(clean)})
}
