package store

import (
	"errors"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pith-historian/pith/internal/store/wal"
)

// ErrDiskFull is wrapped by the error of a write refused because the
// filesystem of the data directory is full (ENOSPC) or its quota is used
// up (EDQUOT). The error wraps the system's error as well, so errors.Is
// with syscall.ENOSPC also holds.
//
// A full disk is not a failure of the store: nothing acknowledged is
// damaged, the refused write left no trace, and writes succeed again as
// soon as space returns, without a restart. Meanwhile the unflushed head
// stays in memory (its WAL is kept) and flushing is retried every second;
// once the head is full as well, writes are refused before they reach the
// WAL so memory stays bounded.
var ErrDiskFull = errors.New("disk full")

type diskFullError struct{ err error }

func (e *diskFullError) Error() string   { return "disk full: " + e.err.Error() }
func (e *diskFullError) Unwrap() []error { return []error{ErrDiskFull, e.err} }

// isNoSpace reports whether err is the filesystem running out of space or
// quota.
func isNoSpace(err error) bool {
	return err != nil && (errors.Is(err, ErrDiskFull) || wal.IsNoSpace(err))
}

// noSpace wraps err with ErrDiskFull when it is an out-of-space error.
func noSpace(err error) error {
	if err == nil || errors.Is(err, ErrDiskFull) || !wal.IsNoSpace(err) {
		return err
	}
	return &diskFullError{err}
}

// diskFullHold is how long the store keeps reporting a full disk after
// the last write that ran out of space: with a few KiB left, small writes
// succeed between refused large ones, and the flag and the log should not
// flap with them.
const diskFullHold = 10 * time.Second

// diskState remembers which kinds of writes last ran out of space.
type diskState struct {
	wal      atomic.Bool  // the last WAL commit ran out of space
	flush    atomic.Bool  // the last flush, bulk commit or delete ran out of space
	errors   atomic.Int64 // operations refused or failed for lack of space
	lastFull atomic.Int64 // Unix nanoseconds of the last such failure
	shown    atomic.Bool  // reported full (DiskFull, the log), held diskFullHold
	hold     time.Duration
}

// noteDisk records the outcome of a write of one kind (flag) and logs
// when the store starts or stops being short of space; it returns err
// wrapped with ErrDiskFull when that is its cause.
func (db *DB) noteDisk(flag *atomic.Bool, what string, err error) error {
	d := &db.nospace
	if err == nil && !d.shown.Load() {
		flag.Store(false) // the common case: one atomic load and store
		return nil
	}
	now := time.Now().UnixNano()
	if isNoSpace(err) {
		d.errors.Add(1)
		d.lastFull.Store(now)
		flag.Store(true)
		if !d.shown.Swap(true) {
			db.log.Error("disk full: "+what+" refused until space returns; data already stored is safe", "dir", db.dir, "err", err)
		}
		return noSpace(err)
	}
	flag.Store(false)
	hold := d.hold
	if hold == 0 {
		hold = diskFullHold
	}
	if d.shown.Load() && !d.wal.Load() && !d.flush.Load() && time.Duration(now-d.lastFull.Load()) >= hold &&
		d.shown.CompareAndSwap(true, false) {
		db.log.Info("disk space available again: writes and flushes resumed", "dir", db.dir)
	}
	return err
}

// DiskFull reports whether writes or flushes ran out of space lately:
// the last WAL commit or flush did, or one did within the last 10 s.
func (db *DB) DiskFull() bool {
	return db.nospace.shown.Load() || db.nospace.wal.Load() || db.nospace.flush.Load()
}

// DiskFullErrors returns how many operations failed for lack of space.
func (db *DB) DiskFullErrors() int64 { return db.nospace.errors.Load() }

// FreeBytes returns the bytes available to Pith on the data directory's
// filesystem, or an error when it cannot tell (a test filesystem).
func (db *DB) FreeBytes() (int64, error) {
	if !isOS(db.fs) {
		return 0, errors.ErrUnsupported
	}
	var st unix.Statfs_t
	if err := unix.Statfs(db.dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// headRoom refuses a commit while flushing fails for lack of space and
// the unflushed heads already hold twice a full head (headLimit): taking more would
// grow memory without bound. Writes resume once a flush succeeds.
func (db *DB) headRoom() error {
	if !db.nospace.flush.Load() {
		return nil
	}
	db.mu.RLock()
	n, count, _ := db.active.fill()
	for _, f := range db.frozen {
		k, _ := f.size()
		n += k
	}
	db.mu.RUnlock()
	if n < 2*db.headLimit(count) {
		return nil
	}
	return &diskFullError{fmt.Errorf("write refused: the in-memory head is full and cannot be flushed: %w", syscall.ENOSPC)}
}

// IsDiskFull reports whether err means the disk is full: ErrDiskFull, or
// ENOSPC or EDQUOT from any layer. HTTP handlers answer it with 507.
func IsDiskFull(err error) bool { return isNoSpace(err) }
