package events

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/nats-io/nats.go"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// Uploader puts a complete sink file into its final place, such as an
// object store. Upload must return nil only once the object is stored
// durably: the collector deletes its local file then.
type Uploader interface {
	Upload(ctx context.Context, key string, r io.Reader, size int64) error
}

// Backlog is what the collector acknowledged that is not in its final
// place yet.
type Backlog struct {
	Events int64 // events not yet in a complete sink file, or (with an Uploader) not yet uploaded
	Files  int   // complete files waiting for upload (0 without an Uploader)
	Bytes  int64 // their size
}

// sinkExts are the extensions of complete sink files, whatever the
// current options: files written before a change of format are uploaded
// too.
var sinkExts = []string{".ndjson.gz", ".ndjson.zst", ".csv.gz", ".csv.zst"}

func isSinkFile(name string) bool {
	for _, e := range sinkExts {
		if strings.HasSuffix(name, e) {
			return true
		}
	}
	return false
}

// pendingFile is a complete sink file waiting for upload.
type pendingFile struct {
	path   string
	size   int64
	events int64
}

// listSinkFiles returns the complete sink files under root (not .tmp),
// oldest first (names sort by day, time and sequence).
func listSinkFiles(fsys vfs.FS, root string) ([]string, error) {
	var out []string
	var walk func(d string) error
	walk = func(d string) error {
		names, err := fsys.ReadDir(d)
		if err != nil {
			return err
		}
		for _, n := range names {
			p := filepath.Join(d, n)
			switch {
			case n == ".tmp":
			case isSinkFile(n):
				out = append(out, p)
			default:
				if err := walk(p); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, fmt.Errorf("list sink files: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// countEvents reads a sink file and counts its events, for files found
// at start (whose count the collector did not see written).
func countEvents(fsys vfs.FS, path string) (int64, error) {
	f, err := vfs.Open(fsys, path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, err
	}
	var r io.Reader = bufio.NewReader(io.NewSectionReader(f, 0, size))
	if strings.HasSuffix(path, ".zst") {
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return 0, err
		}
		defer zr.Close()
		r = zr
	} else {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return 0, err
		}
		r = zr
	}
	var n int64
	if strings.Contains(path, ".csv.") {
		cr := csv.NewReader(r)
		cr.Comma = csvSeparator
		cr.FieldsPerRecord = -1
		cr.ReuseRecord = true
		for {
			_, err := cr.Read()
			if err == io.EOF {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			n++
		}
	}
	buf := make([]byte, 32<<10)
	for {
		k, err := r.Read(buf)
		for _, b := range buf[:k] {
			if b == '\n' {
				n++
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// uploadLoop uploads complete sink files oldest first and deletes each
// after its upload succeeded, retrying failures with exponential backoff.
// At Close (upStop) it makes a last pass bounded by DrainTimeout.
func (c *Collector) uploadLoop() {
	defer close(c.upDone)
	backoff := time.Duration(0)
	for {
		err := c.uploadPending(context.Background())
		if err != nil {
			c.stats.uploadErrors.Add(1)
			backoff = min(max(backoff*2, c.opts.RetryMin), c.opts.RetryMax)
			c.log.Error("upload event files; retrying", "err", err, "in", backoff)
		} else {
			backoff = 0
		}
		var retry <-chan time.Time
		if backoff > 0 {
			retry = time.After(backoff)
		}
		select {
		case <-c.upNotify:
			if retry != nil {
				select {
				case <-retry:
				case <-c.upStop:
				}
			}
		case <-retry:
		case <-c.upStop:
			ctx, cancel := context.WithTimeout(context.Background(), c.opts.DrainTimeout)
			for ctx.Err() == nil {
				if err := c.uploadPending(ctx); err == nil {
					break
				}
				c.stats.uploadErrors.Add(1)
				select {
				case <-ctx.Done():
				case <-time.After(c.opts.RetryMin):
				}
			}
			cancel()
			if b := c.Backlog(); b.Files > 0 {
				c.log.Warn("event files left for upload at the next start", "files", b.Files, "bytes", b.Bytes)
			}
			return
		}
	}
}

// uploadPending lists the complete files, uploads them in order and
// deletes each uploaded one; it stops at the first failure.
func (c *Collector) uploadPending(ctx context.Context) error {
	paths, err := listSinkFiles(c.opts.FS, c.sink.root)
	if err != nil {
		return err
	}
	// Refresh the pending list: files committed since, files found at
	// start (counted once).
	c.upMu.Lock()
	known := map[string]pendingFile{}
	for _, p := range c.pending {
		known[p.path] = p
	}
	c.upMu.Unlock()
	// A file renamed into place but not yet in the cursor may still be
	// removed at the next start (see newFileSink): not yet.
	committed := c.committedSeq.Load()
	paths = slices.DeleteFunc(paths, func(p string) bool {
		seq, ok := fileSeq(p)
		return !ok || seq > committed
	})
	list := make([]pendingFile, 0, len(paths))
	for _, p := range paths {
		pf, ok := known[p]
		if !ok {
			pf = pendingFile{path: p, events: -1}
		}
		if pf.events < 0 {
			if pf.events, err = countEvents(c.opts.FS, p); err != nil {
				c.log.Warn("count events of a sink file", "file", p, "err", err)
				pf.events = 0
			}
		}
		if pf.size == 0 {
			if f, err := vfs.Open(c.opts.FS, p); err == nil {
				pf.size, _ = f.Size()
				f.Close()
			}
		}
		list = append(list, pf)
	}
	c.upMu.Lock()
	for _, p := range c.pending {
		// Committed after the snapshot above: keep it.
		if _, ok := known[p.path]; !ok && !slices.Contains(paths, p.path) {
			list = append(list, p)
		}
	}
	c.pending = list
	c.upMu.Unlock()
	list = slices.Clone(list)
	for len(list) > 0 {
		pf := list[0]
		if err := c.uploadFile(ctx, pf); err != nil {
			return err
		}
		list = list[1:]
		c.upMu.Lock()
		c.pending = slices.DeleteFunc(c.pending, func(p pendingFile) bool { return p.path == pf.path })
		c.upMu.Unlock()
		c.stats.uploaded.Add(1)
	}
	return nil
}

// uploadFile uploads one file under its path relative to the events
// directory (with '/' separators) and deletes it.
func (c *Collector) uploadFile(ctx context.Context, pf pendingFile) error {
	rel, err := filepath.Rel(c.sink.root, pf.path)
	if err != nil {
		return err
	}
	f, err := vfs.Open(c.opts.FS, pf.path)
	if err != nil {
		return fmt.Errorf("open event file: %w", err)
	}
	size, err := f.Size()
	if err == nil {
		err = c.opts.Upload.Upload(ctx, filepath.ToSlash(rel), io.NewSectionReader(f, 0, size), size)
	}
	f.Close()
	if err != nil {
		return fmt.Errorf("upload %s: %w", rel, err)
	}
	// Deleted only after the upload is confirmed; a crash before the
	// removal uploads the file again under the same key.
	if err := c.opts.FS.Remove(pf.path); err != nil {
		return fmt.Errorf("remove uploaded event file: %w", err)
	}
	if err := c.opts.FS.SyncDir(filepath.Dir(pf.path)); err != nil {
		c.log.Warn("sync event dir", "err", err)
	}
	return nil
}

// addPending records a file just committed (called by the sink loop).
func (c *Collector) addPending(path string, events int) {
	if c.opts.Upload == nil || path == "" {
		return
	}
	var size int64
	if f, err := vfs.Open(c.opts.FS, path); err == nil {
		size, _ = f.Size()
		f.Close()
	}
	c.upMu.Lock()
	c.pending = append(c.pending, pendingFile{path: path, size: size, events: int64(events)})
	c.upMu.Unlock()
	select {
	case c.upNotify <- struct{}{}:
	default:
	}
}

// Backlog returns what is acknowledged but not in its final place yet.
func (c *Collector) Backlog() Backlog {
	b := Backlog{Events: c.backlogEvents.Load()}
	c.upMu.Lock()
	for _, p := range c.pending {
		b.Files++
		b.Bytes += p.size
		b.Events += max(p.events, 0)
	}
	c.upMu.Unlock()
	return b
}

// NATSObjects uploads sink files to a NATS JetStream object store bucket
// (created, with file storage, when missing), each under its key.
type NATSObjects struct {
	nc     *nats.Conn
	bucket string

	mu  sync.Mutex
	obs nats.ObjectStore // nil until the bucket is found or created
}

// NewNATSObjects connects to url (retrying in the background while the
// server is away) for uploads into bucket.
func NewNATSObjects(url, bucket string) (*NATSObjects, error) {
	nc, err := nats.Connect(url, nats.Name("pith events"), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", url, err)
	}
	return &NATSObjects{nc: nc, bucket: bucket}, nil
}

// store returns the bucket, looking it up (or creating it) the first time.
func (n *NATSObjects) store() (nats.ObjectStore, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.obs != nil {
		return n.obs, nil
	}
	js, err := n.nc.JetStream()
	if err != nil {
		return nil, err
	}
	obs, err := js.ObjectStore(n.bucket)
	if errors.Is(err, nats.ErrStreamNotFound) {
		obs, err = js.CreateObjectStore(&nats.ObjectStoreConfig{Bucket: n.bucket, Storage: nats.FileStorage,
			Description: "Pith event files"})
	}
	if err != nil {
		return nil, fmt.Errorf("nats object store %s: %w", n.bucket, err)
	}
	n.obs = obs
	return obs, nil
}

// Upload puts r under key; the object store acknowledges every chunk
// before Put returns.
func (n *NATSObjects) Upload(ctx context.Context, key string, r io.Reader, size int64) error {
	obs, err := n.store()
	if err != nil {
		return err
	}
	info, err := obs.Put(&nats.ObjectMeta{Name: key}, r, nats.Context(ctx))
	if err != nil {
		return err
	}
	if int64(info.Size) != size {
		return fmt.Errorf("nats object %s: stored %d bytes of %d", key, info.Size, size)
	}
	return nil
}

// Close closes the connection.
func (n *NATSObjects) Close() { n.nc.Close() }
