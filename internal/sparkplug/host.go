package sparkplug

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/model"
)

// HostOptions configure a host application.
type HostOptions struct {
	Name           string        // names the host in logs
	Broker         string        // mqtt://host:1883 or tls://host:8883
	ClientID       string        // MQTT client id; "" is pith-sparkplug-<Name>
	Username       string        // "" connects without credentials
	Password       string        // sent when Username is set
	TLS            *tls.Config   // for tls:// brokers; nil uses the system roots
	HostID         string        // the STATE topic's host id; "" publishes no STATE
	Groups         []string      // group ids subscribed; "+" is every group
	Writable       []string      // patterns of the tags Control may write (NCMD, DCMD)
	TagTemplate    string        // tag names (DefaultTagTemplate)
	RebirthWait    time.Duration // the shortest time between two rebirth requests to one node
	KeepAlive      time.Duration // MQTT keep-alive
	ReconnectDelay time.Duration // wait between connection attempts
	BatchDelay     time.Duration // the longest a received value waits for its store write
	MaxPending     int           // values held while the store fails; beyond, new ones are dropped
	Gate           *ingest.TagGate
	// Stored returns the newest value the archive holds of a tag, when it
	// has one: a birth's value at that time, with that value, is not
	// stored again (see hostState.repeats). Nil: only what this host
	// received itself counts.
	Stored func(tag string) (t int64, v float64, ok bool)
	Logger *slog.Logger
	Now    func() time.Time
}

// DefaultHostOptions returns a host's defaults for everything but the
// broker and groups.
func DefaultHostOptions() HostOptions {
	return HostOptions{
		Name:           "host",
		Broker:         "mqtt://127.0.0.1:1883",
		Groups:         []string{"+"},
		TagTemplate:    DefaultTagTemplate,
		RebirthWait:    5 * time.Second,
		KeepAlive:      30 * time.Second,
		ReconnectDelay: 5 * time.Second,
		BatchDelay:     50 * time.Millisecond,
		MaxPending:     1 << 20,
		Logger:         slog.New(slog.DiscardHandler),
		Now:            time.Now,
	}
}

// Host is a Sparkplug B host application: it subscribes to
// spBv1.0/<group>/# and stores the values edge nodes publish through
// the push road (ingest.Sink), named by TagTemplate. It tracks births,
// aliases and sequence numbers, asks a node for a rebirth (NCMD
// Node Control/Rebirth) when it missed something, turns every metric of a
// dead node or device bad at once, and announces itself with the
// Sparkplug 3.0 STATE message (a retained birth, and the same as its will
// with online false).
//
// Sparkplug publishes data at QoS 0, so a value the store cannot take is
// held (up to MaxPending values) and retried; a refused value (a bad name,
// the new-tag cap) is dropped and counted.
type Host struct {
	sink  ingest.Sink
	opts  HostOptions
	stats HostStats

	mu      sync.Mutex // guards st, pending, cm
	st      *hostState
	pending []model.Point
	texts   []model.TextPoint           // pending text values (String metrics)
	units   []unitDecl                  // units declared by births, not yet applied
	cm      *autopaho.ConnectionManager // nil until connected

	stateMu sync.Mutex // guards stateTS
	stateTS int64      // the timestamp of this connection's STATE will and birth
}

// NewHost checks opts and returns a host; Run starts it.
func NewHost(sink ingest.Sink, opts HostOptions) (*Host, error) {
	def := DefaultHostOptions()
	if opts.Broker == "" {
		return nil, errors.New("check sparkplug host options: broker is empty")
	}
	if len(opts.Groups) == 0 {
		opts.Groups = def.Groups
	}
	for _, g := range opts.Groups {
		if g != "+" {
			if err := CheckID(g); err != nil {
				return nil, fmt.Errorf("check sparkplug host options: group: %w", err)
			}
		}
	}
	if opts.HostID != "" {
		if err := CheckID(opts.HostID); err != nil {
			return nil, fmt.Errorf("check sparkplug host options: host id: %w", err)
		}
	}
	if opts.TagTemplate == "" {
		opts.TagTemplate = def.TagTemplate
	}
	n, err := newNamer(opts.TagTemplate)
	if err != nil {
		return nil, fmt.Errorf("check sparkplug host options: %w", err)
	}
	if opts.Name == "" {
		opts.Name = def.Name
	}
	if opts.ClientID == "" {
		opts.ClientID = "pith-sparkplug-" + opts.Name
	}
	if opts.RebirthWait <= 0 {
		opts.RebirthWait = def.RebirthWait
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = def.KeepAlive
	}
	if opts.ReconnectDelay <= 0 {
		opts.ReconnectDelay = def.ReconnectDelay
	}
	if opts.BatchDelay <= 0 {
		opts.BatchDelay = def.BatchDelay
	}
	if opts.MaxPending <= 0 {
		opts.MaxPending = def.MaxPending
	}
	if opts.Logger == nil {
		opts.Logger = def.Logger
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	h := &Host{sink: sink, opts: opts}
	h.st = newHostState(n, opts.RebirthWait, &h.stats, opts.Logger)
	_, h.st.textOK = sink.(ingest.TextSink)
	h.st.stored = opts.Stored
	return h, nil
}

// Stats returns the live counters.
func (h *Host) Stats() *HostStats { return &h.stats }

// Name returns the host's name.
func (h *Host) Name() string { return h.opts.Name }

// stateTopic is the host's STATE topic.
func (h *Host) stateTopic() string { return Topic{Type: STATE, Host: h.opts.HostID}.String() }

// StatePayload is the Sparkplug 3.0 STATE message body.
func StatePayload(online bool, ms int64) []byte {
	b, _ := json.Marshal(struct {
		Online    bool  `json:"online"`
		Timestamp int64 `json:"timestamp"`
	}{online, ms})
	return b
}

// Run connects, subscribes and stores values until ctx ends,
// reconnecting whenever the broker goes away. It returns nil when ctx
// ends, or an error when the options cannot be used.
func (h *Host) Run(ctx context.Context) error {
	u, err := url.Parse(h.opts.Broker)
	if err != nil {
		return fmt.Errorf("parse sparkplug broker url: %w", err)
	}
	log := h.opts.Logger
	var subs []paho.SubscribeOptions
	for _, g := range h.opts.Groups {
		subs = append(subs, paho.SubscribeOptions{Topic: Namespace + "/" + g + "/#", QoS: 1})
	}
	lost := func(why string) {
		h.mu.Lock()
		pts := h.st.lost(h.opts.Now())
		h.queue(pts)
		h.queueText(h.st.texts)
		n := len(pts) + len(h.st.texts)
		h.mu.Unlock()
		if n > 0 {
			log.Warn("sparkplug host lost the broker: metrics turned bad", "host", h.opts.Name, "values", n, "why", why)
		}
	}
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		TlsCfg:                        h.opts.TLS,
		KeepAlive:                     uint16(h.opts.KeepAlive / time.Second),
		CleanStartOnInitialConnection: true,
		SessionExpiryInterval:         0,
		ReconnectBackoff:              autopaho.NewConstantBackoff(h.opts.ReconnectDelay),
		ConnectPacketBuilder: func(c *paho.Connect, _ *url.URL) (*paho.Connect, error) {
			if h.opts.HostID == "" {
				return c, nil
			}
			h.stateMu.Lock()
			h.stateTS = h.opts.Now().UnixMilli()
			c.WillMessage = &paho.WillMessage{Retain: true, QoS: 1, Topic: h.stateTopic(), Payload: StatePayload(false, h.stateTS)}
			h.stateMu.Unlock()
			return c, nil
		},
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			h.stats.Connects.Add(1)
			log.Info("sparkplug host connected", "host", h.opts.Name, "broker", h.opts.Broker)
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			s := subs
			if h.opts.HostID != "" {
				s = append(s[:len(s):len(s)], paho.SubscribeOptions{Topic: h.stateTopic(), QoS: 1})
			}
			if _, err := cm.Subscribe(sctx, &paho.Subscribe{Subscriptions: s}); err != nil {
				h.stats.LastError.Store("subscribe: " + err.Error())
				log.Warn("sparkplug subscribe failed", "host", h.opts.Name, "err", err)
				return
			}
			h.stats.Subscribed.Add(1)
			h.mu.Lock()
			h.cm = cm
			h.mu.Unlock()
			if h.opts.HostID == "" {
				return
			}
			h.stateMu.Lock()
			ts := h.stateTS
			h.stateMu.Unlock()
			if _, err := cm.Publish(sctx, &paho.Publish{Topic: h.stateTopic(), QoS: 1, Retain: true, Payload: StatePayload(true, ts)}); err != nil {
				h.stats.LastError.Store("publish STATE: " + err.Error())
				log.Warn("sparkplug STATE birth not published", "host", h.opts.Name, "err", err)
			}
		},
		OnConnectError: func(err error) {
			h.stats.LastError.Store("connect: " + err.Error())
			log.Warn("sparkplug connect", "host", h.opts.Name, "broker", h.opts.Broker, "err", err)
		},
		ClientConfig: paho.ClientConfig{
			ClientID: h.opts.ClientID,
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				h.receive(ctx, pr)
				return true, nil
			}},
			OnClientError: func(err error) {
				h.stats.LastError.Store("client: " + err.Error())
				lost(err.Error())
			},
			OnServerDisconnect: func(d *paho.Disconnect) {
				lost(fmt.Sprintf("server disconnect, reason %d", d.ReasonCode))
			},
		},
	}
	if h.opts.Username != "" {
		cfg.ConnectUsername = h.opts.Username
		cfg.ConnectPassword = []byte(h.opts.Password)
	}
	// The connection outlives ctx by the STATE death and the disconnect.
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	cm, err := autopaho.NewConnection(cctx, cfg)
	if err != nil {
		return fmt.Errorf("start sparkplug connection: %w", err)
	}
	h.flushLoop(ctx)
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if h.opts.HostID != "" {
		h.stateMu.Lock()
		ts := h.stateTS
		h.stateMu.Unlock()
		// A clean stop sends no will: say offline ourselves.
		_, _ = cm.Publish(dctx, &paho.Publish{Topic: h.stateTopic(), QoS: 1, Retain: true, Payload: StatePayload(false, ts)})
	}
	_ = cm.Disconnect(dctx)
	return nil
}

// receive handles one message in order of arrival (paho calls it from
// one goroutine), queues its values and publishes the commands it needs.
func (h *Host) receive(ctx context.Context, pr paho.PublishReceived) {
	if h.opts.HostID != "" && pr.Packet.Topic == h.stateTopic() {
		h.ownState(ctx, pr)
		return
	}
	h.mu.Lock()
	pts, cmds := h.st.handle(pr.Packet.Topic, pr.Packet.Payload, h.opts.Now())
	h.queue(pts)
	h.queueText(h.st.texts)
	h.units = append(h.units, h.st.units...)
	var out []command
	if len(cmds) > 0 {
		out = append(out, cmds...)
	}
	h.mu.Unlock()
	for _, c := range out {
		// The callback must not wait for the broker's answer: publish
		// at QoS 0, as the specification has commands sent.
		_, err := pr.Client.PublishWithOptions(ctx, &paho.Publish{Topic: c.topic, QoS: 0, Payload: c.payload},
			paho.PublishOptions{Method: paho.PublishMethod_AsyncSend})
		if err != nil && !errors.Is(err, context.Canceled) {
			h.stats.LastError.Store("publish " + c.topic + ": " + err.Error())
			h.opts.Logger.Warn("sparkplug command not published", "topic", c.topic, "err", err)
		}
	}
}

// ownState answers an offline STATE of this host while it is online (the
// late will of an earlier connection the broker only now gave up) with
// the birth again, as the specification asks.
func (h *Host) ownState(ctx context.Context, pr paho.PublishReceived) {
	var st struct {
		Online bool `json:"online"`
	}
	if json.Unmarshal(pr.Packet.Payload, &st) != nil || st.Online || ctx.Err() != nil {
		return
	}
	h.stateMu.Lock()
	ts := h.stateTS
	h.stateMu.Unlock()
	h.opts.Logger.Info("sparkplug STATE offline seen while online: published again", "host", h.opts.Name)
	_, err := pr.Client.PublishWithOptions(ctx, &paho.Publish{Topic: h.stateTopic(), QoS: 1, Retain: true, Payload: StatePayload(true, ts)},
		paho.PublishOptions{Method: paho.PublishMethod_AsyncSend})
	if err != nil {
		h.stats.LastError.Store("publish STATE: " + err.Error())
	}
}

// queue adds points to the pending batch; h.mu is held.
func (h *Host) queue(pts []model.Point) {
	if len(pts) == 0 {
		return
	}
	room := h.opts.MaxPending - len(h.pending)
	if room < len(pts) {
		h.stats.Dropped.Add(int64(len(pts) - max(room, 0)))
		pts = pts[:max(room, 0)]
	}
	h.pending = append(h.pending, pts...)
}

// queueText adds text points to the pending batch; h.mu is held. Text
// counts against MaxPending with the numbers.
func (h *Host) queueText(pts []model.TextPoint) {
	if len(pts) == 0 {
		return
	}
	room := h.opts.MaxPending - len(h.pending) - len(h.texts)
	if room < len(pts) {
		h.stats.Dropped.Add(int64(len(pts) - max(room, 0)))
		pts = pts[:max(room, 0)]
	}
	h.texts = append(h.texts, pts...)
}

// UnitSink is a sink that keeps tags' engineering units (the agent's
// push road does, in the tag table's metadata): the units births declare
// in their metrics' properties go there.
type UnitSink interface {
	// SetUnit sets the unit of tag, defining the tag when it is new.
	SetUnit(tag, unit string) error
}

// flushLoop writes the pending values every BatchDelay until ctx ends,
// then once more.
func (h *Host) flushLoop(ctx context.Context) {
	tick := time.NewTicker(h.opts.BatchDelay)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			h.flush(fctx)
			cancel()
			return
		case <-tick.C:
			h.flush(ctx)
		}
	}
}

// Flush writes the pending values now (tests use it).
func (h *Host) Flush(ctx context.Context) { h.flush(ctx) }

func (h *Host) flush(ctx context.Context) {
	h.mu.Lock()
	pts, texts, units := h.pending, h.texts, h.units
	h.pending, h.texts, h.units = nil, nil, nil
	h.mu.Unlock()
	defer h.setUnits(units)
	for len(pts)+len(texts) > 0 {
		err := h.opts.Gate.Admit(pts)
		if err == nil {
			err = h.opts.Gate.AdmitText(texts)
		}
		if err == nil {
			if len(texts) > 0 {
				err = h.sink.(ingest.TextSink).WriteMixed(ctx, pts, texts)
			} else {
				err = h.sink.Write(ctx, pts)
			}
		}
		if err == nil {
			h.stats.Points.Add(int64(len(pts) + len(texts)))
			return
		}
		var tooMany *ingest.TooManyNewTagsError
		var pe *model.PointError
		switch {
		case errors.As(err, &tooMany):
			pts = h.dropTag(pts, tooMany.Tag)
			texts = h.dropTextTag(texts, tooMany.Tag)
			continue
		case errors.As(err, &pe) && pe.Index < len(pts):
			h.opts.Logger.Warn("sparkplug value refused", "tag", pe.Tag, "err", pe.Err)
			pts = append(pts[:pe.Index], pts[pe.Index+1:]...)
			h.stats.Refused.Add(1)
			continue
		case errors.As(err, &pe) && pe.Index < len(pts)+len(texts):
			h.opts.Logger.Warn("sparkplug value refused", "tag", pe.Tag, "err", pe.Err)
			i := pe.Index - len(pts)
			texts = append(texts[:i], texts[i+1:]...)
			h.stats.Refused.Add(1)
			continue
		}
		// The store failed (a full disk, a closed store): keep the values
		// in front of what arrived meanwhile and retry at the next tick.
		h.stats.LastError.Store("store: " + err.Error())
		h.opts.Logger.Warn("sparkplug values not stored, retrying", "host", h.opts.Name, "values", len(pts), "err", err)
		h.mu.Lock()
		h.pending = append(pts, h.pending...)
		h.texts = append(texts, h.texts...)
		if over := len(h.pending) + len(h.texts) - h.opts.MaxPending; over > 0 {
			n := min(over, len(h.pending))
			h.pending = h.pending[n:]
			h.texts = h.texts[over-n:]
			h.stats.Dropped.Add(int64(over))
		}
		h.mu.Unlock()
		return
	}
}

// setUnits hands the units births declared to the sink, when it keeps
// units, once their tags' values went to the store.
func (h *Host) setUnits(units []unitDecl) {
	us, ok := h.sink.(UnitSink)
	if !ok {
		return
	}
	for _, u := range units {
		if err := us.SetUnit(u.tag, u.unit); err != nil {
			h.opts.Logger.Warn("sparkplug unit not kept", "tag", u.tag, "unit", u.unit, "err", err)
		}
	}
}

func (h *Host) dropTextTag(pts []model.TextPoint, tag string) []model.TextPoint {
	out := pts[:0]
	for _, p := range pts {
		if p.Tag == tag {
			h.stats.Refused.Add(1)
			continue
		}
		out = append(out, p)
	}
	return out
}

func (h *Host) dropTag(pts []model.Point, tag string) []model.Point {
	out := pts[:0]
	for _, p := range pts {
		if p.Tag == tag {
			h.stats.Refused.Add(1)
			continue
		}
		out = append(out, p)
	}
	return out
}
