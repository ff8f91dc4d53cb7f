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

	// natsMaxReadBack bounds the messages readBack reads without a
	// known sequence; natsReadBackBatch is how many it asks at a time.
	natsMaxReadBack   = 100_000
	natsReadBackBatch = 1024

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
	// NATSNodeHeader names the box of a redundant pair that published a
	// message, so that the box skips its own messages when it mirrors
	// its peer (docs/redundancy.md).
	NATSNodeHeader = "Pith-Node"
)

// NATSOptions configure a NATSSink.
type NATSOptions struct {
	URL       string        // e.g. nats://127.0.0.1:4222
	Site      string        // the subject is pith.<Site>.samples
	Stream    string        // stream created when missing
	Subjects  []string      // subjects of a created stream
	DupWindow time.Duration // duplicate window of a created stream
	Timeout   time.Duration // wait for one publish ack
	// Node, when set, is sent in header Pith-Node of every message: the
	// box of a redundant pair that published it.
	Node string
	// Replicas of a created stream; 0 is 1.
	Replicas int
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

	// seq is the stream sequence of the last confirmed publish (or the
	// token the forwarder resumed with): the resend check reads the
	// subject after it.
	seq uint64
	// unsure is set at the start and after a failed Send: messages of
	// an earlier Send may be in the stream without their acks having
	// come back. The next Send first reads what the stream holds after
	// seq (stored, by id, in have) and skips those messages, so that a
	// resend later than the stream's duplicate window adds nothing
	// either.
	unsure bool
	have   map[string]struct{}

	dups atomic.Uint64
	reconnected
}

var (
	_ Sink    = (*NATSSink)(nil)
	_ Resumer = (*NATSSink)(nil)
	_ Waker   = (*NATSSink)(nil)
)

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
	return &NATSSink{opts: opts, log: log, subject: "pith." + opts.Site + ".samples", unsure: true,
		reconnected: newReconnected()}, nil
}

// Resume sets the stream sequence after which the sink looks for its own
// unacknowledged messages before its first Send.
func (s *NATSSink) Resume(token uint64) {
	s.seq, s.unsure = token, true
}

// Token returns the stream sequence of the last confirmed publish.
func (s *NATSSink) Token() uint64 { return s.seq }

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
			nats.ReconnectHandler(func(*nats.Conn) { s.signal() }),
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
				Replicas:   s.opts.Replicas,
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
	if s.unsure {
		if err := s.readBack(ctx); err != nil {
			return err
		}
		s.unsure = false
	}
	ok := false
	defer func() { s.unsure = s.unsure || !ok }()
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
	seq := s.seq
	for _, f := range s.futures {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				s.dups.Add(1)
			}
			seq = max(seq, ack.Sequence)
		case err := <-f.Err():
			return s.publishErr(f.Msg().Header.Get(jetstream.MsgIDHeader), err)
		case <-ctx.Done():
			return fmt.Errorf("wait for ack of batch %s: %w", b.ID, ctx.Err())
		}
	}
	s.seq, ok = seq, true
	return nil
}

// readBack reads the message ids this sink's box published on its
// subject after stream sequence seq into have: the messages of sends
// whose acks never came back (the connection or the process died between
// the server storing them and the ack arriving). The forwarder stores seq
// with its cursor, so what is read is what was in flight past the cursor.
// Without a sequence (a cursor of an earlier release, or none yet) the
// whole subject is read, up to natsMaxReadBack messages; past that the
// resend relies on the stream's duplicate window alone, and says so.
func (s *NATSSink) readBack(ctx context.Context) error {
	s.have = nil
	setup, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	st, err := s.js.Stream(setup, s.opts.Stream)
	if err != nil {
		return fmt.Errorf("read back %s: %w", s.subject, err)
	}
	last, err := st.GetLastMsgForSubject(setup, s.subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read back %s: last message: %w", s.subject, err)
	}
	if last.Sequence <= s.seq {
		return nil
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{s.subject}, HeadersOnly: true}
	if s.seq > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, s.seq+1
	}
	cons, err := st.OrderedConsumer(setup, cfg)
	if err != nil {
		return fmt.Errorf("read back %s: %w", s.subject, err)
	}
	have := make(map[string]struct{})
	progress := time.Now()
	for read := 0; ; {
		if s.seq == 0 && read >= natsMaxReadBack {
			s.log.Warn("read back: too many messages after the last known sequence; resends rely on the stream's duplicate window",
				"subject", s.subject, "after", s.seq, "read", read)
			return nil
		}
		// FetchNoWait answers with what the consumer has now: Fetch
		// would wait for a full batch.
		batch, err := cons.FetchNoWait(natsReadBackBatch)
		if err != nil {
			return fmt.Errorf("read back %s: %w", s.subject, err)
		}
		n, done := 0, false
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("read back %s: %w", s.subject, err)
			}
			h := m.Headers()
			if id := h.Get(jetstream.MsgIDHeader); id != "" && h.Get(NATSNodeHeader) == s.opts.Node {
				have[id] = struct{}{}
			}
			done = done || md.Sequence.Stream >= last.Sequence
		}
		if err := batch.Error(); err != nil {
			return fmt.Errorf("read back %s: %w", s.subject, err)
		}
		if done {
			break
		}
		if n > 0 {
			progress = time.Now()
		} else {
			// Not delivered yet: wait a little, while the stream
			// delivers at all (a large read-back takes as long as
			// it takes).
			sleep(ctx, 20*time.Millisecond)
			if ctx.Err() != nil || time.Since(progress) > s.opts.Timeout {
				return fmt.Errorf("read back %s: %d messages read, none more within %s, not up to sequence %d", s.subject, read, s.opts.Timeout, last.Sequence)
			}
		}
		read += n
	}
	if len(have) > 0 {
		s.log.Info("read back unacknowledged messages; they are not sent again", "subject", s.subject, "after", s.seq, "messages", len(have))
		s.have = have
	}
	return nil
}

// publish starts publishing msg with id, unless the stream already holds
// it (readBack).
func (s *NATSSink) publish(ctx context.Context, msg *nats.Msg, id string) error {
	if _, ok := s.have[id]; ok {
		delete(s.have, id)
		s.dups.Add(1)
		return nil
	}
	if s.opts.Node != "" {
		if msg.Header == nil {
			msg.Header = nats.Header{}
		}
		msg.Header.Set(NATSNodeHeader, s.opts.Node)
	}
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
