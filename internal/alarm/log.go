package alarm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// Event is one alarm transition, a line of the alarm log and the body of
// every notification.
type Event struct {
	Seq      uint64   `json:"seq"`             // increasing over the log's life
	T        int64    `json:"t"`               // Unix milliseconds
	Alarm    string   `json:"alarm"`           // the alarm's name (its id)
	Event    string   `json:"event"`           // raised, cleared or acknowledged
	State    string   `json:"state"`           // the state after the transition
	Kind     string   `json:"type"`            // hi, hihi, lo, lolo, state, stale, comm, external
	Tag      string   `json:"tag,omitempty"`   // the watched tag
	Severity string   `json:"severity"`        // info, warning, major, critical
	Message  string   `json:"message"`         // for people
	Value    *float64 `json:"value,omitempty"` // the tag's value at the transition, when known
	Who      string   `json:"who,omitempty"`   // who acknowledged
	// Raised is the Unix ms of the raise this transition belongs to
	// (the raise itself, the clear or acknowledgement of that raise).
	Raised int64 `json:"raised,omitempty"`
	// Via names the other box of a redundant pair when this transition
	// was judged there and applied here (see Engine.Apply).
	Via string `json:"via,omitempty"`
}

// Event names.
const (
	EventRaised       = "raised"
	EventCleared      = "cleared"
	EventAcknowledged = "acknowledged"
)

// maxLineBytes bounds one log line; longer lines are skipped as corrupt.
const maxLineBytes = 64 << 10

// Log is the durable alarm history: JSON lines appended to alarms.log and
// fsynced before Append returns, rotated once to alarms.log.1 past a size.
// A torn last line (power cut in the middle of a write) is skipped when
// read. Its methods are safe for concurrent use.
type Log struct {
	dir      string
	maxBytes int64

	mu   sync.Mutex
	f    *os.File
	size int64
}

const (
	logName    = "alarms.log"
	oldLogName = "alarms.log.1"
)

// OpenLog opens (creating) the alarm log in dir.
func OpenLog(dir string, maxBytes int64) (*Log, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create alarm log dir: %w", err)
	}
	l := &Log{dir: dir, maxBytes: maxBytes}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Log) open() error {
	f, err := os.OpenFile(filepath.Join(l.dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open alarm log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat alarm log: %w", err)
	}
	l.f, l.size = f, st.Size()
	if err := l.endLine(); err != nil {
		f.Close()
		l.f = nil
		return err
	}
	return syncDir(l.dir)
}

// endLine ends a torn last line (a power cut in the middle of an append)
// with a newline, so that the next event starts a line of its own and only
// the torn one is skipped when read.
func (l *Log) endLine() error {
	if l.size == 0 {
		return nil
	}
	r, err := os.Open(l.f.Name())
	if err != nil {
		return fmt.Errorf("open alarm log: %w", err)
	}
	defer r.Close()
	last := make([]byte, 1)
	if _, err := r.ReadAt(last, l.size-1); err != nil {
		return fmt.Errorf("read alarm log: %w", err)
	}
	if last[0] == '\n' {
		return nil
	}
	n, err := l.f.Write([]byte{'\n'})
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("end torn alarm log line: %w", err)
	}
	return l.f.Sync()
}

// Append writes the events as lines and fsyncs them.
func (l *Log) Append(evs ...Event) error {
	var buf bytes.Buffer
	for i := range evs {
		b, err := json.Marshal(&evs[i])
		if err != nil {
			return fmt.Errorf("encode alarm event: %w", err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("append alarm event: log closed")
	}
	if l.maxBytes > 0 && l.size > 0 && l.size+int64(buf.Len()) > l.maxBytes {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	n, err := l.f.Write(buf.Bytes())
	l.size += int64(n)
	if err != nil {
		return fmt.Errorf("append alarm event: %w", err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("sync alarm log: %w", err)
	}
	return nil
}

// rotate moves the current file to alarms.log.1; l.mu is held.
func (l *Log) rotate() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("close alarm log: %w", err)
	}
	l.f = nil
	if err := os.Rename(filepath.Join(l.dir, logName), filepath.Join(l.dir, oldLogName)); err != nil {
		return fmt.Errorf("rotate alarm log: %w", err)
	}
	return l.open()
}

// Close closes the log.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Read calls fn for every event of the log, oldest first, whose time is
// in [from, to). Lines that do not parse are skipped and counted.
func (l *Log) Read(from, to int64, fn func(Event)) (skipped int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, name := range []string{oldLogName, logName} {
		f, err := os.Open(filepath.Join(l.dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return skipped, fmt.Errorf("read alarm log: %w", err)
		}
		n, err := readEvents(f, func(ev Event) {
			if ev.T >= from && ev.T < to {
				fn(ev)
			}
		})
		f.Close()
		skipped += n
		if err != nil {
			return skipped, fmt.Errorf("read alarm log %s: %w", name, err)
		}
	}
	return skipped, nil
}

// readEvents parses JSON lines from r, skipping (and counting) the ones
// that are not events.
func readEvents(r io.Reader, fn func(Event)) (skipped int, err error) {
	br := bufio.NewReaderSize(r, maxLineBytes)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// An oversized line: skip to its end.
			skipped++
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err == io.EOF {
				return skipped, nil
			}
			if err != nil {
				return skipped, err
			}
			continue
		}
		if len(bytes.TrimSpace(line)) > 0 {
			if ev, ok := ParseEvent(line); ok {
				fn(ev)
			} else {
				skipped++
			}
		}
		if err == io.EOF {
			return skipped, nil
		}
		if err != nil {
			return skipped, err
		}
	}
}

// ParseEvent decodes one log line; ok is false for anything that is not a
// complete event.
func ParseEvent(line []byte) (Event, bool) {
	var ev Event
	if err := json.Unmarshal(line, &ev); err != nil {
		return Event{}, false
	}
	if ev.Alarm == "" || ev.Event == "" {
		return Event{}, false
	}
	if _, ok := parseState(ev.State); !ok {
		return Event{}, false
	}
	return ev, true
}

// syncDir fsyncs a directory so that a created or renamed file survives a
// power cut.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}
