package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// startForwarders opens a disk-backed queue per [[forward.nats]] entry,
// fed with every change of the tag table (acquisition and system tags;
// imports and push inputs go straight to the store and are not
// forwarded yet). The returned stop drains nothing: what is queued is on
// disk and is sent after the next start.
func startForwarders(ctx context.Context, cfg *config.Config, tab *tag.Table, log *slog.Logger) (func(), error) {
	var stops []func()
	stopAll := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, f := range cfg.Forward.NATS {
		no := forward.DefaultNATSOptions()
		no.URL, no.Site = f.URL, cfg.Site.Name
		sink, err := forward.NewNATSSink(no, log.With("forward", f.Name))
		if err != nil {
			stopAll()
			return nil, fmt.Errorf("forward %s: %w", f.Name, err)
		}
		qo := forward.DefaultOptions()
		qo.Site = cfg.Site.Name
		q, err := forward.Open(filepath.Join(cfg.Store.Dir, "forward", f.Name), qo, sink, log.With("forward", f.Name))
		if err != nil {
			sink.Close()
			stopAll()
			return nil, fmt.Errorf("forward %s: %w", f.Name, err)
		}
		sub := tab.Subscribe(tag.SubOptions{Name: "forward:" + f.Name, Mode: tag.Queue})
		fctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func(name string) {
			defer wg.Done()
			var buf []tag.Change
			var pts []store.Point
			for {
				chs, err := sub.Next(fctx, buf[:0])
				if err != nil {
					return
				}
				buf = chs
				pts = pts[:0]
				for _, c := range chs {
					if c.Has {
						pts = append(pts, store.Point{Tag: c.Tag, T: c.T, V: c.V, Q: c.Q})
					}
				}
				if len(pts) > 0 {
					if err := q.Enqueue(fctx, pts); err != nil && fctx.Err() == nil {
						log.Warn("forward queue refused values", "forward", name, "points", len(pts), "err", err)
					}
				}
			}
		}(f.Name)
		stops = append(stops, func() {
			cancel()
			wg.Wait()
			tab.Unsubscribe(sub)
			if err := q.Close(); err != nil {
				log.Warn("close forward queue", "err", err)
			}
			sink.Close()
		})
		log.Info("forwarding to NATS JetStream", "forward", f.Name, "url", f.URL, "subject", sink.Subject())
	}
	return stopAll, nil
}
