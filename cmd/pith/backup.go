package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/store"
)

// backupPath is the admin endpoint `pith backup` calls on a running Pith.
const backupPath = "/api/v1/admin/backup"

// backupRequest is the body of POST /api/v1/admin/backup.
type backupRequest struct {
	Dest string `json:"dest"` // absolute path of the destination directory on the server
}

// parseArgs parses flags that may come before or after the positional
// arguments, and wants exactly the positional arguments names (printing
// the usage and "want A and B" otherwise).
func parseArgs(fs *flag.FlagSet, args []string, names ...string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, flagErr(err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos, args = append(pos, args[0]), args[1:]
	}
	if len(pos) != len(names) {
		fs.Usage()
		return nil, errors.New("want " + strings.Join(names, " and "))
	}
	return pos, nil
}

func runBackup(args []string) error {
	fs := flag.NewFlagSet("backup", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "config file (TOML): gives the data directory and listen address")
	data := fs.String("data", "", "data directory (overrides store.dir)")
	url := fs.String("url", "", "base URL of the running Pith; when set, always back up through it")
	var srv serverFlags
	srv.register(fs, "admin")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith backup [--config FILE] [--data DIR] [--url URL] [--key KEY] DEST\n\n"+
			"Writes a consistent snapshot of the store into the directory DEST. When no process\n"+
			"holds the data directory, it is backed up directly; when a Pith runs on it, the\n"+
			"running Pith is asked to do it (POST %s, admin scope) at --url, by default\n"+
			"the config's http.listen. A second backup into the same DEST writes only what\n"+
			"changed. See docs/backup.md.\n\n", backupPath)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args, "DEST")
	if err != nil {
		return err
	}
	dest, err := filepath.Abs(pos[0])
	if err != nil {
		return fmt.Errorf("resolve DEST: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	base := *url
	if base == "" {
		cfg, err := config.LoadFor(*cfgPath, *data, "")
		if err != nil {
			return err
		}
		st, err := store.BackupDir(ctx, cfg.Store.Dir, dest)
		if err == nil {
			printBackupStats(os.Stdout, cfg.Store.Dir, dest, st)
			return nil
		}
		if !errors.Is(err, store.ErrLocked) {
			return trimVerb(err, "backup")
		}
		base = serverURL(cfg.HTTP)
		fmt.Fprintf(os.Stderr, "pith backup: %s is in use; asking the running Pith at %s\n", cfg.Store.Dir, base)
	}
	st, err := srv.client().backup(ctx, strings.TrimRight(base, "/")+backupPath, dest)
	if err != nil {
		return err
	}
	printBackupStats(os.Stdout, base, dest, st)
	return nil
}

// serverURL is the URL of the local server the config describes.
func serverURL(c config.HTTP) string {
	scheme := "http"
	if c.TLS == "auto" || c.TLSCert != "" {
		scheme = "https"
	}
	host, port, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return scheme + "://" + c.Listen
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// remoteBackup asks a running Pith for a backup into dest with key.
func remoteBackup(ctx context.Context, url, key string, insecure bool, dest string) (store.BackupStats, error) {
	return newAPIClient(key, insecure).backup(ctx, url, dest)
}

// backup asks a running Pith for a backup into dest.
func (c *apiClient) backup(ctx context.Context, url, dest string) (store.BackupStats, error) {
	var st store.BackupStats
	resp, err := c.postJSON(ctx, "backup", url, backupRequest{Dest: dest})
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return st, fmt.Errorf("call backup: read answer: %w", err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("call backup: decode answer: %w", err)
	}
	return st, nil
}

func printBackupStats(out io.Writer, from, dest string, st store.BackupStats) {
	fmt.Fprintf(out, "backup of %s into %s: %d files, %s\n", from, dest, st.Files, mib(st.Bytes))
	fmt.Fprintf(out, "  copied %d (%s), hard-linked %d (%s), unchanged %d (%s), stale removed %d\n",
		st.Copied, mib(st.CopiedBytes), st.Linked, mib(st.LinkedBytes), st.Skipped, mib(st.SkippedBytes), st.Removed)
	paused := ""
	if st.LockHeld > 0 {
		paused = fmt.Sprintf("; flushes paused %s", st.LockHeld.Round(time.Microsecond))
	}
	fmt.Fprintf(out, "  WAL captured up to %s%s; took %s\n", st.WALEnd, paused, st.Duration.Round(time.Millisecond))
}

// trimVerb drops the store's "verb: " prefix, which main already prints
// as "pith verb: ".
func trimVerb(err error, verb string) error {
	if msg, ok := strings.CutPrefix(err.Error(), verb+": "); ok {
		return errors.New(msg)
	}
	return err
}

func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

func runRestore(args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	force := fs.Bool("force", false, "replace the store files of a DATA_DIR that has some")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith restore [--force] SRC DATA_DIR\n\n"+
			"Checks every checksum of the backup SRC, refusing a damaged or incomplete one,\n"+
			"then copies it into DATA_DIR, which no Pith may be running on. A DATA_DIR that\n"+
			"already holds a store is refused unless --force; other files in it are kept.\n\n")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args, "SRC", "DATA_DIR")
	if err != nil {
		return err
	}
	st, err := store.Restore(pos[0], pos[1], store.RestoreOptions{Force: *force})
	if err != nil {
		return trimVerb(err, "restore")
	}
	fmt.Printf("restored %s into %s: %d files, %s\n", pos[0], pos[1], st.Files, mib(st.Bytes))
	return nil
}

func runVerify(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: pith verify DIR\n\n"+
			"Checks every checksum of a backup or of a data directory that no Pith is writing,\n"+
			"and prints what is wrong. Exits 1 when anything is damaged or missing.\n\n")
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args, "DIR")
	if err != nil {
		return err
	}
	rep, err := store.Verify(pos[0])
	if err != nil {
		return err
	}
	printVerify(os.Stdout, rep)
	if !rep.OK() {
		return fmt.Errorf("%s: %d problems found", pos[0], len(rep.Problems))
	}
	return nil
}

func printVerify(out io.Writer, rep *store.VerifyReport) {
	kind := "data directory"
	if rep.Backup {
		kind = "backup"
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(out, "DAMAGED  %s\n", p)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(out, "note     %s\n", n)
	}
	state := "OK"
	if !rep.OK() {
		state = fmt.Sprintf("%d problems", len(rep.Problems))
	}
	fmt.Fprintf(out, "%s %s: %d files, %s checked: %s\n", kind, rep.Dir, rep.Files, mib(rep.Bytes), state)
}
