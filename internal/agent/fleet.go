package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pith-historian/pith/internal/config"
)

// Site directory tuning.
const (
	siteDirTimeout  = 5 * time.Second  // one bucket operation
	siteDirRetry    = 10 * time.Second // wait before publishing a site again after a failure
	siteDirReplicas = 3                // replicas of a created bucket; 1 when the servers are fewer
)

// siteEntry is the value of one key (the site name) of the directory
// bucket: which central Pith holds the site. See docs/fleet.md.
type siteEntry struct {
	Site       string `json:"site"`
	Central    string `json:"central"`       // the holder's site.name
	URL        string `json:"url,omitempty"` // where users reach it ([central] url)
	Partition  int    `json:"partition"`
	Partitions int    `json:"partitions"`
	Since      int64  `json:"since"` // when it first stored a batch of the site, Unix ms
	Local      bool   `json:"local"` // in API answers: held by the answering Pith
}

// siteDirectory publishes the sites a central Pith holds in a JetStream
// key-value bucket, and reads the bucket for the API. Its methods are safe
// for concurrent use. It connects on first use and again after a failure.
type siteDirectory struct {
	c    config.Central
	name string // this central's site.name
	log  *slog.Logger

	mu     sync.Mutex
	nc     *nats.Conn
	kv     jetstream.KeyValue
	closed bool

	held   sync.Map // site -> time.Time of the last attempt (zero once published)
	heldMu sync.Mutex
}

func newSiteDirectory(c config.Central, name string, log *slog.Logger) *siteDirectory {
	return &siteDirectory{c: c, name: name, log: log}
}

// bucket returns the bucket, connecting and creating it when needed.
func (d *siteDirectory) bucket(ctx context.Context) (jetstream.KeyValue, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, errors.New("site directory closed")
	}
	if d.kv != nil && !d.nc.IsClosed() {
		return d.kv, nil
	}
	if d.nc != nil {
		d.nc.Close()
		d.nc, d.kv = nil, nil
	}
	nc, err := nats.Connect(d.c.NATS, nats.Name("pith-directory-"+d.name), nats.Timeout(siteDirTimeout), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("connect to nats %s: %w", d.c.NATS, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open jetstream: %w", err)
	}
	kv, err := js.KeyValue(ctx, d.c.Directory)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: d.c.Directory, Storage: jetstream.FileStorage, Replicas: siteDirReplicas})
		if err != nil {
			// A single server cannot hold three replicas.
			kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: d.c.Directory, Storage: jetstream.FileStorage})
		}
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(ctx, d.c.Directory)
		}
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("open key-value bucket %s: %w", d.c.Directory, err)
	}
	d.nc, d.kv = nc, kv
	return kv, nil
}

// seen records that this central stored a batch of site: the first time
// (and after a failed attempt, at most every siteDirRetry) it publishes
// the site's entry. A failure is logged and never holds up the stream.
func (d *siteDirectory) seen(ctx context.Context, site string) {
	if v, ok := d.held.Load(site); ok && (v.(time.Time).IsZero() || time.Since(v.(time.Time)) < siteDirRetry) {
		return
	}
	d.heldMu.Lock() // one publisher per site at a time
	defer d.heldMu.Unlock()
	if v, ok := d.held.Load(site); ok && (v.(time.Time).IsZero() || time.Since(v.(time.Time)) < siteDirRetry) {
		return
	}
	d.held.Store(site, time.Now())
	ctx, cancel := context.WithTimeout(ctx, siteDirTimeout)
	defer cancel()
	kv, err := d.bucket(ctx)
	if err == nil {
		e := siteEntry{Site: site, Central: d.name, URL: d.c.URL, Partition: d.c.Partition, Partitions: d.c.Partitions, Since: time.Now().UnixMilli()}
		b, _ := json.Marshal(e)
		_, err = kv.Put(ctx, site, b)
	}
	if err != nil {
		d.log.Warn("publish site in the directory; retrying later", "site", site, "bucket", d.c.Directory, "err", err)
		return
	}
	d.held.Store(site, time.Time{})
}

// list returns every entry of the bucket, sorted by site.
func (d *siteDirectory) list(ctx context.Context) ([]siteEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, siteDirTimeout)
	defer cancel()
	kv, err := d.bucket(ctx)
	if err != nil {
		return nil, err
	}
	w, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read bucket %s: %w", d.c.Directory, err)
	}
	defer w.Stop()
	var out []siteEntry
	for {
		select {
		case e := <-w.Updates():
			if e == nil { // every current value delivered
				sort.Slice(out, func(i, j int) bool { return out[i].Site < out[j].Site })
				return out, nil
			}
			var s siteEntry
			if json.Unmarshal(e.Value(), &s) != nil {
				continue
			}
			s.Site = e.Key()
			s.Local = s.Central == d.name && s.Partition == d.c.Partition && s.Partitions == d.c.Partitions
			out = append(out, s)
		case <-ctx.Done():
			return nil, fmt.Errorf("read bucket %s: %w", d.c.Directory, ctx.Err())
		}
	}
}

// close ends the connection; later calls fail.
func (d *siteDirectory) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.nc != nil {
		d.nc.Close()
	}
}

// ServeHTTP answers GET /api/v1/sites (every site with its central) and
// GET /api/v1/sites/<site>: the entry when this Pith holds the site, a
// 307 to the holder's /api/v1/sites/<site> when another central does and
// published its url, 404 when no central holds it. With ?to=/path (a path
// of this origin) it sends the user to that path at the holder instead,
// here when this Pith holds the site: the dashboard's link to a site.
func (d *siteDirectory) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSONError(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	to := r.URL.Query().Get("to")
	if to != "" && !localPath(to) {
		writeJSONError(w, http.StatusBadRequest, "to: want a path starting with a single '/'")
		return
	}
	sites, err := d.list(r.Context())
	if err != nil {
		writeJSONError(w, http.StatusBadGateway, err.Error())
		return
	}
	name, one := strings.CutPrefix(r.URL.Path, "/api/v1/sites/")
	if !one {
		if sites == nil {
			sites = []siteEntry{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"central": d.name, "sites": sites})
		return
	}
	for _, s := range sites {
		if s.Site != name {
			continue
		}
		switch {
		case !s.Local && s.URL != "" && to != "":
			w.Header().Set("Location", strings.TrimRight(s.URL, "/")+to)
		case !s.Local && s.URL != "":
			w.Header().Set("Location", strings.TrimRight(s.URL, "/")+"/api/v1/sites/"+name)
		case s.Local && to != "":
			w.Header().Set("Location", to)
		}
		if w.Header().Get("Location") != "" {
			writeJSON(w, http.StatusTemporaryRedirect, s)
			return
		}
		writeJSON(w, http.StatusOK, s)
		return
	}
	writeJSONError(w, http.StatusNotFound, fmt.Sprintf("no central holds site %q", name))
}

// localPath reports whether to is a path on the same origin, safe to put
// after another central's url or alone in a Location header: one leading
// '/', no scheme or host, no backslash (which browsers read as '/'), no
// control character.
func localPath(to string) bool {
	if !strings.HasPrefix(to, "/") || strings.HasPrefix(to, "//") {
		return false
	}
	for _, r := range to {
		if r == '\\' || r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}
