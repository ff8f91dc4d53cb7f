// Package audit is the audit journal: who did what, from where, and what
// came of it (sign-ins, alarm acknowledgements, control writes, reloads,
// user and key changes, backups, deletes). It is append-only and
// checksummed; see docs/format/audit.md.
package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/crc32c"
)

// Actions recorded. A record's Action is one of these.
const (
	ActionSignIn       = "sign-in"
	ActionSignInFailed = "sign-in-failed"
	ActionSignOut      = "sign-out"
	ActionSetup        = "setup"
	ActionAck          = "alarm-ack"
	ActionControl      = "control"
	ActionOverride     = "rule-override"
	ActionReload       = "reload"
	ActionUser         = "user"
	ActionKeys         = "keys"
	ActionBackup       = "backup"
	ActionDelete       = "delete"
	ActionFreeze       = "freeze"
	ActionSchedule     = "schedule"
	ActionRequest      = "request" // any other state-changing request
	ActionRefused      = "refused" // a state-changing request its key or role may not make
)

// Record is one entry of the journal.
type Record struct {
	Seq    uint64   `json:"seq"`              // order of appending, from 1, per journal
	T      int64    `json:"t"`                // Unix ms
	Who    string   `json:"who"`              // user or key name; "" when credentials are off
	Kind   string   `json:"kind,omitempty"`   // "user" or "key"
	Role   string   `json:"role,omitempty"`   // the user's role or the key's scope
	From   string   `json:"from,omitempty"`   // the client's address
	Action string   `json:"action"`           // one of the Action constants
	Target string   `json:"target,omitempty"` // the tag, alarm, account or path acted on
	Old    *float64 `json:"old,omitempty"`    // a control write's value before
	New    *float64 `json:"new,omitempty"`    // a control write's value asked for
	Result string   `json:"result"`           // "ok", or the refusal or the device's answer
	Detail string   `json:"detail,omitempty"` // anything else worth keeping
}

// Options of a Journal.
type Options struct {
	// Retention is how long records are kept (whole days: a day file goes
	// once its last record is older). 0 keeps them forever.
	Retention time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// Logger logs corrupt records and failed appends.
	Logger *slog.Logger
}

// DefaultRetention keeps a year and a day.
const DefaultRetention = 366 * 24 * time.Hour

// DefaultOptions returns the options of a journal kept for DefaultRetention.
func DefaultOptions() Options { return Options{Retention: DefaultRetention} }

// Journal appends records to day files in a directory. It is safe for
// concurrent use; each Append is on disk (fsynced) when it returns.
type Journal struct {
	dir  string
	opts Options
	log  *slog.Logger

	mu      sync.Mutex // guards the fields below and orders appends
	seq     uint64
	f       *os.File // the open day file, or nil
	day     string   // its day, "2006-01-02" UTC
	sinks   []func(Record)
	corrupt int // corrupt lines found by reads and the tail repair
}

const fileSuffix = ".log"

// Open opens (creating it) the journal in dir: it repairs a torn last line
// left by a crash, finds the last sequence number and removes day files
// past the retention.
func Open(dir string, opts Options) (*Journal, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open audit journal: %w", err)
	}
	j := &Journal{dir: dir, opts: opts, log: opts.Logger}
	days, err := j.days()
	if err != nil {
		return nil, err
	}
	if len(days) > 0 {
		last := days[len(days)-1]
		seq, err := repairTail(j.path(last))
		if err != nil {
			return nil, err
		}
		j.seq = seq
	}
	j.expire()
	return j, nil
}

// Dir returns the journal's directory.
func (j *Journal) Dir() string { return j.dir }

// OnAppend adds fn, called with every record after it is on disk (under
// the journal's lock: fn must not block or append). The agent forwards
// records upstream with it.
func (j *Journal) OnAppend(fn func(Record)) {
	j.mu.Lock()
	j.sinks = append(j.sinks, fn)
	j.mu.Unlock()
}

// Append stamps r with the next sequence number (and the time, when r.T is
// 0) and writes it durably. A record that cannot be written is logged and
// the error returned; the caller's action has happened regardless.
func (j *Journal) Append(r Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r.T == 0 {
		r.T = j.opts.Now().UnixMilli()
	}
	if r.Result == "" {
		r.Result = "ok"
	}
	j.seq++
	r.Seq = j.seq
	line, err := encodeLine(r)
	if err != nil {
		return err
	}
	day := time.UnixMilli(r.T).UTC().Format(time.DateOnly)
	if j.f == nil || day != j.day {
		if j.f != nil {
			j.f.Close()
			j.f = nil
		}
		f, err := os.OpenFile(j.path(day), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			j.log.Error("audit record lost", "action", r.Action, "who", r.Who, "err", err)
			return fmt.Errorf("append audit record: %w", err)
		}
		j.f, j.day = f, day
		j.expire()
	}
	if _, err := j.f.Write(line); err == nil {
		err = j.f.Sync()
	}
	if err != nil {
		j.log.Error("audit record lost", "action", r.Action, "who", r.Who, "err", err)
		return fmt.Errorf("append audit record: %w", err)
	}
	for _, fn := range j.sinks {
		fn(r)
	}
	return nil
}

// Close closes the open day file.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}

// Corrupt returns how many corrupt lines reads have skipped.
func (j *Journal) Corrupt() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.corrupt
}

func (j *Journal) path(day string) string { return filepath.Join(j.dir, day+fileSuffix) }

// days lists the day files, oldest first.
func (j *Journal) days() ([]string, error) {
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, fmt.Errorf("list audit journal: %w", err)
	}
	var out []string
	for _, e := range ents {
		day, ok := strings.CutSuffix(e.Name(), fileSuffix)
		if !ok || e.IsDir() {
			continue
		}
		if _, err := time.Parse(time.DateOnly, day); err != nil {
			continue
		}
		out = append(out, day)
	}
	sort.Strings(out)
	return out, nil
}

// expire removes the day files wholly older than the retention.
func (j *Journal) expire() {
	if j.opts.Retention <= 0 {
		return
	}
	days, err := j.days()
	if err != nil {
		j.log.Warn("audit retention", "err", err)
		return
	}
	cut := j.opts.Now().Add(-j.opts.Retention)
	for _, d := range days {
		t, _ := time.Parse(time.DateOnly, d)
		if t.Add(24*time.Hour).Before(cut) && d != j.day {
			if err := os.Remove(j.path(d)); err != nil {
				j.log.Warn("audit retention", "file", j.path(d), "err", err)
			}
		}
	}
}

// encodeLine is the record's line: 8 hex digits of the CRC-32C of the
// JSON, a space, the JSON, a newline.
func encodeLine(r Record) ([]byte, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode audit record: %w", err)
	}
	line := make([]byte, 0, len(js)+10)
	line = fmt.Appendf(line, "%08x ", crc32c.Checksum(js))
	line = append(line, js...)
	return append(line, '\n'), nil
}

// errCorrupt marks a line whose checksum or JSON is wrong.
var errCorrupt = errors.New("corrupt audit record")

// decodeLine is the inverse of encodeLine (without the newline).
func decodeLine(line []byte) (Record, error) {
	var r Record
	if len(line) < 10 || line[8] != ' ' {
		return r, errCorrupt
	}
	want, err := strconv.ParseUint(string(line[:8]), 16, 32)
	if err != nil {
		return r, errCorrupt
	}
	js := line[9:]
	if crc32c.Checksum(js) != uint32(want) {
		return r, errCorrupt
	}
	if err := json.Unmarshal(js, &r); err != nil {
		return r, errCorrupt
	}
	return r, nil
}

// repairTail cuts a torn last line (no newline, or a bad checksum on the
// last line only: a crash in the middle of an append) off the file at
// path and returns the last good sequence number in it.
func repairTail(path string) (uint64, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("read audit journal: %w", err)
	}
	good := 0 // bytes up to the end of the last good line
	var seq uint64
	for off := 0; off < len(buf); {
		i := bytes.IndexByte(buf[off:], '\n')
		if i < 0 {
			break
		}
		if r, err := decodeLine(buf[off : off+i]); err == nil {
			seq = r.Seq
			good = off + i + 1
		} else if off+i+1 == len(buf) {
			break // a bad last line: torn
		} else {
			good = off + i + 1 // a bad line in the middle stays, for reads to report
		}
		off += i + 1
	}
	if good < len(buf) {
		if err := os.Truncate(path, int64(good)); err != nil {
			return 0, fmt.Errorf("repair audit journal tail: %w", err)
		}
	}
	return seq, nil
}

// scan calls fn with each record of the day file, oldest first; corrupt
// lines are counted and skipped.
func (j *Journal) scan(day string, fn func(Record) bool) error {
	f, err := os.Open(j.path(day))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read audit journal: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than any record Pith writes: corrupt. Skip it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			j.countCorrupt(day)
			continue
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read audit journal: %w", err)
		}
		r, derr := decodeLine(line[:len(line)-1])
		if derr != nil {
			j.countCorrupt(day)
			continue
		}
		if !fn(r) {
			return nil
		}
	}
}

func (j *Journal) countCorrupt(day string) {
	j.mu.Lock()
	j.corrupt++
	j.mu.Unlock()
	j.log.Warn("corrupt audit record skipped", "file", j.path(day))
}
