// Package docstore keeps small versioned JSON documents in one folder of
// the data directory: one atomic file per document, named by its id, all
// held in memory, every save bumping the version and refused when the
// editor started from an older one. Process pictures are kept with it;
// the folder is backed up with the store (internal/store sideDirs).
package docstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/pith-historian/pith/internal/atomicfile"
)

// Errors the store returns; handlers map them to HTTP statuses.
var (
	ErrNotFound = errors.New("no such document")
	ErrExists   = errors.New("a document with this id exists")
	ErrConflict = errors.New("saved meanwhile by someone else")
	ErrStorage  = errors.New("storage")
)

var idRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidID reports whether id may name a document (and its file).
func ValidID(id string) bool { return idRE.MatchString(id) }

// CheckText refuses a document's text field s longer than max bytes or
// holding a control character other than a newline or a tab.
func CheckText(field, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s: %d bytes, at most %d", field, len(s), max)
	}
	for _, r := range s {
		if r != '\n' && r != '\t' && unicode.IsControl(r) {
			return fmt.Errorf("%s: holds control character %q", field, r)
		}
	}
	return nil
}

// Decode reads one document of kind strictly: unknown fields and data
// after the document are errors naming them, and so is a document over
// maxBytes.
func Decode[T any](b []byte, kind string, maxBytes int) (*T, error) {
	if len(b) > maxBytes {
		return nil, fmt.Errorf("%s is %d bytes, at most %d", kind, len(b), maxBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var d T
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("decode %s: %w", kind, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("decode %s: data after the document", kind)
	}
	return &d, nil
}

// Meta are the fields the store manages in every document.
type Meta struct {
	ID      *string
	Version *int64 // bumped by every save; a Put names the version it replaces
	Updated *int64 // Unix ms of the last save
}

// Options describe one kind of document.
type Options[T any] struct {
	Dir      string                   // the folder, created when missing
	Kind     string                   // "picture": names the documents in errors
	MaxBytes int                      // the largest encoded document
	Decode   func([]byte) (*T, error) // strict decoding of a file
	Check    func(*T) error           // validation before every save and after every load
	Meta     func(*T) Meta            // the managed fields of a document
	Title    func(*T) string          // sorts List and makes ids
	ValidID  func(string) bool        // narrows ValidID (reserved names); nil: ValidID
}

// Store holds the documents of one folder. It is safe for concurrent use;
// every change is written to its file (atomically: a crash leaves the old
// or the new document) before it is visible.
type Store[T any] struct {
	o   Options[T]
	now func() time.Time

	mu       sync.RWMutex
	docs     map[string]*T
	onChange func() // called after every save and delete, under mu: must not block
}

// Open loads every document of o.Dir. A file that does not decode or
// check is an error naming it: nothing is dropped silently.
func Open[T any](o Options[T]) (*Store[T], error) {
	s := &Store[T]{o: o, now: time.Now, docs: map[string]*T{}}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %ss folder: %w", o.Kind, err)
	}
	ents, err := os.ReadDir(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("read %ss folder: %w", o.Kind, err)
	}
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			continue // atomic writes' temporary files, anything else
		}
		b, err := os.ReadFile(filepath.Join(o.Dir, name))
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", o.Kind, err)
		}
		d, err := o.Decode(b)
		if err == nil {
			err = o.Check(d)
		}
		if err == nil && *o.Meta(d).ID+".json" != name {
			err = fmt.Errorf("id %q does not match the file name", *o.Meta(d).ID)
		}
		if err != nil {
			return nil, fmt.Errorf("%s file %s: %w", o.Kind, filepath.Join(o.Dir, name), err)
		}
		s.docs[*o.Meta(d).ID] = d
	}
	return s, nil
}

// OnChange sets f to be called after every save and delete (with the
// store locked: f must return at once, e.g. by signalling a channel).
// Forwarding to a central Pith wakes up with it.
func (s *Store[T]) OnChange(f func()) {
	s.mu.Lock()
	s.onChange = f
	s.mu.Unlock()
}

func (s *Store[T]) changed() {
	if s.onChange != nil {
		s.onChange()
	}
}

// SetClock replaces the clock stamping Updated (tests).
func (s *Store[T]) SetClock(now func() time.Time) { s.now = now }

// List returns every document sorted by title then id. The documents
// must not be modified.
func (s *Store[T]) List() []*T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*T, 0, len(s.docs))
	for _, d := range s.docs {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b *T) int {
		if c := strings.Compare(strings.ToLower(s.o.Title(a)), strings.ToLower(s.o.Title(b))); c != 0 {
			return c
		}
		return strings.Compare(*s.o.Meta(a).ID, *s.o.Meta(b).ID)
	})
	return out
}

// Get returns a document; it must not be modified.
func (s *Store[T]) Get(id string) (*T, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	d, ok := s.docs[id]
	if !ok {
		return nil, fmt.Errorf("%s %q: %w", s.o.Kind, id, ErrNotFound)
	}
	return d, nil
}

// Create stores a copy of d as a new document. An empty id is made from
// the title; a taken id is ErrExists unless rename, which then picks id-2,
// id-3, ...
func (s *Store[T]) Create(d *T, rename bool) (*T, error) {
	if err := s.o.Check(d); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := *d
	m := s.o.Meta(&c)
	valid := func(id string) bool { return ValidID(id) && (s.o.ValidID == nil || s.o.ValidID(id)) }
	if *m.ID == "" {
		*m.ID, rename = Slug(s.o.Title(&c), s.o.Kind), true
		if !valid(*m.ID) {
			*m.ID = s.o.Kind + "-" + *m.ID
		}
	}
	if !valid(*m.ID) {
		return nil, fmt.Errorf("id %q: want 1 to 64 of a-z, 0-9, _ and -, starting with a letter or digit", *m.ID)
	}
	if _, taken := s.docs[*m.ID]; taken {
		if !rename {
			return nil, fmt.Errorf("%s %q: %w", s.o.Kind, *m.ID, ErrExists)
		}
		base := *m.ID
		if len(base) > 60 {
			base = base[:60]
		}
		for i := 2; ; i++ {
			*m.ID = fmt.Sprintf("%s-%d", base, i)
			if _, taken := s.docs[*m.ID]; !taken {
				break
			}
		}
	}
	*m.Version = 0
	return s.save(&c)
}

// Put replaces document id with a copy of d, which must name the version
// it replaces (ErrConflict otherwise: someone saved in between).
func (s *Store[T]) Put(id string, d *T) (*T, error) {
	if err := s.o.Check(d); err != nil {
		return nil, err
	}
	c := *d
	m := s.o.Meta(&c)
	if *m.ID != "" && *m.ID != id {
		return nil, fmt.Errorf("id %q in the body differs from %q in the path", *m.ID, id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.docs[id]
	if !ok {
		return nil, fmt.Errorf("%s %q: %w", s.o.Kind, id, ErrNotFound)
	}
	if v := *s.o.Meta(old).Version; *m.Version != v {
		return nil, fmt.Errorf("%w: version %d is saved, the edit started from %d", ErrConflict, v, *m.Version)
	}
	*m.ID = id
	return s.save(&c)
}

// Delete removes document id.
func (s *Store[T]) Delete(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.docs[id]; !ok {
		return fmt.Errorf("%s %q: %w", s.o.Kind, id, ErrNotFound)
	}
	if err := os.Remove(s.path(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w: %w", s.o.Kind, ErrStorage, err)
	}
	delete(s.docs, id)
	s.changed()
	return nil
}

// save writes c (the caller holds mu) with the next version and publishes it.
func (s *Store[T]) save(c *T) (*T, error) {
	m := s.o.Meta(c)
	*m.Version++
	*m.Updated = s.now().UnixMilli()
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", s.o.Kind, err)
	}
	if len(b) > s.o.MaxBytes {
		return nil, fmt.Errorf("%s is %d bytes, at most %d", s.o.Kind, len(b), s.o.MaxBytes)
	}
	if err := atomicfile.Write(s.path(*m.ID), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w: %w", s.o.Kind, ErrStorage, err)
	}
	s.docs[*m.ID] = c
	s.changed()
	return c, nil
}

func (s *Store[T]) path(id string) string { return filepath.Join(s.o.Dir, id+".json") }

// Slug makes an id from a title: lower-case letters and digits, other runs
// as one '-'; kind when nothing is left.
func Slug(title, kind string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(title) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
		} else {
			dash = true
		}
		if b.Len() >= 60 {
			break
		}
	}
	if b.Len() == 0 {
		return kind
	}
	return b.String()
}
