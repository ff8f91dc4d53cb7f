package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
)

// ErrCrashed is returned by every call on a FaultFS after Crash: the
// process that used it is gone.
var ErrCrashed = errors.New("filesystem crashed")

// FaultFS is an in-memory filesystem for power-cut and fault tests.
//
// It keeps two views. The live view is what a running process sees (the
// page cache). The durable view is what a power cut leaves: a file's data
// becomes durable only through File.Sync, and a directory entry (creation,
// rename, removal) only through SyncDir of its directory. Crash returns a
// new FaultFS holding only the durable view. Renaming directories is not
// supported.
//
// Like Linux after a writeback error, a failed Sync forgets the data that
// was dirty at that moment: a later successful Sync does not make it
// durable (the PostgreSQL "fsyncgate" lesson).
//
// All methods are safe for concurrent use.
type FaultFS struct {
	mu      sync.Mutex
	live    map[string]*inode
	durable map[string]*inode
	crashed bool

	syncs     int   // successful file Syncs so far
	failSync  int   // Syncs left before the injected failure; -1 when none
	syncErr   error // the injected Sync error
	failWrite int   // Writes left before the injected failure; -1 when none
	writeErr  error // the injected Write error
	capacity  int64 // total bytes of file data allowed; 0 means unlimited
}

var _ FS = (*FaultFS)(nil)

type inode struct {
	dir    bool
	data   []byte // what readers see
	synced []byte // what a power cut leaves
	lost   []span // ranges dirty at a failed Sync, never made durable
}

type span struct{ from, to int }

// NewFaultFS returns an empty in-memory filesystem.
func NewFaultFS() *FaultFS {
	return &FaultFS{
		live:      map[string]*inode{},
		durable:   map[string]*inode{},
		failSync:  -1,
		failWrite: -1,
	}
}

// FailSync makes the file Sync after the next n successful ones fail with
// err (once; the filesystem keeps working afterwards, which is exactly
// when a careless caller would lose data).
func (f *FaultFS) FailSync(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failSync, f.syncErr = n, err
}

// FailWrite makes the Write or WriteAt after the next n successful ones
// fail with err without writing anything (once).
func (f *FaultFS) FailWrite(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failWrite, f.writeErr = n, err
}

// SetCapacity limits the total size of all files to n bytes; writes that
// would grow past it are cut short and fail with ENOSPC. Zero removes the
// limit.
func (f *FaultFS) SetCapacity(n int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.capacity = n
}

// Syncs returns the number of successful file Syncs.
func (f *FaultFS) Syncs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// CrashOptions says how a power cut treats data that was written but not
// yet synced.
type CrashOptions struct {
	// Rand, when set, keeps a random prefix of each file's unsynced
	// appended tail, as a disk that wrote some pages before the cut.
	// When nil only synced data survives.
	Rand *rand.Rand
	// ZeroTail makes a kept torn prefix read as zeros, as a filesystem
	// that extended the file size before writing its data.
	ZeroTail bool
}

// Crash simulates a power cut: it returns a new filesystem holding only
// what was durable, and makes every later call on f fail with ErrCrashed.
func (f *FaultFS) Crash(opts CrashOptions) *FaultFS {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.crashed = true
	n := NewFaultFS()
	copied := map[*inode]*inode{}
	for name, ino := range f.durable {
		if !f.ancestorsDurable(name) {
			continue
		}
		c, ok := copied[ino]
		if !ok {
			c = &inode{dir: ino.dir}
			c.data = append([]byte(nil), ino.synced...)
			if opts.Rand != nil && !ino.dir {
				c.data = append(c.data, tornTail(ino, opts)...)
			}
			c.synced = append([]byte(nil), c.data...)
			copied[ino] = c
		}
		n.live[name] = c
		n.durable[name] = c
	}
	return n
}

// tornTail returns a random prefix of the file's unsynced appended bytes,
// or nothing when the unsynced change is not a plain append.
func tornTail(ino *inode, opts CrashOptions) []byte {
	s := len(ino.synced)
	if len(ino.data) <= s || string(ino.data[:s]) != string(ino.synced) || len(ino.lost) > 0 {
		return nil
	}
	k := opts.Rand.IntN(len(ino.data) - s + 1)
	tail := append([]byte(nil), ino.data[s:s+k]...)
	if opts.ZeroTail {
		clear(tail)
	}
	return tail
}

func isRoot(name string) bool { return filepath.Dir(name) == name }

// ancestorsDurable reports whether every directory above name is durable.
// The caller holds f.mu.
func (f *FaultFS) ancestorsDurable(name string) bool {
	for d := filepath.Dir(name); !isRoot(d); d = filepath.Dir(d) {
		if ino, ok := f.durable[d]; !ok || !ino.dir {
			return false
		}
	}
	return true
}

// parentOK reports whether name's directory exists in the live view. The
// caller holds f.mu.
func (f *FaultFS) parentOK(name string) bool {
	d := filepath.Dir(name)
	if isRoot(d) {
		return true
	}
	ino, ok := f.live[d]
	return ok && ino.dir
}

func pathErr(op, name string, err error) error {
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// OpenFile opens or creates an in-memory file.
func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	name = filepath.Clean(name)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return nil, pathErr("open", name, ErrCrashed)
	}
	ino, ok := f.live[name]
	switch {
	case ok && ino.dir:
		return nil, pathErr("open", name, syscall.EISDIR)
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, pathErr("open", name, fs.ErrExist)
	case !ok && flag&os.O_CREATE == 0:
		return nil, pathErr("open", name, fs.ErrNotExist)
	case !ok:
		if !f.parentOK(name) {
			return nil, pathErr("open", name, fs.ErrNotExist)
		}
		ino = &inode{}
		f.live[name] = ino
	}
	if flag&os.O_TRUNC != 0 && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		ino.data = ino.data[:0:0]
	}
	return &faultFile{fs: f, ino: ino, name: name, flag: flag}, nil
}

// Remove deletes a file or an empty directory from the live view.
func (f *FaultFS) Remove(name string) error {
	name = filepath.Clean(name)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return pathErr("remove", name, ErrCrashed)
	}
	ino, ok := f.live[name]
	if !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if ino.dir {
		for k := range f.live {
			if filepath.Dir(k) == name {
				return pathErr("remove", name, syscall.ENOTEMPTY)
			}
		}
	}
	delete(f.live, name)
	return nil
}

// Rename moves a file in the live view.
func (f *FaultFS) Rename(oldname, newname string) error {
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return pathErr("rename", oldname, ErrCrashed)
	}
	ino, ok := f.live[oldname]
	if !ok {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	if ino.dir {
		return pathErr("rename", oldname, errors.ErrUnsupported)
	}
	if dst, ok := f.live[newname]; ok && dst.dir {
		return pathErr("rename", newname, syscall.EISDIR)
	}
	if !f.parentOK(newname) {
		return pathErr("rename", newname, fs.ErrNotExist)
	}
	delete(f.live, oldname)
	f.live[newname] = ino
	return nil
}

// ReadDir lists the live entries of dir.
func (f *FaultFS) ReadDir(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return nil, pathErr("readdir", dir, ErrCrashed)
	}
	if ino, ok := f.live[dir]; !isRoot(dir) && (!ok || !ino.dir) {
		return nil, pathErr("readdir", dir, fs.ErrNotExist)
	}
	var names []string
	for k := range f.live {
		if filepath.Dir(k) == dir && k != dir {
			names = append(names, filepath.Base(k))
		}
	}
	sort.Strings(names)
	return names, nil
}

// MkdirAll creates dir and its missing parents in the live view.
func (f *FaultFS) MkdirAll(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return pathErr("mkdir", dir, ErrCrashed)
	}
	var todo []string
	for d := dir; !isRoot(d); d = filepath.Dir(d) {
		if ino, ok := f.live[d]; ok {
			if !ino.dir {
				return pathErr("mkdir", d, syscall.ENOTDIR)
			}
			break
		}
		todo = append(todo, d)
	}
	for _, d := range todo {
		f.live[d] = &inode{dir: true}
	}
	return nil
}

// SyncDir makes the live entries of dir durable.
func (f *FaultFS) SyncDir(dir string) error {
	dir = filepath.Clean(dir)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.crashed {
		return pathErr("syncdir", dir, ErrCrashed)
	}
	if ino, ok := f.live[dir]; !isRoot(dir) && (!ok || !ino.dir) {
		return pathErr("syncdir", dir, fs.ErrNotExist)
	}
	for k := range f.durable {
		if filepath.Dir(k) == dir && k != dir {
			delete(f.durable, k)
		}
	}
	for k, ino := range f.live {
		if filepath.Dir(k) == dir && k != dir {
			f.durable[k] = ino
		}
	}
	return nil
}

// usedBytes sums the size of all live files. The caller holds f.mu.
func (f *FaultFS) usedBytes() int64 {
	var n int64
	for _, ino := range f.live {
		n += int64(len(ino.data))
	}
	return n
}

// faultFile is an open handle on a FaultFS inode.
type faultFile struct {
	fs     *FaultFS
	ino    *inode
	name   string
	flag   int
	off    int64
	closed bool
}

var _ File = (*faultFile)(nil)

// check returns the error every operation on the handle must return first.
// The caller holds fs.mu.
func (h *faultFile) check(op string) error {
	switch {
	case h.fs.crashed:
		return pathErr(op, h.name, ErrCrashed)
	case h.closed:
		return pathErr(op, h.name, fs.ErrClosed)
	}
	return nil
}

func (h *faultFile) Name() string { return h.name }

func (h *faultFile) Read(p []byte) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	n, err := h.readAt(p, h.off)
	h.off += int64(n)
	return n, err
}

func (h *faultFile) ReadAt(p []byte, off int64) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	return h.readAt(p, off)
}

func (h *faultFile) readAt(p []byte, off int64) (int, error) {
	if err := h.check("read"); err != nil {
		return 0, err
	}
	if h.flag&os.O_WRONLY != 0 {
		return 0, pathErr("read", h.name, syscall.EBADF)
	}
	if off < 0 {
		return 0, pathErr("read", h.name, syscall.EINVAL)
	}
	if off >= int64(len(h.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, h.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (h *faultFile) Write(p []byte) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	off := h.off
	if h.flag&os.O_APPEND != 0 {
		off = int64(len(h.ino.data))
	}
	n, err := h.writeAt(p, off)
	h.off = off + int64(n)
	return n, err
}

func (h *faultFile) WriteAt(p []byte, off int64) (int, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	return h.writeAt(p, off)
}

func (h *faultFile) writeAt(p []byte, off int64) (int, error) {
	if err := h.check("write"); err != nil {
		return 0, err
	}
	if h.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return 0, pathErr("write", h.name, syscall.EBADF)
	}
	if off < 0 {
		return 0, pathErr("write", h.name, syscall.EINVAL)
	}
	if h.fs.failWrite == 0 {
		h.fs.failWrite = -1
		return 0, pathErr("write", h.name, h.fs.writeErr)
	}
	if h.fs.failWrite > 0 {
		h.fs.failWrite--
	}
	var err error
	if c := h.fs.capacity; c > 0 {
		grow := off + int64(len(p)) - int64(len(h.ino.data))
		if free := c - h.fs.usedBytes(); grow > free {
			keep := int64(len(p)) - (grow - max(free, 0))
			p = p[:max(keep, 0)]
			err = pathErr("write", h.name, syscall.ENOSPC)
		}
	}
	end := int(off) + len(p)
	if end > len(h.ino.data) {
		h.ino.data = append(h.ino.data, make([]byte, end-len(h.ino.data))...)
	}
	copy(h.ino.data[off:], p)
	return len(p), err
}

func (h *faultFile) Sync() error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.check("sync"); err != nil {
		return err
	}
	ino := h.ino
	if h.fs.failSync == 0 {
		h.fs.failSync = -1
		// Remember the dirty range so that no later Sync persists it.
		first := 0
		for first < len(ino.data) && first < len(ino.synced) && ino.data[first] == ino.synced[first] {
			first++
		}
		if first < len(ino.data) {
			ino.lost = append(ino.lost, span{first, len(ino.data)})
		}
		return pathErr("sync", h.name, h.fs.syncErr)
	}
	if h.fs.failSync > 0 {
		h.fs.failSync--
	}
	old := ino.synced
	synced := append([]byte(nil), ino.data...)
	for _, s := range ino.lost {
		for i := s.from; i < s.to && i < len(synced); i++ {
			if i < len(old) {
				synced[i] = old[i]
			} else {
				synced[i] = 0
			}
		}
	}
	ino.synced = synced
	h.fs.syncs++
	return nil
}

func (h *faultFile) Truncate(size int64) error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.check("truncate"); err != nil {
		return err
	}
	if size < 0 || h.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return pathErr("truncate", h.name, syscall.EINVAL)
	}
	if int(size) <= len(h.ino.data) {
		h.ino.data = h.ino.data[:size:size]
	} else {
		h.ino.data = append(h.ino.data, make([]byte, int(size)-len(h.ino.data))...)
	}
	return nil
}

func (h *faultFile) Size() (int64, error) {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if err := h.check("stat"); err != nil {
		return 0, err
	}
	return int64(len(h.ino.data)), nil
}

func (h *faultFile) Close() error {
	h.fs.mu.Lock()
	defer h.fs.mu.Unlock()
	if h.closed {
		return pathErr("close", h.name, fs.ErrClosed)
	}
	h.closed = true
	return nil
}

// String describes the handle for test failure messages.
func (h *faultFile) String() string { return fmt.Sprintf("faultfile(%s)", h.name) }
