// Package sitedocs keeps, on a central Pith, the documents edge Piths
// forward (dashboards now; process pictures and other kinds the same
// way): the newest version of each, one atomic file per site, kind and id
// under DATA/sites/<site>/<kind>/<id>.json, and serves them read-only at
// /api/v1/documents (docs/api.md, "Dashboards": forwarded to the central
// Pith).
package sitedocs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/pith-historian/pith/internal/atomicfile"
	"github.com/pith-historian/pith/internal/forward"
)

// Dir is the folder of the data directory holding the sites' documents.
const Dir = "sites"

// siteRE is what a site name may be to become a folder: the subject part
// of pith.<site>.samples, without path tricks.
var siteRE = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$`)

// Entry is a stored document with where it came from.
type Entry struct {
	Site     string          `json:"site"`
	Kind     string          `json:"kind"`
	ID       string          `json:"id"`
	Version  int64           `json:"version"`
	Updated  int64           `json:"updated"`
	Deleted  bool            `json:"deleted,omitempty"`
	Document json.RawMessage `json:"document,omitempty"`
}

// NameError is a site, kind or id that cannot name a file: retrying
// cannot help.
type NameError struct{ msg string }

func (e *NameError) Error() string { return e.msg }

// Store keeps the documents; safe for concurrent use.
type Store struct {
	dir string
	mu  sync.Mutex
}

// Open returns the store of dataDir.
func Open(dataDir string) *Store { return &Store{dir: filepath.Join(dataDir, Dir)} }

func (s *Store) path(site, kind, id string) string {
	return filepath.Join(s.dir, site, kind, id+".json")
}

// Put keeps d as site's document unless a newer one is kept: newer means
// a later Updated, or the same Updated and a higher Version. A delete is
// kept as a tombstone so that an older version delivered late stays
// dropped. It returns whether d was kept.
func (s *Store) Put(site string, d forward.Doc) (bool, error) {
	if site == ".." || site == "." || !siteRE.MatchString(site) || !forward.ValidDocName(d.Kind) || !forward.ValidDocName(d.ID) {
		return false, &NameError{fmt.Sprintf("document %q/%q of site %q: not a valid name", d.Kind, d.ID, site)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.path(site, d.Kind, d.ID)
	if old, err := read(p); err == nil {
		if old.Updated > d.Updated || (old.Updated == d.Updated && old.Version >= d.Version) {
			return false, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, err
	}
	e := Entry{Site: site, Kind: d.Kind, ID: d.ID, Version: d.Version, Updated: d.Updated, Deleted: d.Deleted, Document: d.JSON}
	b, err := json.Marshal(e)
	if err != nil {
		return false, fmt.Errorf("encode document: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return false, fmt.Errorf("create documents folder: %w", err)
	}
	if err := atomicfile.Write(p, append(b, '\n'), 0o644); err != nil {
		return false, fmt.Errorf("write document: %w", err)
	}
	return true, nil
}

func read(p string) (*Entry, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("document file %s: %w", p, err)
	}
	return &e, nil
}

// Get returns a kept document (a tombstone too).
func (s *Store) Get(site, kind, id string) (*Entry, error) {
	if !siteRE.MatchString(site) || site == ".." || !forward.ValidDocName(kind) || !forward.ValidDocName(id) {
		return nil, os.ErrNotExist
	}
	return read(s.path(site, kind, id))
}

// List returns the kept documents (without their bodies), tombstones
// left out, of one site or every site ("") and one kind or every kind.
func (s *Store) List(site, kind string) ([]Entry, error) {
	pat := filepath.Join(s.dir, "*", "*", "*.json")
	files, err := filepath.Glob(pat)
	if err != nil {
		return nil, err
	}
	out := []Entry{}
	for _, f := range files {
		e, err := read(f)
		if err != nil {
			continue // a file being replaced, or not ours
		}
		if e.Deleted || (site != "" && e.Site != site) || (kind != "" && e.Kind != kind) {
			continue
		}
		e.Document = nil
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b Entry) int {
		return strings.Compare(a.Site+"/"+a.Kind+"/"+a.ID, b.Site+"/"+b.Kind+"/"+b.ID)
	})
	return out, nil
}

// Prefix is the route of the handler.
const Prefix = "/api/v1/documents"

// ServeHTTP answers GET /api/v1/documents[?site=&kind=] (the list)
// and GET /api/v1/documents/{site}/{kind}/{id} (one document as the site
// saved it).
func (s *Store) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]string{"error": msg})
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		fail(http.StatusMethodNotAllowed, "method "+r.Method+" not allowed")
		return
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, Prefix), "/")
	w.Header().Set("Cache-Control", "no-store")
	if rest == "" {
		q := r.URL.Query()
		list, err := s.List(q.Get("site"), q.Get("kind"))
		if err != nil {
			fail(http.StatusInternalServerError, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"documents": list})
		return
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		fail(http.StatusNotFound, "want /api/v1/documents/{site}/{kind}/{id} or /api/v1/documents")
		return
	}
	e, err := s.Get(parts[0], parts[1], parts[2])
	if err != nil || e.Deleted {
		fail(http.StatusNotFound, "no such document")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(e.Document)
}
