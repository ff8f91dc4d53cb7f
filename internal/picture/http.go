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

func (h *Handler) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, docstore.ErrNotFound):
		docstore.WriteError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, docstore.ErrExists), errors.Is(err, docstore.ErrConflict):
		docstore.WriteError(w, http.StatusConflict, err.Error())
	case errors.Is(err, docstore.ErrStorage):
		h.log.Error("picture store", "err", err)
		docstore.WriteError(w, http.StatusInternalServerError, err.Error())
	default:
		docstore.WriteError(w, http.StatusBadRequest, err.Error())
	}
}

// readDoc reads a request body as a picture.
func readDoc(r *http.Request) (*Picture, error) {
	b, err := docstore.ReadBody(r, MaxBytes)
	if err != nil {
		return nil, err
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
		if !docstore.Allow(w, r, http.MethodGet, http.MethodPost) {
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
			docstore.WriteDoc(w, http.StatusCreated, p)
			return
		}
		list := []summary{}
		for _, p := range h.st.List() {
			list = append(list, summary{p.ID, p.Title, p.Version, p.Updated, len(p.Bindings)})
		}
		docstore.WriteDoc(w, http.StatusOK, map[string]any{"pictures": list})
		return
	}
	if rest == "sanitize" {
		h.sanitize(w, r)
		return
	}
	id, action, _ := strings.Cut(rest, "/")
	if !ValidID(id) {
		docstore.WriteError(w, http.StatusNotFound, "no such picture: "+strconv.Quote(id))
		return
	}
	switch action {
	case "":
		if !docstore.Allow(w, r, http.MethodGet, http.MethodPut, http.MethodDelete) {
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
			docstore.WriteDoc(w, http.StatusOK, p)
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
			docstore.WriteDoc(w, http.StatusOK, p)
		}
	case "svg":
		if !docstore.Allow(w, r, http.MethodGet) {
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
		docstore.WriteError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path)
	}
}

// sanitize answers POST /api/v1/pictures/sanitize {"svg": "..."} with the
// drawing as it would be stored: the editor shows an uploaded file only
// after this.
func (h *Handler) sanitize(w http.ResponseWriter, r *http.Request) {
	if !docstore.Allow(w, r, http.MethodPost) {
		return
	}
	var req struct {
		SVG string `json:"svg"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxBytes+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		docstore.WriteError(w, http.StatusBadRequest, "decode body: "+err.Error())
		return
	}
	clean, err := Sanitize([]byte(req.SVG))
	if err != nil {
		docstore.WriteError(w, http.StatusBadRequest, "svg: "+err.Error())
		return
	}
	docstore.WriteDoc(w, http.StatusOK, map[string]string{"svg": string(clean)})
}
