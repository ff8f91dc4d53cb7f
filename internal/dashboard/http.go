package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/pith-historian/pith/internal/docstore"
)

// Handler serves the dashboards API (/api/v1/dashboards) and the public
// pages (/d/<token>).
type Handler struct {
	st    *Store
	inner http.Handler // the API without key checks, for a public page's allowed reads
	page  http.Handler // serves the viewer page's HTML
	log   *slog.Logger
}

// NewHandler returns the handler. inner answers the reads a public page
// makes (/api/v1/latest, /data, /tags, /energy, /histogram), each limited
// to the dashboard's tags; page serves the viewer's HTML for /d/<token>.
func NewHandler(st *Store, inner, page http.Handler, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{st: st, inner: inner, page: page, log: log}
}

// Paths are the API routes to mount (the public ones are under /d/).
var Paths = []string{"/api/v1/dashboards", "/api/v1/dashboards/"}

// PublicPrefix is the path of public pages: /d/<token>.
const PublicPrefix = "/d/"

func (h *Handler) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrNotFound):
		docstore.WriteError(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrExists), errors.Is(err, ErrConflict):
		docstore.WriteError(w, http.StatusConflict, err.Error())
	case errors.Is(err, ErrStorage):
		h.log.Error("dashboard store", "err", err)
		docstore.WriteError(w, http.StatusInternalServerError, err.Error())
	default:
		docstore.WriteError(w, http.StatusBadRequest, err.Error())
	}
}

// readDoc reads a request body as a dashboard.
func readDoc(r *http.Request) (*Dashboard, error) {
	b, err := docstore.ReadBody(r, MaxBytes)
	if err != nil {
		return nil, err
	}
	return Decode(b)
}

type summary struct {
	ID      string `json:"id"`
	Title   string `json:"title"`
	Version int64  `json:"version"`
	Updated int64  `json:"updated"`
	Public  bool   `json:"public"`
	Token   string `json:"token,omitempty"`
	Display bool   `json:"display"`
	Widgets int    `json:"widgets"`
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if strings.HasPrefix(p, PublicPrefix) {
		h.servePublic(w, r)
		return
	}
	rest, _ := strings.CutPrefix(p, "/api/v1/dashboards")
	rest = strings.TrimPrefix(rest, "/")
	switch {
	case rest == "":
		if !docstore.Allow(w, r, http.MethodGet, http.MethodPost) {
			return
		}
		if r.Method == http.MethodPost {
			d, err := readDoc(r)
			if err == nil {
				d, err = h.st.Create(d, false)
			}
			if err != nil {
				h.fail(w, err)
				return
			}
			docstore.WriteDoc(w, http.StatusCreated, d)
			return
		}
		list := []summary{}
		for _, d := range h.st.List() {
			list = append(list, summary{d.ID, d.Title, d.Version, d.Updated, d.Public, d.Token, d.Display, len(d.Widgets)})
		}
		docstore.WriteDoc(w, http.StatusOK, map[string]any{"dashboards": list})
		return
	case rest == "import":
		if !docstore.Allow(w, r, http.MethodPost) {
			return
		}
		d, err := readDoc(r)
		if err == nil {
			// An imported file is a new dashboard: private until made public here.
			d.Public, d.Display, d.Token = false, false, ""
			d, err = h.st.Create(d, true)
		}
		if err != nil {
			h.fail(w, err)
			return
		}
		docstore.WriteDoc(w, http.StatusCreated, d)
		return
	}
	id, action, _ := strings.Cut(rest, "/")
	if !ValidID(id) {
		docstore.WriteError(w, http.StatusNotFound, "no such dashboard: "+strconv.Quote(id))
		return
	}
	switch action {
	case "":
		if !docstore.Allow(w, r, http.MethodGet, http.MethodPut, http.MethodDelete) {
			return
		}
		switch r.Method {
		case http.MethodPut:
			d, err := readDoc(r)
			if err == nil {
				d, err = h.st.Put(id, d)
			}
			if err != nil {
				h.fail(w, err)
				return
			}
			docstore.WriteDoc(w, http.StatusOK, d)
		case http.MethodDelete:
			if err := h.st.Delete(id); err != nil {
				h.fail(w, err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			d, err := h.st.Get(id)
			if err != nil {
				h.fail(w, err)
				return
			}
			docstore.WriteDoc(w, http.StatusOK, d)
		}
	case "duplicate":
		if !docstore.Allow(w, r, http.MethodPost) {
			return
		}
		d, err := h.st.Get(id)
		if err == nil {
			c := *d
			c.ID, c.Title, c.Public, c.Display, c.Token = "", d.Title+" (copy)", false, false, ""
			c.ID = id
			d, err = h.st.Create(&c, true)
		}
		if err != nil {
			h.fail(w, err)
			return
		}
		docstore.WriteDoc(w, http.StatusCreated, d)
	case "export":
		if !docstore.Allow(w, r, http.MethodGet) {
			return
		}
		d, err := h.st.Get(id)
		if err != nil {
			h.fail(w, err)
			return
		}
		c := *d
		c.Public, c.Display, c.Token = false, false, ""
		w.Header().Set("Content-Disposition", `attachment; filename="pith-dashboard-`+id+`.json"`)
		docstore.WriteDoc(w, http.StatusOK, &c)
	default:
		docstore.WriteError(w, http.StatusNotFound, "no such endpoint: "+p)
	}
}

// publicReads are the API reads a public page may make, each limited to
// the dashboard's tags.
var publicReads = map[string]bool{"/api/v1/latest": true, "/api/v1/data": true, "/api/v1/tags": true,
	"/api/v1/energy": true, "/api/v1/histogram": true, "/api/v1/alarms": true}

// maxPublicPoints bounds a public page's data answers.
const maxPublicPoints = 5000

// servePublic serves /d/<token> (the viewer page), /d/<token>/dashboard.json
// (the read-only document) and /d/<token>/api/v1/... (reads of its tags).
func (h *Handler) servePublic(w http.ResponseWriter, r *http.Request) {
	if !docstore.Allow(w, r, http.MethodGet) {
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, PublicPrefix)
	token, sub, _ := strings.Cut(rest, "/")
	d, err := h.st.ByToken(token)
	if err != nil {
		docstore.WriteError(w, http.StatusNotFound, "no such public dashboard")
		return
	}
	switch {
	case sub == "":
		h.page.ServeHTTP(w, r)
	case sub == "dashboard.json":
		docstore.WriteDoc(w, http.StatusOK, d.PublicView())
	case publicReads["/"+sub]:
		h.publicRead(w, r, d.PublicView(), "/"+sub)
	default:
		docstore.WriteError(w, http.StatusNotFound, "not found: "+r.URL.Path)
	}
}

func (h *Handler) publicRead(w http.ResponseWriter, r *http.Request, d *Dashboard, path string) {
	tags := d.Tags()
	q := r.URL.Query()
	switch path {
	case "/api/v1/latest":
		if len(q["tag"]) == 0 {
			for t := range tags {
				q.Add("tag", t)
			}
		}
		fallthrough
	case "/api/v1/data", "/api/v1/energy", "/api/v1/histogram":
		if len(q["tag"]) == 0 {
			docstore.WriteError(w, http.StatusBadRequest, "missing parameter tag")
			return
		}
		for _, t := range q["tag"] {
			if !tags[t] {
				docstore.WriteError(w, http.StatusForbidden, "tag "+strconv.Quote(t)+" is not on this dashboard")
				return
			}
		}
		if v := q.Get("points"); v != "" {
			if n, err := strconv.Atoi(v); err != nil || n > maxPublicPoints {
				docstore.WriteError(w, http.StatusBadRequest, "parameter points: at most "+strconv.Itoa(maxPublicPoints)+" on a public page")
				return
			}
		}
	case "/api/v1/tags", "/api/v1/alarms":
		// Answered below from the full list, filtered; alarms: current
		// states only (every alarm, normal ones too), never the history.
		q = url.Values{}
		if path == "/api/v1/alarms" {
			q.Set("all", "1")
		}
	}
	r2 := r.Clone(r.Context())
	r2.URL = &url.URL{Path: path, RawQuery: q.Encode()}
	r2.RequestURI = r2.URL.RequestURI()
	if path != "/api/v1/tags" && path != "/api/v1/alarms" {
		h.inner.ServeHTTP(w, r2)
		return
	}
	rec := &bufWriter{h: http.Header{}, code: http.StatusOK}
	h.inner.ServeHTTP(rec, r2)
	if path == "/api/v1/alarms" {
		h.publicAlarms(w, rec, tags)
		return
	}
	var all struct {
		Tags []map[string]any `json:"tags"`
	}
	if rec.code != http.StatusOK || json.Unmarshal(rec.buf.Bytes(), &all) != nil {
		docstore.WriteError(w, http.StatusBadGateway, "read tags")
		return
	}
	out := []map[string]any{}
	for _, t := range all.Tags {
		if name, _ := t["name"].(string); tags[name] {
			out = append(out, t)
		}
	}
	docstore.WriteDoc(w, http.StatusOK, map[string]any{"tags": out})
}

// publicAlarms answers a public page's GET /api/v1/alarms: the current
// state of the alarms watching the dashboard's tags, without who
// acknowledged them.
func (h *Handler) publicAlarms(w http.ResponseWriter, rec *bufWriter, tags map[string]bool) {
	var all struct {
		Alarms []map[string]any `json:"alarms"`
	}
	if rec.code != http.StatusOK || json.Unmarshal(rec.buf.Bytes(), &all) != nil {
		docstore.WriteError(w, http.StatusBadGateway, "read alarms")
		return
	}
	out := []map[string]any{}
	for _, a := range all.Alarms {
		if tag, _ := a["tag"].(string); tags[tag] {
			delete(a, "acked_by")
			out = append(out, a)
		}
	}
	docstore.WriteDoc(w, http.StatusOK, map[string]any{"alarms": out})
}

// bufWriter keeps an inner answer to filter it.
type bufWriter struct {
	h    http.Header
	code int
	buf  bytes.Buffer
}

func (b *bufWriter) Header() http.Header         { return b.h }
func (b *bufWriter) WriteHeader(code int)        { b.code = code }
func (b *bufWriter) Write(p []byte) (int, error) { return b.buf.Write(p) }
