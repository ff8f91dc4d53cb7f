package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/pith-historian/pith/internal/alarm"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/energy"
	"github.com/pith-historian/pith/internal/plant"
	"github.com/pith-historian/pith/internal/report"
	"github.com/pith-historian/pith/internal/store"
)

// reportsPart sends the [[energy.report]] reports after every week or
// month to the sinks of [alarms]: its webhooks and its MQTT broker.
type reportsPart struct {
	cfg   *config.Config
	db    *store.DB
	plant *plant.Plant
	log   *slog.Logger

	stop   func()
	paused atomic.Bool // the standby of a redundant pair sends none (redundancyPart.standby)
}

// pause stops (true) or resumes (false) the sending of reports.
func (p *reportsPart) pause(on bool) { p.paused.Store(on) }

var _ Part = (*reportsPart)(nil)

func (p *reportsPart) Name() string { return "reports" }

func (p *reportsPart) Start(ctx context.Context) error {
	cfg, log := p.cfg, p.log.With("part", "reports")
	if len(cfg.Energy.Report) == 0 {
		p.stop = func() {}
		return nil
	}
	loc, err := cfg.EnergyLocation()
	if err != nil {
		return fmt.Errorf("energy time zone: %w", err)
	}
	tariffs, err := tariffsOf(cfg.Energy)
	if err != nil {
		return err
	}
	meta := p.plant.Meta()
	var scheds []report.Schedule
	for _, r := range cfg.Energy.Report {
		sc := report.Schedule{Name: r.Name, Every: energy.Month, Tags: r.Tags, Delay: r.Delay.Std(), Topic: r.Topic}
		if r.Every == "week" {
			sc.Every = energy.Week
		}
		if sc.Topic == "" {
			sc.Topic = "pith/" + cfg.Site.Name + "/reports/" + r.Name
		}
		for _, tag := range r.Energy {
			m, _ := meta(tag)
			sc.Energy = append(sc.Energy, energy.SourceFor(tag, m.Unit))
		}
		switch {
		case r.Tariff == "none":
		case r.Tariff == "" && len(tariffs) > 0:
			sc.Tariff = tariffs[0]
		default:
			for _, t := range tariffs {
				if t.Name == r.Tariff {
					sc.Tariff = t
				}
			}
		}
		scheds = append(scheds, sc)
	}
	var senders []report.Sender
	for i, w := range cfg.Alarms.Webhook {
		h, err := alarm.ParseHeaders(w.Headers)
		if err != nil {
			return fmt.Errorf("alarms.webhook[%d].headers: %w", i, err)
		}
		senders = append(senders, &report.Webhook{URL: w.URL, Header: h})
	}
	ctx, cancel := context.WithCancel(ctx)
	var mq *report.MQTT
	if m := cfg.Alarms.MQTT; m.Enabled {
		host, _ := os.Hostname()
		mq, err = report.NewMQTT(ctx, report.MQTTOptions{Broker: m.Broker, ClientID: "pith-reports-" + host, Username: m.Username, Password: m.Password}, log)
		if err != nil {
			cancel()
			return fmt.Errorf("alarms.mqtt: %w", err)
		}
		senders = append(senders, mq)
	}
	if len(senders) == 0 {
		log.Warn("scheduled reports have no sink: configure [[alarms.webhook]] or [alarms.mqtt]")
	}
	s, err := report.New(report.Options{DataDir: cfg.Store.Dir, Site: cfg.Site.Name, Location: loc, Queries: p.db,
		Senders: senders, Link: cfg.Energy.Link, Log: log, Paused: p.paused.Load}, scheds)
	if err != nil {
		cancel()
		if mq != nil {
			mq.Close()
		}
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	p.stop = func() {
		cancel()
		<-done
		if mq != nil {
			mq.Close()
		}
	}
	return nil
}

func (p *reportsPart) Stop() {
	if p.stop != nil {
		p.stop()
	}
}
