package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/events"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/store/wal"
)

// eventsPart is the event collector of [events]; alarm transitions
// become events too while it runs.
type eventsPart struct {
	cfg    *config.Config
	plant  *plant.Plant
	alarms *alarmEvents
	audit  *auditEvents
	log    *slog.Logger
	col    *events.Collector // once started
}

var _ Part = (*eventsPart)(nil)

func (e *eventsPart) Name() string { return "events" }

func (e *eventsPart) Start(context.Context) error {
	col, err := startEvents(e.cfg, e.plant, e.log)
	if err != nil {
		return err
	}
	e.col = col
	e.alarms.col.Store(col)
	e.audit.col.Store(col)
	return nil
}

func (e *eventsPart) Stop() {
	e.alarms.col.Store(nil)
	e.audit.col.Store(nil)
	e.col.Close()
}

// mount adds the collector's endpoints to mux and returns the handler of
// signed posts (nil without a shared secret), which skip the key check.
func (e *eventsPart) mount(mux *routeMux) (signed http.Handler) {
	evh := e.col.Handler()
	mux.Handle("/api/v1/events", evh)
	mux.Handle("/api/v1/track", evh) // Hamustro's clients
	if e.cfg.Events.Secret != "" {
		return evh
	}
	return nil
}

// signedOr sends event posts that carry a signature to signed, whose
// handler checks it (401 when bad), and everything else to h.
func signedOr(signed, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/events" && r.Header.Get(events.SignatureHeader) != "" ||
			r.URL.Path == "/api/v1/track" && (r.Header.Get(events.HamustroSignatureHeader) != "" || r.Header.Get(events.HamustroTimeHeader) != "") {
			signed.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// startEvents opens the event collector in its own directory; its counts
// per name and minute become tags pith.events.<name>.per_min.
func startEvents(cfg *config.Config, p *plant.Plant, log *slog.Logger) (*events.Collector, error) {
	o := events.DefaultOptions()
	if cfg.Store.Durability == "relaxed" {
		o.Durability = wal.DurabilityRelaxed
	}
	if cfg.Events.Secret != "" {
		o.Secret = []byte(cfg.Events.Secret)
	}
	tab := p.Table()
	o.OnCounts = func(minute time.Time, counts map[string]uint64) {
		pts := make([]model.Point, 0, len(counts))
		for name, n := range counts {
			tag, err := ingest.CleanName("pith.events." + name + ".per_min")
			if err != nil {
				continue
			}
			pts = append(pts, model.Point{Tag: tag, T: minute.UnixMilli(), V: float64(n)})
		}
		if _, err := tab.UpdatePoints(pts, true, "events"); err != nil {
			log.Warn("event counts", "err", err)
		}
	}
	o.Format, o.Compression = cfg.Events.Format, cfg.Events.Compression
	if s3 := cfg.Events.S3; s3.Endpoint != "" {
		up, err := events.NewS3(events.S3Options{Endpoint: s3.Endpoint, Secure: s3.Secure, Region: s3.Region,
			Bucket: s3.Bucket, Prefix: s3.Prefix, AccessKey: s3.AccessKey, SecretKey: s3.SecretKey})
		if err != nil {
			return nil, err
		}
		o.Upload = up
	}
	if n := cfg.Events.NATS; n.URL != "" {
		up, err := events.NewNATSObjects(n.URL, n.Bucket)
		if err != nil {
			return nil, err
		}
		o.Upload = up
	}
	// What is acknowledged but not in its final place yet (a complete
	// file, or the object store).
	o.OnBacklog = func(now time.Time, b events.Backlog) {
		t := now.UnixMilli()
		pts := []model.Point{{Tag: "pith.events.backlog", T: t, V: float64(b.Events)}}
		if o.Upload != nil {
			pts = append(pts, model.Point{Tag: "pith.events.files_pending", T: t, V: float64(b.Files)},
				model.Point{Tag: "pith.events.bytes_pending", T: t, V: float64(b.Bytes)})
		}
		if _, err := tab.UpdatePoints(pts, true, "events"); err != nil {
			log.Warn("event backlog", "err", err)
		}
	}
	ev, err := events.New(filepath.Join(cfg.Store.Dir, "events-collector"), o, log)
	if err != nil {
		return nil, fmt.Errorf("open event collector: %w", err)
	}
	return ev, nil
}
