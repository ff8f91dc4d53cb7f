package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of NATSOptions.
const (
	DefaultNATSStream    = "PITH"           // JetStream stream created when missing
	DefaultNATSSubjects  = "pith.*.samples" // subjects of that stream
	DefaultNATSDupWindow = 10 * time.Minute // the stream's duplicate window: must cover the longest replay (an edge down between a publish and its ack)
	DefaultNATSTimeout   = 10 * time.Second // wait for one publish ack
	natsConnectTimeout   = 5 * time.Second  // wait for the TCP and NATS handshake
	natsReconnectWait    = 500 * time.Millisecond

	// natsMaxEntryPoints bounds the points of one message, about 11 bytes
	// each: under the server's default max_payload of 1 MiB.
	natsMaxEntryPoints = 32768
	// natsMaxEntryTexts bounds the text values of one message: at most
	// 1 KiB each, under the server's default max_payload of 1 MiB.
	natsMaxEntryTexts = 512

	// natsMaxPending bounds the messages of one batch awaiting their
	// acks: more than a batch of DefaultBatchPoints entries can hold.
	natsMaxPending = 1 << 15

	// jsErrCodeMessageTooLarge is the server's JSStreamMessageExceedsMaximumErr,
	// which nats.go does not name.
	jsErrCodeMessageTooLarge jetstream.ErrorCode = 10054
)

// Headers of a delete message. See docs/format/forward.md.
const (
	natsOpHeader   = "Pith-Op"
	natsOpDelete   = "delete"
	natsTagHeader  = "Pith-Tag"
	natsFromHeader = "Pith-From"
	natsToHeader   = "Pith-To"
)

// NATSOptions configure a NATSSink.
type NATSOptions struct {
	URL       string        // e.g. nats://127.0.0.1:4222
	Site      string        // the subject is pith.<Site>.samples
	Stream    string        // stream created when missing
	Subjects  []string      // subjects of a created stream
	DupWindow time.Duration // duplicate window of a created stream
	Timeout   time.Duration // wait for one publish ack
}

// DefaultNATSOptions returns the options of a sink to the local server.
func DefaultNATSOptions() NATSOptions {
	return NATSOptions{
		URL:       nats.DefaultURL,
		Stream:    DefaultNATSStream,
		Subjects:  []string{DefaultNATSSubjects},
		DupWindow: DefaultNATSDupWindow,
		Timeout:   DefaultNATSTimeout,
	}
}

// NATSSink publishes batches to JetStream, one message per batch with the
// batch id as Nats-Msg-Id so that the stream drops resent batches, and
// waits for each publish ack. It connects on first use and after the
// connection is lost, so an unreachable server is an ordinary, retried
// send error.
type NATSSink struct {
	opts    NATSOptions
	log     *slog.Logger
	subject string
	nc      *nats.Conn
	js      jetstream.JetStream
	ready   bool // the stream is known to exist on this connection
	futures []jetstream.PubAckFuture

	dups atomic.Uint64
}

var _ Sink = (*NATSSink)(nil)

// NewNATSSink returns a sink; it does not connect yet.
func NewNATSSink(opts NATSOptions, log *slog.Logger) (*NATSSink, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	def := DefaultNATSOptions()
	if opts.Site == "" {
		return nil, errors.New("create nats sink: site name is empty")
	}
	if opts.URL == "" {
		opts.URL = def.URL
	}
	if opts.Stream == "" {
		opts.Stream = def.Stream
	}
	if len(opts.Subjects) == 0 {
		opts.Subjects = def.Subjects
	}
	if opts.DupWindow <= 0 {
		opts.DupWindow = def.DupWindow
	}
	if opts.Timeout <= 0 {
		opts.Timeout = def.Timeout
	}
	return &NATSSink{opts: opts, log: log, subject: "pith." + opts.Site + ".samples"}, nil
}

// Subject returns the subject batches are published to.
func (s *NATSSink) Subject() string { return s.subject }

// Duplicates returns how many publishes the stream acknowledged as
// duplicates of an earlier one: resends after a lost ack or a restart.
func (s *NATSSink) Duplicates() uint64 { return s.dups.Load() }

// connect makes sure a connection and the stream exist.
func (s *NATSSink) connect(ctx context.Context) error {
	if s.nc != nil && s.nc.IsClosed() {
		s.nc, s.js, s.ready = nil, nil, false
	}
	if s.nc == nil {
		nc, err := nats.Connect(s.opts.URL,
			nats.Name("pith-forward-"+s.opts.Site),
			nats.Timeout(natsConnectTimeout),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(natsReconnectWait),
			// Fail publishes at once while disconnected instead of
			// buffering them: the queue is the buffer.
			nats.ReconnectBufSize(-1),
		)
		if err != nil {
			return fmt.Errorf("connect to nats %s: %w", s.opts.URL, err)
		}
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(natsMaxPending))
		if err != nil {
			nc.Close()
			return fmt.Errorf("open jetstream: %w", err)
		}
		s.nc, s.js = nc, js
	}
	if !s.ready {
		_, err := s.js.Stream(ctx, s.opts.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{
				Name:       s.opts.Stream,
				Subjects:   s.opts.Subjects,
				Storage:    jetstream.FileStorage,
				Duplicates: s.opts.DupWindow,
			})
			if err == nil {
				s.log.Info("created jetstream stream", "stream", s.opts.Stream, "subjects", s.opts.Subjects)
			}
		}
		if err != nil {
			return fmt.Errorf("ensure stream %s: %w", s.opts.Stream, err)
		}
		s.ready = true
	}
	return nil
}

// Send publishes every entry of b (asynchronously, then waits for every
// ack): a points entry as one message (or natsMaxEntryPoints-point parts
// of it) with Nats-Msg-Id the entry id (parts "<id>+<k>" from k = 1), a
// delete as a message with header Pith-Op "delete", labels as one with
// Pith-Op "labels". The stream drops a
// message whose id it has seen within its duplicate window, so a batch
// resent after a lost ack or a crash adds nothing. A message larger than
// the server's payload limit, or one the stream refuses for its size, is
// refused permanently.
func (s *NATSSink) Send(ctx context.Context, b Batch) error {
	if err := s.connect(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	s.futures = s.futures[:0]
	for i := range b.Entries {
		e := &b.Entries[i]
		if e.Delete != nil {
			if err := s.publish(ctx, deleteMsg(s.subject, e.Delete), e.ID); err != nil {
				return err
			}
			continue
		}
		if e.Labels != nil {
			if err := s.publish(ctx, labelsMsg(s.subject, e.Labels), e.ID); err != nil {
				return err
			}
			continue
		}
		for k, pts := 0, e.Points; len(pts) > 0; k++ {
			n := min(len(pts), natsMaxEntryPoints)
			id := e.ID
			if k > 0 {
				id += "+" + strconv.Itoa(k)
			}
			msg := &nats.Msg{Subject: s.subject, Data: EncodeBatch(time.Now().UnixMilli(), pts[:n])}
			if err := s.publish(ctx, msg, id); err != nil {
				return err
			}
			pts = pts[n:]
		}
		for k, texts := 0, e.Texts; len(texts) > 0; k++ {
			// Text values go in their own messages (header Pith-Kind:
			// text), so that a central Pith without text support refuses
			// them alone. 512 values of at most 1 KiB stay under 1 MiB.
			n := min(len(texts), natsMaxEntryTexts)
			msg := &nats.Msg{Subject: s.subject, Data: EncodeTextBatch(time.Now().UnixMilli(), texts[:n]), Header: nats.Header{}}
			msg.Header.Set(natsKindHeader, natsKindText)
			if err := s.publish(ctx, msg, e.ID+"+t"+strconv.Itoa(k)); err != nil {
				return err
			}
			texts = texts[n:]
		}
	}
	for _, f := range s.futures {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				s.dups.Add(1)
			}
		case err := <-f.Err():
			return s.publishErr(f.Msg().Header.Get(jetstream.MsgIDHeader), err)
		case <-ctx.Done():
			return fmt.Errorf("wait for ack of batch %s: %w", b.ID, ctx.Err())
		}
	}
	return nil
}

// publish starts publishing msg with id.
func (s *NATSSink) publish(ctx context.Context, msg *nats.Msg, id string) error {
	// No retries inside the client: its retry on "no responders" (a
	// stream between leaders) writes the message's reply subject from the
	// reply goroutine while PublishMsgAsync's own deferred reset writes it
	// too, a data race in nats.go v1.37. The future then fails and the
	// forwarder resends the batch itself, deduplicated by its message id.
	f, err := s.js.PublishMsgAsync(msg, jetstream.WithMsgID(id), jetstream.WithRetryAttempts(0))
	if err != nil {
		return s.publishErr(id, err)
	}
	s.futures = append(s.futures, f)
	return nil
}

// publishErr wraps a publish error, refusing the message permanently when
// it is too large.
func (s *NATSSink) publishErr(id string, err error) error {
	var apiErr *jetstream.APIError
	if errors.Is(err, nats.ErrMaxPayload) ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrCodeMessageTooLarge) {
		return fmt.Errorf("publish entry %s: %w: %w", id, ErrPermanent, err)
	}
	return fmt.Errorf("publish entry %s: %w", id, err)
}

// deleteMsg is the message of a forwarded delete: no payload, the tag and
// range in headers (docs/format/forward.md).
func deleteMsg(subject string, d *Delete) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Header.Set(natsOpHeader, natsOpDelete)
	m.Header.Set(natsTagHeader, d.Tag)
	m.Header.Set(natsFromHeader, strconv.FormatInt(d.From, 10))
	m.Header.Set(natsToHeader, strconv.FormatInt(d.To, 10))
	return m
}

// Close closes the connection.
func (s *NATSSink) Close() {
	if s.nc != nil {
		s.nc.Close()
		s.nc, s.js, s.ready = nil, nil, false
	}
}
