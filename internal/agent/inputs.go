package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/sparkplug"
	"github.com/pith-historian/pith/internal/store"
)

// inputs are the push inputs: the road that imports and pushed values
// take (road.go, behind the input chains of writer.go), the gate on new
// tag names, and the
// MQTT subscriber. The HTTP inputs (line protocol, emoncms, remote write,
// the import API) are mounted by the HTTP part on wr.
//
// On a box of a redundant pair the MQTT subscriber runs on the active box
// only (setActive), with a client id the two boxes share: the broker
// keeps that session, and queues its messages, while neither box is
// connected (a takeover), and the box taking over resumes it. The two
// boxes are never both subscribed, and a message is stored once.
type inputs struct {
	cfg    *config.Config
	db     *store.DB
	fw     *forwarders
	plant  *plant.Plant
	alarms *automation
	log    *slog.Logger

	wr   writer          // once started
	gate *ingest.TagGate // once started

	// leased says whether a pair's box holds the lease now, for a role
	// change applied before this part started; nil outside a pair.
	leased func() bool

	mu       sync.Mutex
	ctx      context.Context // the part's, once started
	active   bool            // a pair's box is active (setActive)
	stopMQTT func()          // nil when the subscriber does not run
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
	in.mu.Lock()
	defer in.mu.Unlock()
	in.ctx = ctx
	if cfg.MQTT.Enabled && (!cfg.Redundancy.Enabled() || in.active || in.leased != nil && in.leased()) {
		if in.stopMQTT, err = startMQTT(ctx, in.mqttConfig(), in.subscriberSink(), in.gate, in.log); err != nil {
			return err
		}
	}
	return nil
}

func (in *inputs) Stop() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.stopMQTT != nil {
		in.stopMQTT()
		in.stopMQTT = nil
	}
	in.ctx = nil
}

// mqttConfig is [mqtt] with, on a box of a pair, the pair's client id
// "pith-<group>" unless the file gives one (the same on both boxes).
func (in *inputs) mqttConfig() config.MQTT {
	c := in.cfg.MQTT
	if c.ClientID == "" && in.cfg.Redundancy.Enabled() {
		c.ClientID = "pith-" + in.cfg.Redundancy.Group
	}
	return c
}

// setActive starts (true) or stops (false) the MQTT subscriber of a
// redundant pair's box with its role; before the part starts it only
// records the role. Safe for concurrent use.
func (in *inputs) setActive(active bool) {
	if in == nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.active = active
	if !in.cfg.MQTT.Enabled || in.ctx == nil || active == (in.stopMQTT != nil) {
		return
	}
	if !active {
		in.stopMQTT() // a clean disconnect: the broker keeps the session
		in.stopMQTT = nil
		in.log.Info("mqtt input stopped: this box stands by")
		return
	}
	stop, err := startMQTT(in.ctx, in.mqttConfig(), in.subscriberSink(), in.gate, in.log)
	if err != nil {
		in.log.Error("mqtt input not started", "err", err)
		return
	}
	in.stopMQTT = stop
	in.log.Info("mqtt input started: this box is active")
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

// subscriberSink is what the MQTT subscriber and the Sparkplug hosts store
// through. On a box of a redundant pair it refuses while the box does not
// hold its lease: a box stopped (a hung process, a suspended VM) and woken
// past its lease runs its broker clients' connection-lost handling before
// it notices and stands by, and what they would store then (the metrics
// of every edge node turned bad) is not this box's to store; the box that
// took over stores what the broker delivers.
func (in *inputs) subscriberSink() writer {
	if w, ok := in.wr.(fenceableWriter); ok && in.leased != nil {
		return fencedWriter{fenceableWriter: w, active: in.leased}
	}
	return in.wr
}

// fenceableWriter is the writer chain with the text and unit stores the
// Sparkplug hosts use.
type fenceableWriter interface {
	writer
	ingest.TextSink
	sparkplug.UnitSink
}

// Both forms of the writer chain can be fenced.
var (
	_ fenceableWriter = (*road)(nil)
	_ fenceableWriter = processedWriter{}
)

// errFenced refuses a write of a pair's box that no longer holds its lease.
var errFenced = errors.New("this box of a redundant pair does not hold its lease: not stored")

// fencedWriter is a fenceableWriter that stores only while active says so.
type fencedWriter struct {
	fenceableWriter
	active func() bool
}

func (f fencedWriter) Write(ctx context.Context, pts []model.Point) error {
	if !f.active() {
		return errFenced
	}
	return f.fenceableWriter.Write(ctx, pts)
}

func (f fencedWriter) WriteMixed(ctx context.Context, pts []model.Point, texts []model.TextPoint) error {
	if !f.active() {
		return errFenced
	}
	return f.fenceableWriter.WriteMixed(ctx, pts, texts)
}

func (f fencedWriter) SetUnit(tag, unit string) error {
	if !f.active() {
		return errFenced
	}
	return f.fenceableWriter.SetUnit(tag, unit)
}
