// Package users is people's accounts, roles, sign-in and sessions: the
// accounts file in the data directory, Argon2id passwords, sessions kept in
// memory, login throttling and the HTTP handlers of sign-in, first set-up
// and the users admin page. The permission check itself is api.Auth's.
package users

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/pith-historian/pith/internal/atomicfile"
	"github.com/pith-historian/pith/internal/crc32c"
)

// The accounts file (docs/format/users.md): indented JSON, then a line with
// the CRC-32C of the JSON bytes as 8 hex digits. It is replaced atomically
// (atomicfile) under an advisory lock (users/LOCK) that `pith user` and the
// running server both take, so neither undoes the other's change.
const (
	// Dir is the accounts' folder in the data directory.
	Dir      = "users"
	fileName = "accounts.json"
	lockName = "LOCK"
	// FileFormat is the version of the accounts file.
	FileFormat = 1
)

// Account is one person.
type Account struct {
	Name     string `json:"name"`
	Role     Role   `json:"role"`
	Hash     string `json:"hash"` // Argon2id PHC string
	Disabled bool   `json:"disabled,omitempty"`
	Created  int64  `json:"created"` // Unix ms
	Changed  int64  `json:"changed"` // Unix ms of the last change
}

type file struct {
	Format   int       `json:"format"`
	Accounts []Account `json:"accounts"`
}

// ErrNotFound says no account has the name.
var ErrNotFound = errors.New("no such account")

// ErrExists says an account has the name already.
var ErrExists = errors.New("account exists")

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// CheckName refuses an account name that is empty, too long or holds
// characters other than letters, digits and . _ @ -.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("account name %q: want 1 to 64 letters, digits, '.', '_', '@' or '-', starting with a letter or digit", name)
	}
	return nil
}

// Accounts is the accounts file of one data directory. Its methods take
// the file lock, read the file, change it and write it back: they are
// safe for concurrent use by goroutines and by processes.
type Accounts struct {
	dir string // the users folder
}

// OpenAccounts returns the accounts of the data directory dataDir,
// creating the users folder.
func OpenAccounts(dataDir string) (*Accounts, error) {
	dir := filepath.Join(dataDir, Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open accounts: %w", err)
	}
	return &Accounts{dir: dir}, nil
}

// Path returns the accounts file's path.
func (a *Accounts) Path() string { return filepath.Join(a.dir, fileName) }

// List returns every account, sorted by name.
func (a *Accounts) List() ([]Account, error) {
	var out []Account
	err := a.locked(false, func(f *file) error {
		out = slices.Clone(f.Accounts)
		return nil
	})
	return out, err
}

// Get returns the account named name.
func (a *Accounts) Get(name string) (Account, error) {
	var out Account
	err := a.locked(false, func(f *file) error {
		i := f.find(name)
		if i < 0 {
			return fmt.Errorf("account %q: %w", name, ErrNotFound)
		}
		out = f.Accounts[i]
		return nil
	})
	return out, err
}

// Add creates an account. firstOnly makes it fail when any account exists
// (the one-time set-up of the first admin).
func (a *Accounts) Add(name string, role Role, password string, firstOnly bool) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if _, err := ParseRole(string(role)); err != nil {
		return err
	}
	if err := CheckPassword(password); err != nil {
		return err
	}
	hash := HashPassword(password) // outside the lock: it takes a while
	return a.locked(true, func(f *file) error {
		if firstOnly && len(f.Accounts) > 0 {
			return fmt.Errorf("set up: %w already (the set-up link works once)", ErrExists)
		}
		if f.find(name) >= 0 {
			return fmt.Errorf("account %q: %w", name, ErrExists)
		}
		if len(f.Accounts) == 0 && role != RoleAdmin {
			return fmt.Errorf("account %q: the first account must be an admin, who can then add the others", name)
		}
		now := time.Now().UnixMilli()
		f.Accounts = append(f.Accounts, Account{Name: name, Role: role, Hash: hash, Created: now, Changed: now})
		slices.SortFunc(f.Accounts, func(x, y Account) int { return cmpString(x.Name, y.Name) })
		return nil
	})
}

// Change is a change to one account; nil fields stay.
type Change struct {
	Role     *Role
	Password *string
	Disabled *bool
}

// Update applies c to the account named name. It refuses to leave no
// enabled admin, so that nobody is locked out of the users page.
func (a *Accounts) Update(name string, c Change) (Account, error) {
	var hash string
	if c.Password != nil {
		if err := CheckPassword(*c.Password); err != nil {
			return Account{}, err
		}
		hash = HashPassword(*c.Password)
	}
	if c.Role != nil {
		if _, err := ParseRole(string(*c.Role)); err != nil {
			return Account{}, err
		}
	}
	var out Account
	err := a.locked(true, func(f *file) error {
		i := f.find(name)
		if i < 0 {
			return fmt.Errorf("account %q: %w", name, ErrNotFound)
		}
		acc := &f.Accounts[i]
		if c.Role != nil {
			acc.Role = *c.Role
		}
		if c.Disabled != nil {
			acc.Disabled = *c.Disabled
		}
		if hash != "" {
			acc.Hash = hash
		}
		acc.Changed = time.Now().UnixMilli()
		if !f.hasAdmin() {
			return fmt.Errorf("account %q: the last enabled admin cannot lose the role or be disabled", name)
		}
		out = *acc
		return nil
	})
	return out, err
}

func (f *file) find(name string) int {
	for i := range f.Accounts {
		if f.Accounts[i].Name == name {
			return i
		}
	}
	return -1
}

func (f *file) hasAdmin() bool {
	for _, a := range f.Accounts {
		if a.Role == RoleAdmin && !a.Disabled {
			return true
		}
	}
	return false
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// locked runs fn on the file's contents under the lock (exclusive when
// write), and writes them back when write and fn succeeded.
func (a *Accounts) locked(write bool, fn func(*file) error) error {
	lf, err := os.OpenFile(filepath.Join(a.dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("lock accounts: %w", err)
	}
	defer lf.Close()
	how := syscall.LOCK_SH
	if write {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(lf.Fd()), how); err != nil {
		return fmt.Errorf("lock accounts: %w", err)
	}
	f, err := readFile(a.Path())
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		return err
	}
	if !write {
		return nil
	}
	return atomicfile.Write(a.Path(), encodeFile(f), 0o600)
}

func encodeFile(f *file) []byte {
	f.Format = FileFormat
	if f.Accounts == nil {
		f.Accounts = []Account{}
	}
	js, _ := json.MarshalIndent(f, "", "  ") // plain types: cannot fail
	js = append(js, '\n')
	return fmt.Appendf(js, "%08x\n", crc32c.Checksum(js))
}

// readFile reads and checks the accounts file; a missing file is no
// accounts.
func readFile(path string) (*file, error) {
	buf, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &file{Format: FileFormat}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read accounts: %w", err)
	}
	return decodeFile(buf, path)
}

func decodeFile(buf []byte, path string) (*file, error) {
	body := bytes.TrimSuffix(buf, []byte("\n"))
	i := bytes.LastIndexByte(body, '\n')
	if i < 0 {
		return nil, fmt.Errorf("read accounts %s: no checksum line", path)
	}
	js, sum := body[:i+1], body[i+1:]
	want, err := strconv.ParseUint(string(sum), 16, 32)
	if err != nil || len(sum) != 8 {
		return nil, fmt.Errorf("read accounts %s: bad checksum line", path)
	}
	if got := crc32c.Checksum(js); got != uint32(want) {
		return nil, fmt.Errorf("read accounts %s: checksum %08x, want %08x: the file is corrupt (restore it from a backup)", path, got, want)
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("read accounts %s: %w", path, err)
	}
	if f.Format != FileFormat {
		return nil, fmt.Errorf("read accounts %s: format %d, this Pith reads %d", path, f.Format, FileFormat)
	}
	return &f, nil
}
