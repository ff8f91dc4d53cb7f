package forward

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/jsonenc"
	"github.com/pith-historian/pith/internal/model"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// Defaults and limits of the MQTT sink. See docs/format/forward.md.
const (
	DefaultMQTTPrefix   = "pith"           // topic prefix when MQTTOptions.Prefix is empty
	MQTTEntryProperty   = "pith-entry"     // MQTT v5 user property holding the entry id of a point
	MQTTIndexProperty   = "pith-index"     // MQTT v5 user property holding the point's index in its entry
	mqttKeepAlive       = 30               // seconds
	mqttConnectTimeout  = 10 * time.Second // TCP, TLS and CONNACK of one attempt
	mqttReconnectDelay  = 2 * time.Second  // between connection attempts
	mqttPacketTimeout   = 10 * time.Second // wait for one PUBACK
	mqttAwaitConnection = 10 * time.Second // how long Send waits for a connection that is down
	mqttWorkers         = 32               // publishes in flight at once, each tag on one worker
	mqttMaxTopics       = 1 << 16          // cached topic names before the cache is cleared
)

// MQTT v5 PUBACK reason codes that refuse the message itself rather
// than the client: retrying the same message cannot succeed.
const (
	mqttReasonTopicNameInvalid     = 0x90
	mqttReasonPacketTooLarge       = 0x95
	mqttReasonPayloadFormatInvalid = 0x99
)

// MQTTOptions configure an MQTTSink.
type MQTTOptions struct {
	URL      string // broker: mqtt://host:1883 or tcp://...; tls://, ssl://, mqtts:// for TLS; ws://, wss://
	Prefix   string // topics are <Prefix>/<tag path>; DefaultMQTTPrefix when empty (use "pith/<site>" to keep sites apart)
	ClientID string // "pith-forward-<hostname>" when empty; must be unique on the broker
	Username string // empty: connect without credentials
	Password string // sent when Username is set
}

// MQTTSink publishes every point of a batch as one MQTT v5 message at
// QoS 1 to <Prefix>/<tag path>, the tag's dots turned into slashes, with
// the JSON payload {"ts":<Unix ms>,"value":<number|null>,"quality":"good"}
// and the batch id in the user property "pith-batch". Send returns nil
// only after the broker acknowledged (PUBACK) every message of the batch.
//
// A resent batch publishes its messages again with the same batch id, so
// a consumer drops repeats by (topic, ts), or by batch id. Messages of
// one tag are published in order, one at a time; different tags go in
// parallel, up to mqttWorkers at once.
//
// The sink keeps one connection (autopaho), connecting in the background
// from NewMQTTSink on and again whenever it is lost; while it is down,
// Send fails with a retryable error. Send and Close may be called from
// any goroutine; sends are serialised.
type MQTTSink struct {
	opts MQTTOptions
	log  *slog.Logger
	cm   *autopaho.ConnectionManager
	stop context.CancelFunc
	seed maphash.Seed

	mu      sync.Mutex
	pts     []model.Point
	ids     []mqttID         // where each of pts is in the batch
	texts   map[int32]string // the text of the points of pts that are text values
	skipped atomic.Uint64
	topics  map[string]string // tag -> topic
	closed  bool
	reconnected
}

var (
	_ Sink  = (*MQTTSink)(nil)
	_ Waker = (*MQTTSink)(nil)
)

// NewMQTTSink returns a sink and starts connecting to the broker in the
// background; an unreachable broker is not an error here.
func NewMQTTSink(opts MQTTOptions, log *slog.Logger) (*MQTTSink, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.URL == "" {
		return nil, errors.New("create mqtt sink: url is empty")
	}
	u, err := url.Parse(opts.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("create mqtt sink: url %q: want scheme://host:port", opts.URL)
	}
	switch u.Scheme {
	case "mqtt", "tcp", "tls", "ssl", "mqtts", "ws", "wss":
	default:
		return nil, fmt.Errorf("create mqtt sink: url scheme %q: want mqtt, tcp, tls, ssl, mqtts, ws or wss", u.Scheme)
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultMQTTPrefix
	}
	opts.Prefix = strings.TrimSuffix(opts.Prefix, "/")
	if strings.ContainsAny(opts.Prefix, "+#\x00") {
		return nil, fmt.Errorf("create mqtt sink: prefix %q holds a wildcard or NUL", opts.Prefix)
	}
	if opts.ClientID == "" {
		host, _ := os.Hostname()
		opts.ClientID = "pith-forward-" + host
	}
	s := &MQTTSink{opts: opts, log: log, seed: maphash.MakeSeed(), topics: make(map[string]string),
		reconnected: newReconnected()}
	cfg := autopaho.ClientConfig{
		ServerUrls: []*url.URL{u},
		KeepAlive:  mqttKeepAlive,
		// A clean session: a batch whose acks were lost with the
		// connection is resent whole by the queue, not by the session.
		CleanStartOnInitialConnection: true,
		SessionExpiryInterval:         0,
		ReconnectBackoff:              autopaho.NewConstantBackoff(mqttReconnectDelay),
		ConnectTimeout:                mqttConnectTimeout,
		OnConnectionUp: func(*autopaho.ConnectionManager, *paho.Connack) {
			log.Info("mqtt connected", "broker", u.Redacted())
			s.signal()
		},
		OnConnectError: func(err error) {
			log.Debug("mqtt connect", "broker", u.Redacted(), "err", err)
		},
		ClientConfig: paho.ClientConfig{
			ClientID:      opts.ClientID,
			PacketTimeout: mqttPacketTimeout,
			OnClientError: func(err error) {
				log.Warn("mqtt connection lost", "broker", u.Redacted(), "err", err)
			},
		},
	}
	if opts.Username != "" {
		cfg.ConnectUsername = opts.Username
		cfg.ConnectPassword = []byte(opts.Password)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := autopaho.NewConnection(ctx, cfg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("create mqtt sink: %w", err)
	}
	s.cm, s.stop = cm, cancel
	return s, nil
}

// Topic returns the topic the points of tag are published to.
func (s *MQTTSink) Topic(tag string) string { return mqttTopic(s.opts.Prefix, tag) }

// mqttTopic returns <prefix>/<tag with dots as slashes>. The MQTT
// wildcards + and # and NUL, which a topic name cannot hold, become _.
func mqttTopic(prefix, tag string) string {
	var b strings.Builder
	b.Grow(len(prefix) + 1 + len(tag))
	b.WriteString(prefix)
	b.WriteByte('/')
	for i := 0; i < len(tag); i++ {
		switch c := tag[i]; c {
		case '.':
			b.WriteByte('/')
		case '+', '#', 0:
			b.WriteByte('_')
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// AppendMQTTPayload appends the JSON payload of one point:
// {"ts":<Unix ms>,"value":<number>,"quality":"good|bad|uncertain"}. A
// non-finite value, which JSON cannot write, is null.
func AppendMQTTPayload(dst []byte, p model.Point) []byte {
	dst = append(dst, `{"ts":`...)
	dst = strconv.AppendInt(dst, p.T, 10)
	dst = append(dst, `,"value":`...)
	if math.IsNaN(p.V) || math.IsInf(p.V, 0) {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendFloat(dst, p.V, 'g', -1, 64)
	}
	dst = append(dst, `,"quality":"`...)
	dst = append(dst, p.Q.String()...)
	return append(dst, `"}`...)
}

// AppendMQTTTextPayload appends the JSON payload of one text value:
// {"ts":<Unix ms>,"value":"<text>","quality":"good|bad|uncertain"}.
func AppendMQTTTextPayload(dst []byte, t int64, text string, q model.Quality) []byte {
	dst = append(dst, `{"ts":`...)
	dst = strconv.AppendInt(dst, t, 10)
	dst = append(dst, `,"value":`...)
	dst = jsonenc.AppendString(dst, text)
	dst = append(dst, `,"quality":"`...)
	dst = append(dst, q.String()...)
	return append(dst, `"}`...)
}

// Send publishes every point of b and returns nil once each was
// acknowledged. Each message carries its entry id and its index in the
// entry (user properties pith-entry and pith-index) so that a subscriber
// can drop a repeat. Deletes cannot be applied over MQTT: they are
// counted (SkippedDeletes) and logged.
func (s *MQTTSink) Send(ctx context.Context, b Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("send to mqtt: sink closed")
	}
	s.pts, s.ids = s.pts[:0], s.ids[:0]
	clear(s.texts)
	for i := range b.Entries {
		e := &b.Entries[i]
		if e.Delete != nil {
			s.skipped.Add(1)
			s.log.Warn("mqtt cannot apply a delete; skipped", "entry", e.ID, "tag", e.Delete.Tag, "from", e.Delete.From, "to", e.Delete.To)
			continue
		}
		for j := range e.Points {
			s.pts = append(s.pts, e.Points[j])
			s.ids = append(s.ids, mqttID{int32(i), int32(j)})
		}
		for j, t := range e.Texts {
			if s.texts == nil {
				s.texts = make(map[int32]string)
			}
			s.texts[int32(len(s.pts))] = t.Text
			s.pts = append(s.pts, model.Point{Tag: t.Tag, T: t.T, Q: t.Q})
			s.ids = append(s.ids, mqttID{int32(i), int32(len(e.Points) + j)})
		}
	}
	if len(s.pts) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, mqttAwaitConnection)
	err := s.cm.AwaitConnection(wctx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("send batch %s: mqtt broker %s not connected", b.ID, s.opts.URL)
	}
	return s.publish(ctx, b, s.pts)
}

// mqttID locates a point in a batch: its entry and its index there.
type mqttID struct{ entry, index int32 }

// SkippedDeletes returns how many deletes were not forwarded.
func (s *MQTTSink) SkippedDeletes() uint64 { return s.skipped.Load() }

// publish sends pts from mqttWorkers goroutines, each tag on one of them
// so that its points stay in order, and returns the first error.
func (s *MQTTSink) publish(ctx context.Context, b Batch, pts []model.Point) error {
	if len(s.topics) > mqttMaxTopics {
		clear(s.topics)
	}
	// Split the points by worker, in batch order.
	var shards [mqttWorkers][]int32
	for i := range pts {
		tag := pts[i].Tag
		if _, ok := s.topics[tag]; !ok {
			s.topics[tag] = mqttTopic(s.opts.Prefix, tag)
		}
		w := maphash.String(s.seed, tag) % mqttWorkers
		shards[w] = append(shards[w], int32(i))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ids, texts := s.ids, s.texts
	var wg sync.WaitGroup
	for _, shard := range shards {
		if len(shard) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range shard {
				p := pts[i]
				id := ids[i]
				entry := b.Entries[id.entry].ID
				msg := &paho.Publish{
					QoS:   1,
					Topic: s.topics[p.Tag], // read only while the workers run
					Properties: &paho.PublishProperties{
						ContentType: "application/json",
						User: paho.UserProperties{
							{Key: MQTTEntryProperty, Value: entry},
							{Key: MQTTIndexProperty, Value: strconv.Itoa(int(id.index))},
						},
					},
				}
				if x, ok := texts[i]; ok {
					msg.Payload = AppendMQTTTextPayload(make([]byte, 0, 64+len(x)), p.T, x, p.Q)
				} else {
					msg.Payload = AppendMQTTPayload(make([]byte, 0, 64), p)
				}
				if pr, err := s.cm.Publish(ctx, msg); err != nil {
					cancel(mqttError(entry, msg.Topic, pr, err))
					return
				}
				if ctx.Err() != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return nil
}

// mqttError wraps a publish error, refusing the batch permanently when
// the broker refused the message itself (pr is the refusing PUBACK, if
// any).
func mqttError(id, topic string, pr *paho.PublishResponse, err error) error {
	permanent := errors.Is(err, paho.ErrInvalidArguments)
	if pr != nil {
		switch pr.ReasonCode {
		case mqttReasonTopicNameInvalid, mqttReasonPacketTooLarge, mqttReasonPayloadFormatInvalid:
			permanent = true
		}
	}
	if permanent {
		return fmt.Errorf("publish entry %s to %s: %w: %w", id, topic, ErrPermanent, err)
	}
	return fmt.Errorf("publish entry %s to %s: %w", id, topic, err)
}

// Close disconnects from the broker; later sends fail.
func (s *MQTTSink) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	// Disconnect sends DISCONNECT when connected, ends the reconnect
	// loop and waits for it; the timeout bounds a connect in progress.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.cm.Disconnect(ctx); err != nil {
		s.log.Warn("mqtt disconnect", "err", err)
	}
	s.stop()
}
