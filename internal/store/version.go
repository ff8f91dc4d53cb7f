package store

import (
	"errors"
	"fmt"
	"sync/atomic"
)

// FormatVersion is the data directory format this code writes and reads:
// the "version" of MANIFEST. Every change to an on-disk format (MANIFEST,
// series.dat, run files, WAL records or segments) raises it; a newer Pith
// keeps reading every older version, and an older Pith refuses a newer
// one with ErrNewerFormat instead of misreading it. The history is in
// docs/format/store.md ("Versions").
const FormatVersion = 7

// formatDeletes is the first version with delete records in the WAL and
// tombstones in MANIFEST. A directory stays at version 1 until its first
// delete, so that a Pith older than deletes still opens it; the first
// delete raises it before its WAL record is written, since an older Pith
// would bring deleted samples back.
const formatDeletes = 2

// formatLabels is the first version with labels: labels records in the WAL
// and the series file's version 2 (PITHSER2). The first SetLabels raises a
// directory to it before its WAL record is written, since an older Pith
// would take the new series file for damage.
const formatLabels = 3

// formatText is the first version with text values: data records with
// text points (kind 3) and run series of text chunks (labels, version 3, included). A directory is
// raised to it by its first text write, before the write's WAL record,
// since an older Pith would skip those records and refuse those runs.
const formatText = 4

// formatPacked is the first version with packed data records (types 'P'
// and 'Q', walpack.go). A directory is raised to it before its first data
// record is written, since an older Pith would skip those records without
// a word (it takes them for records of the followers).
const formatPacked = 5

// formatPacks is the first version whose MANIFEST lists runs in month
// packs ("<pack>@<offset>+<length>", pack.go). A directory is raised to
// it before its first pack is installed, since an older Pith would take
// such an entry for a missing file.
const formatPacks = 6

// formatChained is the first version with chained data records (type
// 'S', walchain.go). A directory is raised to it before its first chained
// record is written, since an older Pith would skip those records without
// a word.
const formatChained = 7

// ErrNewerFormat is wrapped by the error of a data directory or backup
// written by a newer Pith.
var ErrNewerFormat = errors.New("format is newer than this Pith supports")

// NewerFormatError reports data written in a format newer than this code
// reads. It wraps ErrNewerFormat.
type NewerFormatError struct {
	What    string // "data directory" or "backup"
	Version int    // the version found
	Max     int    // the newest version this code reads
}

func (e *NewerFormatError) Error() string {
	return fmt.Sprintf("%s format %d is newer than this Pith supports (%d); upgrade Pith", e.What, e.Version, e.Max)
}

func (e *NewerFormatError) Unwrap() error { return ErrNewerFormat }

// checkFormatVersion accepts a MANIFEST version this code reads.
func checkFormatVersion(v int) error {
	switch {
	case v > FormatVersion:
		return &NewerFormatError{What: "data directory", Version: v, Max: FormatVersion}
	case v < 1:
		return fmt.Errorf("manifest version %d is not valid", v)
	}
	return nil
}

// raiseVersion makes MANIFEST say at least version v before a change that
// older versions would misread is written.
func (db *DB) raiseVersion(v int) error {
	db.flushMu.Lock()
	defer db.flushMu.Unlock()
	if db.version >= v {
		return nil
	}
	old := db.version
	db.version = v
	if err := db.install(nil, nil, nil, 0); err != nil {
		db.version = old
		return fmt.Errorf("raise data directory format to %d: %w", v, err)
	}
	db.log.Info("data directory format raised", "from", old, "to", v)
	return nil
}

// ensureVersion raises the data directory to version v before the first
// write that needs it, once: ready says it is done.
func (db *DB) ensureVersion(ready *atomic.Bool, v int) error {
	if ready.Load() {
		return nil
	}
	if err := db.raiseVersion(v); err != nil {
		return err
	}
	ready.Store(true)
	return nil
}

// ensurePacked raises the data directory to formatPacked before the first
// packed data record is written.
func (db *DB) ensurePacked() error { return db.ensureVersion(&db.packedReady, formatPacked) }

// ensureText raises the data directory to formatText before the first
// text value is written.
func (db *DB) ensureText() error { return db.ensureVersion(&db.textReady, formatText) }

// ensureChained raises the data directory to formatChained before the
// first chained data record is written.
func (db *DB) ensureChained() error { return db.ensureVersion(&db.chainedReady, formatChained) }
