package forward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pith-historian/pith/internal/atomicfile"
)

// Documents are the JSON documents a Pith keeps beside its series
// (dashboards; process pictures and other kinds register the same way).
// They travel on the site's NATS subject, pith.<site>.samples, as messages
// with header Pith-Op: document (docs/format/forward.md, "Documents").
const (
	natsOpDocument     = "document"
	natsDocKindHeader  = "Pith-Doc-Kind"
	natsDocIDHeader    = "Pith-Doc-Id"
	natsDocVerHeader   = "Pith-Doc-Version"
	natsDocTimeHeader  = "Pith-Doc-Updated"
	natsDocDeleted     = "Pith-Doc-Deleted"
	docRetryWait       = 5 * time.Second
	docMaxBytes        = 900 << 10 // under the server's default max_payload of 1 MiB
	docStateFileSuffix = "documents.json"
)

var docNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// ValidDocName reports whether s may be a document's kind or id: 1 to 64
// of a-z, 0-9, _ and -, so that it is a safe file name upstream.
func ValidDocName(s string) bool { return docNameRE.MatchString(s) }

// Doc is one version of a stored document.
type Doc struct {
	Kind    string // "dashboard", "picture", ...: ValidDocName
	ID      string // ValidDocName
	Version int64  // bumped by every save on the site
	Updated int64  // Unix ms of the save (of the delete for a tombstone): orders versions across a delete and re-create
	JSON    []byte // the document; nil when Deleted
	Deleted bool
}

// DocSource lists the documents of one kind. Docs is called from the
// publisher's goroutine while others save documents: it returns a
// consistent copy.
type DocSource interface {
	Docs() []Doc
}

// DocOptions configure a DocPublisher.
type DocOptions struct {
	NATS      NATSOptions // the server, site and stream, as the forwarder's
	StateFile string      // where the versions upstream confirmed are kept
}

// DocPublisher forwards documents upstream: at start, after every change
// and every few seconds while the upstream fails, it publishes each
// document whose version upstream has not confirmed (a deleted one as a
// tombstone), waits for the stream's ack, and keeps the confirmed versions
// in its state file. The message id (Nats-Msg-Id) names the site, kind, id,
// version and time, so a repeat after a crash is dropped by the stream; a
// central Pith keeps the newest version of each document anyway.
type DocPublisher struct {
	sink *NATSSink
	path string
	log  *slog.Logger
	now  func() time.Time
	wake chan struct{}

	mu      sync.Mutex
	sources map[string]DocSource
	sent    map[string]docState // "<kind>/<id>" -> confirmed upstream
}

type docState struct {
	Version int64 `json:"version"`
	Updated int64 `json:"updated"`
}

// NewDocPublisher loads the state; it does not connect yet.
func NewDocPublisher(o DocOptions, log *slog.Logger) (*DocPublisher, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sink, err := NewNATSSink(o.NATS, log)
	if err != nil {
		return nil, err
	}
	p := &DocPublisher{sink: sink, path: o.StateFile, log: log, now: time.Now, wake: make(chan struct{}, 1),
		sources: map[string]DocSource{}, sent: map[string]docState{}}
	b, err := os.ReadFile(o.StateFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read document state: %w", err)
	default:
		if err := json.Unmarshal(b, &p.sent); err != nil {
			return nil, fmt.Errorf("document state %s: %w", o.StateFile, err)
		}
	}
	return p, nil
}

// DocStateFile returns the state file of the documents forwarded by the
// forwarder whose directory is dir.
func DocStateFile(dir string) string { return filepath.Join(dir, docStateFileSuffix) }

// Register adds the documents of kind. Kinds not registered are left
// alone: a tombstone is sent only for a document of a registered kind that
// its source no longer lists.
func (p *DocPublisher) Register(kind string, src DocSource) {
	p.mu.Lock()
	p.sources[kind] = src
	p.mu.Unlock()
	p.Changed()
}

// Changed asks for a publish soon; it never blocks.
func (p *DocPublisher) Changed() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Sync publishes every document upstream has not confirmed, and returns
// the first error (the rest is tried at the next Sync).
func (p *DocPublisher) Sync(ctx context.Context) error {
	p.mu.Lock()
	kinds := make([]string, 0, len(p.sources))
	for k := range p.sources {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	var todo []Doc
	listed := map[string]bool{}
	for _, kind := range kinds {
		for _, d := range p.sources[kind].Docs() {
			d.Kind = kind
			k := kind + "/" + d.ID
			listed[k] = true
			if st, ok := p.sent[k]; !ok || st.Version != d.Version || st.Updated != d.Updated {
				todo = append(todo, d)
			}
		}
	}
	for k, st := range p.sent {
		kind, id, _ := cut(k)
		if _, reg := p.sources[kind]; reg && !listed[k] {
			todo = append(todo, Doc{Kind: kind, ID: id, Version: st.Version, Updated: max(p.now().UnixMilli(), st.Updated+1), Deleted: true})
		}
	}
	p.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	var first error
	done := 0
	for _, d := range todo {
		if err := p.publish(ctx, d); err != nil {
			if errors.Is(err, ErrPermanent) {
				p.log.Error("document refused upstream; not forwarded", "kind", d.Kind, "id", d.ID, "version", d.Version, "err", err)
			} else {
				first = err
				break
			}
		}
		done++
		k := d.Kind + "/" + d.ID
		p.mu.Lock()
		if d.Deleted {
			delete(p.sent, k)
		} else {
			p.sent[k] = docState{d.Version, d.Updated}
		}
		p.mu.Unlock()
	}
	if done > 0 {
		if err := p.save(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func cut(k string) (string, string, bool) {
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			return k[:i], k[i+1:], true
		}
	}
	return k, "", false
}

func (p *DocPublisher) save() error {
	p.mu.Lock()
	b, err := json.MarshalIndent(p.sent, "", "  ")
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p.path), 0o755); err != nil {
		return fmt.Errorf("create document state folder: %w", err)
	}
	if err := atomicfile.Write(p.path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write document state: %w", err)
	}
	return nil
}

// DocMsgID is the Nats-Msg-Id of one version of a document.
func DocMsgID(site string, d Doc) string {
	id := site + "-doc-" + d.Kind + "-" + d.ID + "-" + strconv.FormatInt(d.Version, 10) + "-" + strconv.FormatInt(d.Updated, 10)
	if d.Deleted {
		id += "-deleted"
	}
	return id
}

// docMsg is the message of one document version.
func docMsg(subject string, d Doc) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(natsOpHeader, natsOpDocument)
	m.Header.Set(natsDocKindHeader, d.Kind)
	m.Header.Set(natsDocIDHeader, d.ID)
	m.Header.Set(natsDocVerHeader, strconv.FormatInt(d.Version, 10))
	m.Header.Set(natsDocTimeHeader, strconv.FormatInt(d.Updated, 10))
	if d.Deleted {
		m.Header.Set(natsDocDeleted, "1")
	} else {
		m.Data = d.JSON
	}
	return m
}

// decodeDoc reads a document message.
func decodeDoc(h nats.Header, data []byte) (Doc, error) {
	d := Doc{Kind: h.Get(natsDocKindHeader), ID: h.Get(natsDocIDHeader), Deleted: h.Get(natsDocDeleted) == "1"}
	var err1, err2 error
	d.Version, err1 = strconv.ParseInt(h.Get(natsDocVerHeader), 10, 64)
	d.Updated, err2 = strconv.ParseInt(h.Get(natsDocTimeHeader), 10, 64)
	if !ValidDocName(d.Kind) || !ValidDocName(d.ID) || err1 != nil || err2 != nil {
		return d, fmt.Errorf("read document message: %w: kind %q id %q version %q updated %q", ErrBadBatch,
			d.Kind, d.ID, h.Get(natsDocVerHeader), h.Get(natsDocTimeHeader))
	}
	if !d.Deleted {
		if !json.Valid(data) {
			return d, fmt.Errorf("read document message %s/%s: %w: the body is not JSON", d.Kind, d.ID, ErrBadBatch)
		}
		d.JSON = data
	}
	return d, nil
}

// publish sends d and waits for the stream's ack.
func (p *DocPublisher) publish(ctx context.Context, d Doc) error {
	if len(d.JSON) > docMaxBytes {
		return fmt.Errorf("document %s/%s is %d bytes: %w", d.Kind, d.ID, len(d.JSON), ErrPermanent)
	}
	s := p.sink
	if err := s.connect(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	id := DocMsgID(s.opts.Site, d)
	if _, err := s.js.PublishMsg(ctx, docMsg(s.subject, d), jetstream.WithMsgID(id)); err != nil {
		return s.publishErr(id, err)
	}
	return nil
}

// Run syncs at start, after every change and, while the upstream fails,
// every few seconds, until ctx ends; then it closes the connection.
func (p *DocPublisher) Run(ctx context.Context) {
	defer p.sink.Close()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		if err := p.Sync(ctx); err != nil && ctx.Err() == nil {
			p.log.Warn("forward documents; retrying", "err", err)
			retry.Reset(docRetryWait)
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-retry.C:
		}
	}
}

// DocFunc stores a document published by site; nil means it is durable
// and the message is acknowledged.
type DocFunc func(site string, d Doc) error

// consumeDoc stores the document message m with h and acknowledges it,
// naks it when h fails, or terminates it when it does not decode.
func consumeDoc(ctx context.Context, m jetstream.Msg, h Handlers, log *slog.Logger) {
	site := siteOf(m.Subject())
	d, err := decodeDoc(m.Headers(), m.Data())
	if err != nil {
		terminate(m, err, log)
		return
	}
	if h.Document == nil {
		log.Warn("no document handler; document acknowledged unstored", "site", site, "kind", d.Kind, "id", d.ID)
	} else if err := h.Document(site, d); err != nil {
		log.Warn("sink refused a document; redelivering later", "site", site, "kind", d.Kind, "id", d.ID, "err", err)
		if err := m.NakWithDelay(consumeNakDelay); err != nil {
			log.Warn("nak message", "err", err)
		}
		return
	}
	if err := m.DoubleAck(ctx); err != nil {
		log.Warn("ack message", "err", err) // the newest version wins: a repeat changes nothing
	}
}
