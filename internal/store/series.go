package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/model"

	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// seriesTable maps tag names to dense ids and keeps each tag's newest sample.
// Ids are assigned when a committed write is applied and are persisted in
// the series file before any run file refers to them.
type seriesTable struct {
	// saveMu makes save the one writer of the series file and its copy:
	// bulk transactions save from their own goroutines, flushes under
	// db.flushMu, and both write the same ".tmp" names. Lock order:
	// db.flushMu (when held), then saveMu, then mu.
	saveMu sync.Mutex
	mu     sync.RWMutex
	byName map[string]uint32
	names  []string
	latest []model.Sample
	has    []bool // latest is set
	first  []int64
	labels []model.Labels // each tag's labels (series_labels.go)
	// interned holds one copy of each label name and value, shared by
	// the tags (bounded by maxInterned).
	interned map[string]string
	saved    int // ids below this are in the series file
	// labelsGen counts label changes; savedGen is the count the series
	// file holds.
	labelsGen, savedGen uint64
	// listGen counts the changes of what Tags lists: a tag getting its
	// first sample or losing its last, and label changes.
	listGen uint64
	// isText marks text series (their latest text is in ltext); a series
	// holds numbers or text, never both. nText counts them, so that
	// numeric writes look kinds up only once a text series exists.
	isText []bool
	ltext  []string
	nText  atomic.Int32
}

func newSeriesTable() *seriesTable {
	return &seriesTable{byName: make(map[string]uint32)}
}

// lookup returns the id of name without creating it.
func (s *seriesTable) lookup(name string) (uint32, bool) {
	s.mu.RLock()
	id, ok := s.byName[name]
	s.mu.RUnlock()
	return id, ok
}

// savedID returns the id of a series already in the series file: WAL
// records may refer to those by number.
func (s *seriesTable) savedID(name string) (uint32, bool) {
	s.mu.RLock()
	id, ok := s.byName[name]
	ok = ok && int(id) < s.saved
	s.mu.RUnlock()
	return id, ok
}

// getOrCreateLocked resolves name (bytes, to avoid allocating for known
// names). The caller holds s.mu for writing.
func (s *seriesTable) getOrCreateLocked(name []byte) uint32 {
	if id, ok := s.byName[string(name)]; ok {
		return id
	}
	n := string(name)
	id := uint32(len(s.names))
	s.byName[n] = id
	s.names = append(s.names, n)
	s.latest = append(s.latest, model.Sample{})
	s.has = append(s.has, false)
	s.first = append(s.first, 0)
	s.labels = append(s.labels, nil)
	s.isText = append(s.isText, false)
	s.ltext = append(s.ltext, "")
	return id
}

// markTextLocked makes id a text series; the caller holds s.mu for writing.
func (s *seriesTable) markTextLocked(id uint32) {
	if !s.isText[id] {
		s.isText[id] = true
		s.nText.Add(1)
	}
}

// observeTextLocked records a text sample for Latest and the time range.
func (s *seriesTable) observeTextLocked(id uint32, t int64, x string, q model.Quality) {
	s.markTextLocked(id)
	if !s.has[id] || t >= s.latest[id].T {
		s.ltext[id] = x
	}
	s.observeLocked(id, t, 0, q)
}

// textID reports whether series id holds text.
func (s *seriesTable) textID(id uint32) bool {
	if s.nText.Load() == 0 {
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.isText[id]
}

// kindOf reports whether the tag exists with data and whether it is text.
func (s *seriesTable) kindOf(name string) (exists, text bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	id, ok := s.byName[name]
	if !ok {
		return false, false
	}
	return s.has[id] || s.isText[id], s.isText[id]
}

// observeLocked records a sample for Latest and the tag's time range.
func (s *seriesTable) observeLocked(id uint32, t int64, v float64, q model.Quality) {
	if !s.has[id] {
		s.has[id] = true
		s.listGen++
		s.latest[id] = model.Sample{T: t, V: v, Q: q}
		s.first[id] = t
		return
	}
	if t >= s.latest[id].T {
		s.latest[id] = model.Sample{T: t, V: v, Q: q}
	}
	if t < s.first[id] {
		s.first[id] = t
	}
}

// The series file magics: version 1 holds names only, version 2 each
// name's labels too. A file is written as version 1 while no tag has
// labels, so a store without labels stays readable by older Pith.
const (
	seriesFileMagic   = "PITHSER1"
	seriesFileMagicV2 = "PITHSER2"
)

// save writes the series names atomically when new ones were added. Saves
// are serialised, so a save that read fewer names can never replace the
// file after one that read more: saved only grows with the file on disk.
func (s *seriesTable) save(fs vfs.FS, dir string) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.RLock()
	n, gen := len(s.names), s.labelsGen
	if n == s.saved && gen == s.savedGen {
		s.mu.RUnlock()
		return nil
	}
	// The names are written as they are encoded, through a small buffer:
	// the file of 100,000 tags is 2 MB, and building it whole at every
	// save (each second in which new tags appeared) left five times that
	// in garbage (the slice's growth), which the collector let RSS grow by. Names are never
	// changed once appended, so the slice is read after the lock; labels
	// are replaced in place, so theirs are copied (only when any exist).
	names := s.names[:n:n]
	var labels []model.Labels
	for _, ls := range s.labels[:n] {
		if len(ls) > 0 {
			labels = slices.Clone(s.labels[:n])
			break
		}
	}
	s.mu.RUnlock()
	// Two copies, written one after the other: ids cannot be guessed, so
	// one damaged byte must not make every run unreadable.
	for _, name := range seriesFiles {
		if err := writeFileAtomicFunc(fs, filepath.Join(dir, name), func(w io.Writer) error {
			return writeSeriesFile(w, names, labels)
		}); err != nil {
			return fmt.Errorf("save series: %w", err)
		}
	}
	s.mu.Lock()
	if n > s.saved {
		s.saved = n
	}
	if gen > s.savedGen {
		s.savedGen = gen
	}
	s.mu.Unlock()
	return nil
}

// writeSeriesFile writes the series file of names (and of their labels,
// when labels is not nil: version 2) to w.
func writeSeriesFile(w io.Writer, names []string, labels []model.Labels) error {
	const flushAt = 60 << 10
	buf := make([]byte, 0, flushAt+4<<10)
	sum := crc32c.New()
	flush := func() error {
		sum.Write(buf)
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	if labels != nil {
		buf = append(buf, seriesFileMagicV2...)
	} else {
		buf = append(buf, seriesFileMagic...)
	}
	buf = binary.AppendUvarint(buf, uint64(len(names)))
	for i, name := range names {
		buf = binary.AppendUvarint(buf, uint64(len(name)))
		buf = append(buf, name...)
		if labels != nil {
			buf = appendLabels(buf, labels[i])
		}
		if len(buf) >= flushAt {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	sum.Write(buf)
	_, err := w.Write(binary.LittleEndian.AppendUint32(buf, sum.Sum32()))
	return err
}

// seriesFiles are the series file and its copy.
var seriesFiles = [...]string{"series.dat", "series.copy.dat"}

// loadSeries reads the series file, or its copy when the file is damaged;
// a missing file is an empty table.
func loadSeries(fs vfs.FS, dir string, log interface{ Error(string, ...any) }) (*seriesTable, error) {
	s, err := loadSeriesFile(fs, filepath.Join(dir, seriesFiles[0]))
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		return s, err
	}
	c, cerr := loadSeriesFile(fs, filepath.Join(dir, seriesFiles[1]))
	if cerr != nil || len(c.names) == 0 {
		return nil, err
	}
	log.Error("series file damaged, its copy is used", "err", err)
	return c, nil
}

func loadSeriesFile(fs vfs.FS, path string) (*seriesTable, error) {
	s := newSeriesTable()
	buf, err := readFile(fs, path)
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load series: %w", err)
	}
	if len(buf) < len(seriesFileMagic)+4 {
		return nil, &CorruptionError{File: path, Offset: 0, Err: errors.New("bad magic")}
	}
	var withLabels bool
	switch string(buf[:len(seriesFileMagic)]) {
	case seriesFileMagic:
	case seriesFileMagicV2:
		withLabels = true
	default:
		return nil, &CorruptionError{File: path, Offset: 0, Err: errors.New("bad magic")}
	}
	body := buf[:len(buf)-4]
	if crc32c.Checksum(body) != binary.LittleEndian.Uint32(buf[len(buf)-4:]) {
		return nil, &CorruptionError{File: path, Offset: int64(len(buf) - 4), Err: errors.New("checksum mismatch")}
	}
	b := body[len(seriesFileMagic):]
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, &CorruptionError{File: path, Offset: int64(len(seriesFileMagic)), Err: errShortRecord}
	}
	b = b[k:]
	for i := uint64(0); i < n; i++ {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return nil, &CorruptionError{File: path, Offset: int64(len(body) - len(b)), Err: errShortRecord}
		}
		id := s.getOrCreateLocked(b[k : k+int(l)])
		b = b[k+int(l):]
		if withLabels {
			ls, rest, err := decodeLabels(b)
			if err != nil {
				return nil, &CorruptionError{File: path, Offset: int64(len(body) - len(b)), Err: err}
			}
			s.setLabelsLocked(id, ls)
			b = rest
		}
	}
	s.saved = len(s.names)
	return s, nil
}
