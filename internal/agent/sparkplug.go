package agent

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/sparkplug"
)

// sparkplugPart runs the [[sparkplug.host]] host applications, which
// store what edge nodes publish through the push road (inputs' writer and
// new-tag gate), and the [[sparkplug.edge]] edge nodes, which publish the
// tag table and write commanded tags through the automation's guarded
// control path. A reload restarts the entries whose settings changed.
type sparkplugPart struct {
	in  *inputs
	au  *automation
	log *slog.Logger

	ctx     context.Context     // the agent's, from Start
	running map[string]*spEntry // by name
}

var _ Reloadable = (*sparkplugPart)(nil)

// spEntry is one running host or edge node.
type spEntry struct {
	conf any // its config.SparkplugHost or config.SparkplugEdge
	run  func(context.Context) error
	stop func()
}

func (s *sparkplugPart) Name() string { return "sparkplug" }

func (s *sparkplugPart) Start(ctx context.Context) error {
	s.ctx, s.running = ctx, map[string]*spEntry{}
	ch, err := s.prepare(s.in.cfg)
	if err != nil {
		return err
	}
	ch.Commit()
	return nil
}

func (s *sparkplugPart) Stop() {
	for _, e := range s.running {
		e.stop()
	}
	s.running = nil
}

// Prepare builds the entries of cfg that are new or changed; nothing
// connects before Commit.
func (s *sparkplugPart) Prepare(cfg *config.Config) (Change, error) { return s.prepare(cfg) }

func (s *sparkplugPart) prepare(cfg *config.Config) (Change, error) {
	next := map[string]*spEntry{}
	var start []string
	add := func(name string, conf any, build func() (func(context.Context) error, error)) error {
		if cur, ok := s.running[name]; ok && reflect.DeepEqual(cur.conf, conf) {
			next[name] = cur
			return nil
		}
		run, err := build()
		if err != nil {
			return fmt.Errorf("prepare sparkplug %q: %w", name, err)
		}
		next[name] = &spEntry{conf: conf, run: run}
		start = append(start, name)
		return nil
	}
	for _, c := range cfg.Sparkplug.Host {
		if err := add(c.Name, c, func() (func(context.Context) error, error) {
			h, err := sparkplug.NewHost(s.in.wr, hostOptions(c, s.in.gate, s.log))
			if err != nil {
				return nil, err
			}
			return h.Run, nil
		}); err != nil {
			return nil, err
		}
	}
	for _, c := range cfg.Sparkplug.Edge {
		if err := add(c.Name, c, func() (func(context.Context) error, error) {
			e, err := sparkplug.NewEdge(s.in.plant.Table(), s.au.guard, edgeOptions(c, s.log))
			if err != nil {
				return nil, err
			}
			return e.Run, nil
		}); err != nil {
			return nil, err
		}
	}
	return funcChange{commit: func() {
		for name, e := range s.running {
			if next[name] != e {
				e.stop()
			}
		}
		for _, name := range start {
			next[name].stop = s.launch(name, next[name].run)
		}
		s.running = next
	}}, nil
}

// launch runs one entry until the returned stop.
func (s *sparkplugPart) launch(name string, run func(context.Context) error) func() {
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := run(ctx); err != nil && ctx.Err() == nil {
			s.log.Error("sparkplug stopped", "name", name, "err", err)
		}
	}()
	return func() { cancel(); <-done }
}

func hostOptions(c config.SparkplugHost, gate *ingest.TagGate, log *slog.Logger) sparkplug.HostOptions {
	o := sparkplug.DefaultHostOptions()
	o.Name, o.Broker, o.ClientID, o.Username, o.Password = c.Name, c.Broker, c.ClientID, c.Username, c.Password
	o.HostID, o.TagTemplate, o.Gate = c.HostID, c.TagTemplate, gate
	if len(c.Groups) > 0 {
		o.Groups = c.Groups
	}
	if c.RebirthWait > 0 {
		o.RebirthWait = c.RebirthWait.Std()
	}
	o.Logger = log.With("part", "sparkplug")
	return o
}

func edgeOptions(c config.SparkplugEdge, log *slog.Logger) sparkplug.EdgeOptions {
	o := sparkplug.DefaultEdgeOptions()
	o.Name, o.Broker, o.ClientID, o.Username, o.Password = c.Name, c.Broker, c.ClientID, c.Username, c.Password
	o.Group, o.Node, o.Tags, o.Writable = c.Group, c.Node, c.Tags, c.Writable
	if c.Interval > 0 {
		o.Interval = c.Interval.Std()
	}
	o.Logger = log.With("part", "sparkplug")
	return o
}
