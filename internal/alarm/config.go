package alarm

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/pith-historian/pith/internal/acq"
	"github.com/pith-historian/pith/internal/config"
)

// Defs turns the [alarms] section into definitions; with station_comm,
// every Modbus client station without a comm alarm of its own gets one
// named comm.<station>.
func Defs(c config.Alarms, stations []string) ([]Def, error) {
	var defs []Def
	watched := map[string]bool{}
	for i, a := range c.Alarm {
		k, err := ParseKind(a.Type)
		if err != nil || k == KindExternal {
			return nil, fmt.Errorf("alarms.alarm[%d].type: unknown alarm type %q", i, a.Type)
		}
		d := Def{Name: a.Name, Kind: k, Tag: a.Tag, Limit: a.Limit, Deadband: a.Deadband, Value: a.Value,
			MaxAge: a.MaxAge.Std(), OnDelay: a.OnDelay.Std(), OffDelay: a.OffDelay.Std(),
			Severity: a.Severity, Message: a.Message}
		if k == KindComm {
			d.Tag = acq.StatTag(a.Station, acq.TagComm)
			watched[a.Station] = true
			if d.Message == "" {
				d.Message = "station " + a.Station + " not communicating"
			}
		}
		defs = append(defs, d)
	}
	if c.StationComm {
		for _, s := range stations {
			if watched[s] {
				continue
			}
			defs = append(defs, Def{Name: "comm." + s, Kind: KindComm, Tag: acq.StatTag(s, acq.TagComm),
				Severity: "major", Message: "station " + s + " not communicating"})
		}
	}
	return defs, nil
}

// Start builds the engine the configuration describes, with its log in
// dataDir/alarms and its notifiers (those of the config, then extra), and
// runs it until ctx ends. The returned stop waits for it to end and closes
// what it opened.
func Start(ctx context.Context, cfg *config.Config, tab Table, log *slog.Logger, extra ...Notifier) (*Engine, func(), error) {
	c := cfg.Alarms
	defs, err := Defs(c, cfg.StationNames())
	if err != nil {
		return nil, nil, err
	}
	hist, err := OpenLog(filepath.Join(cfg.Store.Dir, "alarms"), c.LogMaxBytes)
	if err != nil {
		return nil, nil, err
	}
	opts := DefaultOptions()
	opts.Scan = c.Scan.Std()
	for i, w := range c.Webhook {
		h, err := ParseHeaders(w.Headers)
		if err != nil {
			hist.Close()
			return nil, nil, fmt.Errorf("alarms.webhook[%d].headers: %w", i, err)
		}
		opts.Notifiers = append(opts.Notifiers, &Webhook{URL: w.URL, Header: h, Timeout: w.Timeout.Std(), Attempts: w.Attempts})
	}
	opts.Notifiers = append(opts.Notifiers, extra...)
	ctx, cancel := context.WithCancel(ctx)
	// The broker connection outlives the engine's context so that the
	// notifier can deliver what is queued at stop.
	mctx, mcancel := context.WithCancel(context.WithoutCancel(ctx))
	var mq *MQTT
	if c.MQTT.Enabled {
		topic := c.MQTT.Topic
		if topic == "" {
			topic = "pith/" + cfg.Site.Name + "/alarms"
		}
		id := c.MQTT.ClientID
		if id == "" {
			host, _ := os.Hostname()
			id = "pith-alarms-" + host
		}
		mq, err = NewMQTT(mctx, MQTTOptions{Broker: c.MQTT.Broker, Topic: topic, ClientID: id,
			Username: c.MQTT.Username, Password: c.MQTT.Password}, log)
		if err != nil {
			cancel()
			mcancel()
			hist.Close()
			return nil, nil, fmt.Errorf("alarms.mqtt: %w", err)
		}
		opts.Notifiers = append(opts.Notifiers, mq)
	}
	e, err := New(defs, hist, tab, opts, log)
	if err != nil {
		cancel()
		if mq != nil {
			mq.Close()
		}
		mcancel()
		hist.Close()
		return nil, nil, err
	}
	// A box of a redundant pair starts as the standby: muted, following
	// the other box.
	e.Mute(cfg.Redundancy.Enabled())
	e.Follow(cfg.Redundancy.Enabled())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := e.Run(ctx)
		if err != nil {
			log.Error("alarm engine stopped", "err", err)
		}
		e.exit(err)
	}()
	stop := func() {
		cancel()
		<-done
		if mq != nil {
			mq.Close()
		}
		mcancel()
		if err := hist.Close(); err != nil {
			log.Error("close alarm log", "err", err)
		}
	}
	return e, stop, nil
}
