package agent

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/store"
)

// inputs are the push inputs: the road that imports and pushed values
// take (road.go, behind the input chains of writer.go), the gate on new
// tag names, and the
// MQTT subscriber. The HTTP inputs (line protocol, emoncms, remote write,
// the import API) are mounted by the HTTP part on wr.
type inputs struct {
	cfg    *config.Config
	db     *store.DB
	fw     *forwarders
	plant  *plant.Plant
	alarms *automation
	log    *slog.Logger

	wr       writer          // once started
	gate     *ingest.TagGate // once started
	stopMQTT func()          // nil when MQTT is off
}

var _ Part = (*inputs)(nil)

func (in *inputs) Name() string { return "inputs" }

// Start builds the writer chain, then starts the MQTT subscriber on it.
func (in *inputs) Start(ctx context.Context) error {
	cfg := in.cfg
	// Imports and push inputs take the road through the tag table
	// (road.go), behind their [[input]] chains.
	wr, err := withInputChains(newRoad(in.db, in.plant.Table()),
		cfg, in.db, in.log)
	if err != nil {
		return err
	}
	in.wr = wr
	in.gate = ingest.NewTagGate(in.db, cfg.Ingest.NewTagsPerMinute, nil)
	if cfg.MQTT.Enabled {
		if in.stopMQTT, err = startMQTT(ctx, cfg.MQTT, in.wr, in.gate, in.log); err != nil {
			return err
		}
	}
	return nil
}

func (in *inputs) Stop() {
	if in.stopMQTT != nil {
		in.stopMQTT()
	}
}

// startMQTT runs the MQTT subscriber until ctx ends or the returned stop.
func startMQTT(ctx context.Context, c config.MQTT, db ingest.Sink, gate *ingest.TagGate, log *slog.Logger) (func(), error) {
	o := ingest.DefaultMQTTOptions()
	o.Broker, o.Topics, o.Prefix = c.Broker, c.Topics, c.Prefix
	if c.ClientID != "" {
		o.ClientID = c.ClientID
	}
	o.Username, o.Password = c.Username, c.Password
	o.Gate, o.Logger = gate, log
	m, err := ingest.NewMQTT(db, o)
	if err != nil {
		return nil, fmt.Errorf("mqtt: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.Run(ctx); err != nil && ctx.Err() == nil {
			log.Error("mqtt input stopped", "err", err)
		}
	}()
	return func() { cancel(); <-done }, nil
}
