package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Consumer tuning. See docs/format/forward.md for the messages.
const (
	consumeFetch      = 64               // messages pulled ahead
	consumeAckWait    = 60 * time.Second // redelivery of a message neither acked nor nakked
	consumeNakDelay   = 2 * time.Second  // redelivery delay after a sink error
	consumeMaxPending = 1024             // unacknowledged messages per consumer
	consumeAckTimeout = 5 * time.Second  // longest wait for the server to confirm an ack
)

// SinkFunc receives the points of one batch published by site. Returning
// nil means the points are durable: the message is then acknowledged.
type SinkFunc func(site string, pts []model.Point) error

// Consume pulls batches from the JetStream stream holding subjects with
// the durable pull consumer named durable (created or updated), and calls
// sink with the points of each. A message is acknowledged (and the ack
// confirmed by the server) only after sink returned nil; after a sink
// error it is redelivered later, so sink sees every batch at least once
// and must tolerate repeats (the store does). A payload that does not
// decode is terminated and logged. Several processes consuming with the
// same durable share the work. Consume returns when ctx is done.
func Consume(ctx context.Context, url string, subjects []string, durable string, sink SinkFunc, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(subjects) == 0 || durable == "" {
		return errors.New("consume: subjects and durable name are required")
	}
	nc, err := nats.Connect(url, nats.Name("pith-central-"+durable), nats.MaxReconnects(-1))
	if err != nil {
		return fmt.Errorf("connect to nats %s: %w", url, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("open jetstream: %w", err)
	}
	stream, err := js.StreamNameBySubject(ctx, subjects[0])
	if err != nil {
		return fmt.Errorf("find stream of %s: %w", subjects[0], err)
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       consumeAckWait,
		MaxAckPending: consumeMaxPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	// Servers before 2.10 know only the single filter subject.
	if len(subjects) == 1 {
		cfg.FilterSubject = subjects[0]
	} else {
		cfg.FilterSubjects = subjects
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, cfg)
	if err != nil {
		return fmt.Errorf("create consumer %s on %s: %w", durable, stream, err)
	}
	log.Info("consuming", "stream", stream, "subjects", subjects, "durable", durable)
	// One long-lived pull subscription, not a Fetch per round: a Fetch has
	// its own inbox, closed when the client gives up on it, and a message
	// the server delivers to that inbox a moment later (a loaded machine
	// delays the server's expiry notice past the client's own) is lost
	// until its AckWait, a minute on. Consume keeps one inbox, pulls ahead
	// into it and calls the handler from one goroutine; its subscription
	// buffers in the client (not in a channel of exactly the pull size,
	// which drops messages as a "slow consumer" when it is full).
	var pts []model.Point // the handler's, which runs in one goroutine
	handle := func(m jetstream.Msg) {
		site := siteOf(m.Subject())
		var err error
		_, pts, err = DecodeBatch(pts[:0], m.Data())
		if err != nil {
			log.Error("terminating undecodable message", "subject", m.Subject(), "err", err)
			if err := m.Term(); err != nil {
				log.Warn("terminate message", "err", err)
			}
			return
		}
		if err := sink(site, pts); err != nil {
			log.Warn("sink refused batch; redelivering later", "site", site, "points", len(pts), "err", err)
			if err := m.NakWithDelay(consumeNakDelay); err != nil {
				log.Warn("nak message", "err", err)
			}
			return
		}
		// The sink stored the batch: acknowledge it even while Consume is
		// stopping, or it would come again after AckWait.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), consumeAckTimeout)
		err = m.DoubleAck(actx)
		cancel()
		if err != nil {
			// The batch will come again; the sink tolerates repeats.
			log.Warn("ack message", "err", err)
		}
	}
	cc, err := cons.Consume(handle, jetstream.PullMaxMessages(consumeFetch),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if ctx.Err() == nil {
				log.Warn("pull from jetstream", "err", err)
			}
		}))
	if err != nil {
		return fmt.Errorf("pull from consumer %s: %w", durable, err)
	}
	<-ctx.Done()
	cc.Stop()
	<-cc.Closed()
	return nil
}

// siteOf returns the site part of a pith.<site>.samples subject.
func siteOf(subject string) string {
	parts := strings.Split(subject, ".")
	if len(parts) == 3 {
		return parts[1]
	}
	return subject
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
