package ingest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// MQTTOptions configure the MQTT input.
type MQTTOptions struct {
	Broker         string        // broker URL: mqtt://host:1883, tls://host:8883 (tcp:// and ssl:// too)
	Topics         []string      // subscriptions, at QoS 1
	Prefix         string        // removed from the front of a topic before naming ("emon/")
	ClientID       string        // fixed so the broker keeps the session (and QoS 1 messages) across reconnects
	Username       string        // empty: connect without credentials
	Password       string        // sent when Username is set
	TLS            *tls.Config   // for tls:// brokers; nil uses the system roots
	KeepAlive      time.Duration // MQTT keep-alive
	SessionExpiry  time.Duration // how long the broker keeps the session while Pith is away
	ReconnectDelay time.Duration // wait between connection attempts
	BatchPoints    int           // points written to the store in one transaction at most
	BatchDelay     time.Duration // the longest a received value waits for its batch
	AckWindow      int           // unacknowledged messages that trigger a store write (the broker's in-flight limit)
	AckOnReceipt   bool          // acknowledge before storing: faster, but a crash loses the current batch
	Gate           *TagGate      // cap on new tags; nil admits every tag
	Logger         *slog.Logger
	Now            func() time.Time // time of values whose payload has none
}

// DefaultMQTTOptions returns the options Pith runs with: the emoncms
// convention on a local broker.
func DefaultMQTTOptions() MQTTOptions {
	host, _ := os.Hostname()
	return MQTTOptions{
		Broker:         "mqtt://127.0.0.1:1883",
		Topics:         []string{"emon/#"},
		Prefix:         "emon/",
		ClientID:       "pith-" + host,
		KeepAlive:      30 * time.Second,
		SessionExpiry:  24 * time.Hour,
		ReconnectDelay: 5 * time.Second,
		BatchPoints:    5000,
		BatchDelay:     50 * time.Millisecond,
		AckWindow:      20, // mosquitto's default max_inflight_messages
		Logger:         slog.Default(),
		Now:            time.Now,
	}
}

// MQTTStats are the input's counters, read with atomic loads.
type MQTTStats struct {
	Messages  atomic.Int64 // messages received
	Points    atomic.Int64 // points stored
	Bad       atomic.Int64 // messages whose payload could not be read (dropped, acknowledged)
	Refused   atomic.Int64 // points the store or the tag cap refused (dropped)
	Batches   atomic.Int64 // store writes
	Connects  atomic.Int64 // successful connections, reconnections included
	LastError atomic.Value // string: the last connection or store error
}

// MQTT subscribes to topics and stores what arrives. A topic names its
// value per the tag-name rule, after Prefix is removed and with '/' as the
// separator: emon/emontx/power1 with payload "230.5" is the tag
// emontx.power1; a JSON object {"power1": 230.5, "time": 1700000000} under
// emon/emontx gives emontx.power1, its "time" (Unix seconds) dating every
// value of the message. This is the emoncms convention, which needs no
// mapping to be written.
//
// Delivery is at least once: messages are acknowledged to the broker only
// once their points are durable in the store, so a crash or power cut
// loses nothing the broker had; with a persistent session (fixed ClientID,
// SessionExpiry) the broker also keeps what arrives while Pith is down.
// Values are batched (BatchPoints, BatchDelay) into one store write. The
// broker only sends its in-flight limit of unacknowledged messages
// (mosquitto: max_inflight_messages, 20 by default), so a write happens
// every AckWindow messages; raising both (mosquitto max_inflight_messages
// 1000 and AckWindow 1000) makes batches larger and ingest faster. A
// broker also drops messages for a subscriber beyond its queue limit
// (mosquitto: max_queued_messages, 1000): size it for bursts.
// AckOnReceipt trades the guarantee for speed with default brokers.
type MQTT struct {
	sink  Sink
	opts  MQTTOptions
	stats MQTTStats

	mu      sync.Mutex // guards the pending batch
	pts     []model.Point
	acks    []paho.PublishReceived
	namer   namer
	key     []byte
	flushMu sync.Mutex // serialises flushes so acks go out in order
	runCtx  context.Context
}

// NewMQTT checks opts and returns the input; Run starts it.
func NewMQTT(sink Sink, opts MQTTOptions) (*MQTT, error) {
	if opts.Broker == "" {
		return nil, errors.New("check mqtt options: broker is empty")
	}
	if len(opts.Topics) == 0 {
		return nil, errors.New("check mqtt options: no topics")
	}
	def := DefaultMQTTOptions()
	if opts.ClientID == "" {
		opts.ClientID = def.ClientID
	}
	if opts.BatchPoints <= 0 {
		opts.BatchPoints = def.BatchPoints
	}
	if opts.BatchDelay <= 0 {
		opts.BatchDelay = def.BatchDelay
	}
	if opts.AckWindow <= 0 {
		opts.AckWindow = def.AckWindow
	}
	if opts.ReconnectDelay <= 0 {
		opts.ReconnectDelay = def.ReconnectDelay
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = def.KeepAlive
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &MQTT{sink: sink, opts: opts, runCtx: context.Background()}, nil
}

// sendAcksInterval is how often paho sends the acknowledgements of the
// messages stored.
const sendAcksInterval = 5 * time.Millisecond

// Stats returns the live counters.
func (m *MQTT) Stats() *MQTTStats { return &m.stats }

// Run connects, subscribes and stores messages until ctx ends; it
// reconnects by itself whenever the broker goes away. It returns nil when
// ctx ends, or an error if the options cannot be used.
func (m *MQTT) Run(ctx context.Context) error {
	u, err := url.Parse(m.opts.Broker)
	if err != nil {
		return fmt.Errorf("parse mqtt broker url: %w", err)
	}
	subs := make([]paho.SubscribeOptions, len(m.opts.Topics))
	for i, t := range m.opts.Topics {
		subs[i] = paho.SubscribeOptions{Topic: t, QoS: 1}
	}
	m.runCtx = ctx
	log := m.opts.Logger
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		TlsCfg:                        m.opts.TLS,
		KeepAlive:                     uint16(m.opts.KeepAlive / time.Second),
		CleanStartOnInitialConnection: false,
		SessionExpiryInterval:         uint32(m.opts.SessionExpiry / time.Second),
		ReconnectBackoff:              autopaho.NewConstantBackoff(m.opts.ReconnectDelay),
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			m.stats.Connects.Add(1)
			log.Info("mqtt connected", "broker", m.opts.Broker)
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := cm.Subscribe(sctx, &paho.Subscribe{Subscriptions: subs}); err != nil {
				m.stats.LastError.Store("subscribe: " + err.Error())
				log.Warn("mqtt subscribe failed", "err", err)
			}
		},
		OnConnectError: func(err error) {
			m.stats.LastError.Store("connect: " + err.Error())
			log.Warn("mqtt connect", "broker", m.opts.Broker, "err", err)
		},
		ClientConfig: paho.ClientConfig{
			ClientID:                   m.opts.ClientID,
			EnableManualAcknowledgment: !m.opts.AckOnReceipt,
			SendAcksInterval:           sendAcksInterval,
			OnPublishReceived:          []func(paho.PublishReceived) (bool, error){m.receive},
			OnClientError: func(err error) {
				m.stats.LastError.Store("client: " + err.Error())
				log.Warn("mqtt client error", "err", err)
			},
		},
	}
	if m.opts.Username != "" {
		cfg.ConnectUsername = m.opts.Username
		cfg.ConnectPassword = []byte(m.opts.Password)
	}
	// The connection outlives ctx until the last batch is stored and
	// acknowledged and the broker told of the disconnect: a message stored
	// but not acknowledged would come again, to this box's next session
	// or to a redundant pair's other box.
	cctx, ccancel := context.WithCancel(context.WithoutCancel(ctx))
	defer ccancel()
	cm, err := autopaho.NewConnection(cctx, cfg)
	if err != nil {
		return fmt.Errorf("start mqtt connection: %w", err)
	}
	tick := time.NewTicker(m.opts.BatchDelay)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			m.flush(context.Background())
			// paho sends the acknowledgements it batches every
			// sendAcksInterval: let it send the last ones first, or the
			// broker sends the messages they acknowledge again to the
			// session's next holder (a redundant pair's other box).
			time.Sleep(4 * sendAcksInterval)
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			cm.Disconnect(dctx)
			cancel()
			return nil
		case <-tick.C:
			m.flush(ctx)
		}
	}
}

// receive is paho's callback, called in order of arrival from one
// goroutine. A full batch is written here, which holds back the broker
// while the store catches up.
func (m *MQTT) receive(pr paho.PublishReceived) (bool, error) {
	m.stats.Messages.Add(1)
	m.mu.Lock()
	n := len(m.pts)
	var err error
	m.pts, err = m.parse(m.pts, pr.Packet.Topic, pr.Packet.Payload)
	if err != nil {
		m.pts = m.pts[:n]
		m.stats.Bad.Add(1)
		m.opts.Logger.Debug("mqtt message dropped", "topic", pr.Packet.Topic, "err", err)
	}
	m.acks = append(m.acks, pr)
	// The broker sends at most its in-flight limit of unacknowledged
	// messages, so waiting for more than that would only wait BatchDelay.
	full := len(m.pts) >= m.opts.BatchPoints || (!m.opts.AckOnReceipt && len(m.acks) >= m.opts.AckWindow)
	m.mu.Unlock()
	if full {
		m.flush(m.runCtx)
	}
	return true, nil
}

// flush writes the pending batch and then acknowledges its messages. A
// store that fails for a reason other than a refused point is retried
// with the messages held: they are only acknowledged once stored.
func (m *MQTT) flush(ctx context.Context) {
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	m.mu.Lock()
	pts, acks := m.pts, m.acks
	m.pts, m.acks = nil, nil
	m.mu.Unlock()
	if len(acks) == 0 {
		return
	}
	for len(pts) > 0 {
		err := commit(ctx, m.sink, m.opts.Gate, pts, nil)
		if err == nil {
			m.stats.Points.Add(int64(len(pts)))
			m.stats.Batches.Add(1)
			break
		}
		var tooMany *TooManyNewTagsError
		var pe *model.PointError
		switch {
		case errors.As(err, &tooMany):
			pts = dropTag(pts, tooMany.Tag, &m.stats)
			continue
		case errors.As(err, &pe) && pe.Index < len(pts):
			pts = append(pts[:pe.Index], pts[pe.Index+1:]...)
			m.stats.Refused.Add(1)
			continue
		}
		m.stats.LastError.Store("store: " + err.Error())
		m.opts.Logger.Warn("mqtt batch not stored, retrying", "points", len(pts), "err", err)
		select {
		case <-ctx.Done():
			return // not acknowledged: the broker sends them again
		case <-time.After(time.Second):
		}
	}
	for _, pr := range acks {
		if m.opts.AckOnReceipt {
			break // paho acknowledged them as they arrived
		}
		if err := pr.Client.Ack(pr.Packet); err != nil {
			m.stats.LastError.Store("ack: " + err.Error())
		}
	}
	m.mu.Lock()
	if m.pts == nil {
		m.pts = pts[:0] // reuse the batch memory
	}
	m.mu.Unlock()
}

// dropTag removes the points of one refused tag.
func dropTag(pts []model.Point, tag string, st *MQTTStats) []model.Point {
	out := pts[:0]
	for _, p := range pts {
		if p.Tag == tag {
			st.Refused.Add(1)
			continue
		}
		out = append(out, p)
	}
	return out
}

// parse appends the points of one message.
func (m *MQTT) parse(dst []model.Point, topic string, payload []byte) ([]model.Point, error) {
	path := strings.TrimPrefix(topic, m.opts.Prefix)
	payload = bytes.TrimSpace(payload)
	if len(payload) == 0 {
		return dst, errors.New("empty payload")
	}
	now := m.opts.Now().UnixMilli()
	if payload[0] != '{' {
		v, ok := phpNumeric(payload)
		if !ok {
			return dst, fmt.Errorf("payload %.40q is not a number or a JSON object", payload)
		}
		name, err := m.name(path, nil)
		if err != nil {
			return dst, err
		}
		return append(dst, model.Point{Tag: name, T: now, V: v}), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(payload, &obj); err != nil {
		return dst, fmt.Errorf("decode JSON payload: %w", err)
	}
	t := now
	if raw, ok := obj["time"]; ok {
		v, ok, err := jsonNumber(raw)
		if err != nil || !ok {
			return dst, fmt.Errorf("bad time %.40s", raw)
		}
		if t, err = millisFromSeconds(v); err != nil {
			return dst, err
		}
	}
	for k, raw := range obj {
		if k == "time" {
			continue
		}
		v, ok, err := jsonNumber(raw)
		if err != nil {
			return dst, fmt.Errorf("key %q: %w", k, err)
		}
		if !ok {
			continue
		}
		name, err := m.name(path, []byte(k))
		if err != nil {
			return dst, err
		}
		dst = append(dst, model.Point{Tag: name, T: t, V: v})
	}
	return dst, nil
}

// name returns the tag for a topic path and an optional JSON key.
func (m *MQTT) name(path string, key []byte) (string, error) {
	m.key = append(append(append(m.key[:0], path...), 0), key...)
	if s, ok := m.namer.lookup(m.key); ok {
		return s, nil
	}
	m.namer.Reset()
	m.namer.AddPath(path)
	if key != nil {
		m.namer.Add(key)
	}
	return m.namer.remember(m.key)
}
