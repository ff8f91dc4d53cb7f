package dashboard

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/atomicfile"
	"github.com/pith-historian/pith/internal/docstore"
)

// Dir is the folder of the data directory that holds the dashboards, one
// <id>.json each.
const Dir = "dashboards"

// Errors of the store, mapped to HTTP statuses by the handlers.
var (
	ErrNotFound = errors.New("no such dashboard")
	ErrExists   = errors.New("a dashboard with this id exists")
	ErrConflict = errors.New("the dashboard changed since it was read")
	// ErrStorage wraps failures of the disk, not of the request.
	ErrStorage = errors.New("dashboard storage")
)

// Store keeps the dashboards of a data directory. It is safe for
// concurrent use; every change is written to its file (atomically: a
// crash leaves the old or the new document) before it is visible.
type Store struct {
	dir string
	now func() time.Time

	mu       sync.RWMutex
	boards   map[string]*Dashboard
	tokens   map[string]string // public token -> id
	onChange func()            // called after every save and delete, under mu: must not block
}

// OnChange sets f to be called after every save and delete (with the
// store locked: f must return at once, e.g. by signalling a channel).
func (s *Store) OnChange(f func()) {
	s.mu.Lock()
	s.onChange = f
	s.mu.Unlock()
}

func (s *Store) changed() {
	if s.onChange != nil {
		s.onChange()
	}
}

// Open loads the dashboards of dataDir/dashboards, creating the folder.
// A file that does not decode is an error naming it: nothing is dropped
// silently.
func Open(dataDir string) (*Store, error) {
	s := &Store{dir: filepath.Join(dataDir, Dir), now: time.Now, boards: map[string]*Dashboard{}, tokens: map[string]string{}}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create dashboards folder: %w", err)
	}
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("read dashboards folder: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			continue // atomic writes' temporary files, anything else
		}
		b, err := os.ReadFile(filepath.Join(s.dir, name))
		if err != nil {
			return nil, fmt.Errorf("read dashboard: %w", err)
		}
		d, err := Decode(b)
		if err == nil {
			err = d.Check()
		}
		if err == nil && d.ID+".json" != name {
			err = fmt.Errorf("id %q does not match the file name", d.ID)
		}
		if err != nil {
			return nil, fmt.Errorf("dashboard file %s: %w", filepath.Join(s.dir, name), err)
		}
		s.boards[d.ID] = d
		if d.Public && d.Token != "" {
			s.tokens[d.Token] = d.ID
		}
	}
	return s, nil
}

// List returns every dashboard, sorted by title then id. The documents
// must not be modified.
func (s *Store) List() []*Dashboard {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*Dashboard, 0, len(s.boards))
	for _, d := range s.boards {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *Dashboard) int {
		if c := strings.Compare(strings.ToLower(a.Title), strings.ToLower(b.Title)); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Get returns a dashboard; it must not be modified.
func (s *Store) Get(id string) (*Dashboard, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.boards[id]
	if !ok {
		return nil, ErrNotFound
	}
	return d, nil
}

// ByToken returns the public dashboard addressed by token.
func (s *Store) ByToken(token string) (*Dashboard, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.tokens[token]
	if !ok {
		return nil, ErrNotFound
	}
	return s.boards[id], nil
}

// Display returns the public dashboard marked to open at /display, or nil.
func (s *Store) Display() *Dashboard {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var best *Dashboard
	for _, d := range s.boards {
		if d.Display && d.Public && (best == nil || d.ID < best.ID) {
			best = d
		}
	}
	return best
}

// Create stores a new dashboard. An empty id is made from the title;
// a taken id is ErrExists unless rename, which then picks id-2, id-3, ...
func (s *Store) Create(d *Dashboard, rename bool) (*Dashboard, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *d
	if c.ID == "" {
		c.ID, rename = docstore.Slug(c.Title, "dashboard"), true
		if !ValidID(c.ID) {
			c.ID = "dashboard-" + c.ID
		}
	}
	if _, taken := s.boards[c.ID]; taken {
		if !rename {
			return nil, ErrExists
		}
		base := c.ID
		for i := 2; ; i++ {
			c.ID = fmt.Sprintf("%s-%d", trimTo(base, 60), i)
			if _, taken := s.boards[c.ID]; !taken {
				break
			}
		}
	}
	c.Version = 0
	c.Token = ""
	return s.save(&c)
}

// Put replaces dashboard id with d, which must name the version it
// replaces (ErrConflict otherwise: someone saved in between).
func (s *Store) Put(id string, d *Dashboard) (*Dashboard, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	if d.ID != "" && d.ID != id {
		return nil, fmt.Errorf("id %q in the body differs from %q in the path", d.ID, id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.boards[id]
	if !ok {
		return nil, ErrNotFound
	}
	if d.Version != old.Version {
		return nil, fmt.Errorf("%w: version %d is saved, the edit started from %d", ErrConflict, old.Version, d.Version)
	}
	c := *d
	c.ID, c.Token = id, old.Token
	return s.save(&c)
}

// Delete removes dashboard id.
func (s *Store) Delete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.boards[id]
	if !ok {
		return ErrNotFound
	}
	if err := os.Remove(s.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove dashboard: %w: %w", ErrStorage, err)
	}
	delete(s.boards, id)
	delete(s.tokens, d.Token)
	s.changed()
	return nil
}

// save writes c (the caller holds mu) with the next version, a token when
// public (kept across saves, dropped when made private), and publishes it.
func (s *Store) save(c *Dashboard) (*Dashboard, error) {
	c.Schema = Schema
	c.Version++
	c.Updated = s.now().UnixMilli()
	if c.Widgets == nil {
		c.Widgets = []Widget{}
	}
	if !c.Public {
		c.Token, c.Display = "", false
	} else if c.Token == "" {
		c.Token = newToken()
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode dashboard: %w", err)
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("dashboard is %d bytes, at most %d", len(b), MaxBytes)
	}
	if err := atomicfile.Write(s.path(c.ID), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write dashboard: %w: %w", ErrStorage, err)
	}
	if old, ok := s.boards[c.ID]; ok && old.Token != c.Token {
		delete(s.tokens, old.Token)
	}
	s.boards[c.ID] = c
	if c.Token != "" {
		s.tokens[c.Token] = c.ID
	}
	s.changed()
	return c, nil
}

func (s *Store) path(id string) string { return filepath.Join(s.dir, id+".json") }

// newToken returns 128 random bits, URL-safe.
func newToken() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func trimTo(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
