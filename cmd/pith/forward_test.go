package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/forward"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/store"
)

// TestServeForwardsToNATS runs `pith serve` with a [[forward.nats]] entry,
// changes a tag in the tag table, and reads it back from JetStream as a
// central Pith would.
func TestServeForwardsToNATS(t *testing.T) {
	url := os.Getenv("PITH_TEST_NATS")
	if url == "" {
		t.Skip("PITH_TEST_NATS not set (e.g. nats://127.0.0.1:4222 with JetStream): forwarding test skipped")
	}
	site := fmt.Sprintf("fwtest%d", time.Now().UnixNano())
	cfg := config.Default()
	cfg.Site.Name = site
	cfg.Store.Dir = t.TempDir()
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.Events.Enabled = false
	cfg.Forward.NATS = []config.ForwardNATS{{Name: "fleet", URL: url}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plants := make(chan *plant.Plant, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, cfg, newLogger("warn"), func(_ string, p *plant.Plant) { plants <- p })
	}()
	var p *plant.Plant
	select {
	case p = <-plants:
	case err := <-done:
		t.Fatal(err)
	}
	now := time.Now().UnixMilli()
	if _, err := p.Table().UpdatePoints([]store.Point{{Tag: "hx.t_out", T: now, V: 61.5}}, true, "test"); err != nil {
		t.Fatal(err)
	}
	got := make(chan store.Point, 100)
	cctx, ccancel := context.WithCancel(ctx)
	defer ccancel()
	go forward.Consume(cctx, url, []string{"pith." + site + ".samples"}, "central-"+site,
		func(s string, pts []store.Point) error {
			for _, pt := range pts {
				if s == site && pt.Tag == "hx.t_out" {
					got <- pt
				}
			}
			return nil
		}, newLogger("warn"))
	select {
	case pt := <-got:
		if pt.T != now || pt.V != 61.5 {
			t.Errorf("forwarded %+v, want t=%d v=61.5", pt, now)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the value did not arrive through JetStream within 20 s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
