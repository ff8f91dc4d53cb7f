package sparkplug

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/pith-historian/pith/internal/atomicfile"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/tag"
)

// Table is the part of the tag table an edge node reads;
// *tag.Table implements it. Its methods are safe for concurrent use.
type Table interface {
	// Latest returns the current value of every tag when no name is given.
	Latest(names ...string) ([]tag.Value, error)
	// Defs returns every tag's definition (for the units a birth declares).
	Defs() []tag.Def
	// Subscribe delivers the table's changes from now on.
	Subscribe(opts tag.SubOptions) *tag.Subscription
	// Unsubscribe stops the deliveries.
	Unsubscribe(s *tag.Subscription)
}

var _ Table = (*tag.Table)(nil)

// Controller writes a tag to its device through Pith's audited control
// path (limits, alarms, the plant's log); the agent passes the same one
// POST /api/v1/control uses. Control is safe for concurrent use and
// returns once the device acknowledged.
type Controller interface {
	Control(ctx context.Context, name string, value float64, who string) error
}

// EdgeOptions configure an edge node.
type EdgeOptions struct {
	Name           string        // names the edge node in logs
	Broker         string        // mqtt://host:1883 or tls://host:8883
	ClientID       string        // MQTT client id; "" is pith-sparkplug-<Name>
	Username       string        // "" connects without credentials
	Password       string        // sent when Username is set
	TLS            *tls.Config   // for tls:// brokers; nil uses the system roots
	Group          string        // the Sparkplug group id
	Node           string        // the edge node id
	Device         string        // "": tags are node metrics; else the device id they are published under (DBIRTH, DDATA, DCMD)
	Tags           []string      // patterns of the tags published ("*" any run of characters, "?" one)
	Writable       []string      // patterns of the published tags an NCMD may write
	Interval       time.Duration // NDATA period: changes within it go in one message
	KeepAlive      time.Duration // MQTT keep-alive
	ReconnectDelay time.Duration // wait between connection attempts
	ControlTimeout time.Duration // the longest a commanded write waits for its device
	BdSeqFile      string        // keeps bdSeq across restarts; "" keeps it in memory only
	PrimaryHost    string        // the host id whose STATE gates the births; "" publishes at once
	Logger         *slog.Logger
}

// DefaultEdgeOptions returns an edge node's defaults for everything but
// the broker, ids and tags.
func DefaultEdgeOptions() EdgeOptions {
	return EdgeOptions{
		Name:           "edge",
		Broker:         "mqtt://127.0.0.1:1883",
		Interval:       250 * time.Millisecond,
		KeepAlive:      30 * time.Second,
		ReconnectDelay: 5 * time.Second,
		ControlTimeout: 10 * time.Second,
		Logger:         slog.New(slog.DiscardHandler),
	}
}

// EdgeStats are an edge node's counters, read with atomic loads.
type EdgeStats struct {
	Births    atomic.Int64 // NBIRTHs published
	Data      atomic.Int64 // NDATA messages published
	Values    atomic.Int64 // metric values published in NDATA
	Commands  atomic.Int64 // NCMD and DCMD messages received
	Writes    atomic.Int64 // commanded writes the device acknowledged
	Refused   atomic.Int64 // commanded writes refused (not writable, unknown, failed)
	Lost      atomic.Int64 // NDATA messages not published (the broker was away; a birth follows)
	Connects  atomic.Int64 // successful connections, reconnections included
	LastError atomic.Value // string
}

// Edge is a Sparkplug B edge node publishing Pith's tags: an NBIRTH
// (followed by a DBIRTH when Device is set, which then holds the tags and
// takes DDATA and DCMD in place of NDATA and NCMD) with every tag its
// patterns match (metric name: the tag name with '/' for
// '.', an alias each, type Double, or String for a text tag; the tag's
// unit as the property engUnit), NDATA with the changes of each
// Interval by alias, an NDEATH as its will, a new NBIRTH when a host
// asks (NCMD Node Control/Rebirth) or a new tag matches, and commanded
// writes (NCMD) of tags matching Writable through the Controller.
type Edge struct {
	tab  Table
	ctl  Controller
	opts EdgeOptions

	stats EdgeStats

	needBirth  atomic.Bool   // set on each connection and on a rebirth request
	kick       chan struct{} // wakes the loop for a birth
	hostOnline atomic.Bool   // the primary host is online (always true without one)
	hostTS     atomic.Int64  // the timestamp of the primary host's last online STATE
	hostGone   chan struct{} // the primary host went offline: end the session
	cmds       chan []byte   // NCMD payloads for the command worker

	// Owned by the loop goroutine.
	seq     uint64
	aliases map[string]uint64 // tag -> alias, stable for the process's life
	byID    map[tag.ID]uint64 // tag ID -> alias of a born metric, 0 when not published
	known   map[tag.ID]bool   // tag IDs already matched against the patterns

	mu       sync.Mutex        // guards byMetric, byAlias, bdSeq
	byMetric map[string]string // metric name -> tag, as last born
	byAlias  map[uint64]string // alias -> tag, as last born
	bdSeq    uint64
}

// NewEdge checks opts and returns an edge node; Run starts it. ctl may be
// nil: every command write is then refused.
func NewEdge(tab Table, ctl Controller, opts EdgeOptions) (*Edge, error) {
	def := DefaultEdgeOptions()
	if opts.Broker == "" {
		return nil, errors.New("check sparkplug edge options: broker is empty")
	}
	if err := CheckID(opts.Group); err != nil {
		return nil, fmt.Errorf("check sparkplug edge options: group: %w", err)
	}
	if err := CheckID(opts.Node); err != nil {
		return nil, fmt.Errorf("check sparkplug edge options: node: %w", err)
	}
	if opts.Device != "" {
		if err := CheckID(opts.Device); err != nil {
			return nil, fmt.Errorf("check sparkplug edge options: device: %w", err)
		}
	}
	if len(opts.Tags) == 0 {
		return nil, errors.New("check sparkplug edge options: no tag patterns")
	}
	if opts.PrimaryHost != "" {
		if err := CheckID(opts.PrimaryHost); err != nil {
			return nil, fmt.Errorf("check sparkplug edge options: primary host: %w", err)
		}
	}
	if opts.Name == "" {
		opts.Name = def.Name
	}
	if opts.ClientID == "" {
		opts.ClientID = "pith-sparkplug-" + opts.Name
	}
	if opts.Interval <= 0 {
		opts.Interval = def.Interval
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = def.KeepAlive
	}
	if opts.ReconnectDelay <= 0 {
		opts.ReconnectDelay = def.ReconnectDelay
	}
	if opts.ControlTimeout <= 0 {
		opts.ControlTimeout = def.ControlTimeout
	}
	if opts.Logger == nil {
		opts.Logger = def.Logger
	}
	var bdSeq uint64
	if opts.BdSeqFile != "" {
		b, err := os.ReadFile(opts.BdSeqFile)
		switch {
		case err == nil:
			if bdSeq, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 8); err != nil {
				return nil, fmt.Errorf("read sparkplug bdSeq file %s: %w", opts.BdSeqFile, err)
			}
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("read sparkplug bdSeq file: %w", err)
		}
	}
	e := &Edge{hostGone: make(chan struct{}, 1), bdSeq: bdSeq, tab: tab, ctl: ctl, opts: opts, kick: make(chan struct{}, 1), cmds: make(chan []byte, 64),
		aliases: map[string]uint64{}, byID: map[tag.ID]uint64{}, known: map[tag.ID]bool{},
		byMetric: map[string]string{}, byAlias: map[uint64]string{}}
	e.hostOnline.Store(opts.PrimaryHost == "")
	return e, nil
}

// Stats returns the live counters.
func (e *Edge) Stats() *EdgeStats { return &e.stats }

// MetricName is the Sparkplug metric name of a tag: '.' becomes '/', the
// specification's folder separator.
func MetricName(tagName string) string { return strings.ReplaceAll(tagName, ".", "/") }

// Match reports whether name matches one of the patterns: '*' stands for
// any run of characters (dots included), '?' for one.
func Match(patterns []string, name string) bool {
	for _, p := range patterns {
		if glob(p, name) {
			return true
		}
	}
	return false
}

// glob matches name against one pattern, without backtracking blow-up:
// the last '*' seen is the only resume point.
func glob(p, s string) bool {
	pi, si, star, mark := 0, 0, -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func (e *Edge) topic(t MsgType) string {
	return Topic{Group: e.opts.Group, Type: t, Node: e.opts.Node}.String()
}

// devTopic is the topic of a device message of the configured device.
func (e *Edge) devTopic(t MsgType) string {
	return Topic{Group: e.opts.Group, Type: t, Node: e.opts.Node, Device: e.opts.Device}.String()
}

// dataTopic is where the tags' values go: NDATA, or DDATA of the device.
func (e *Edge) dataTopic() string {
	if e.opts.Device != "" {
		return e.devTopic(DDATA)
	}
	return e.topic(NDATA)
}

// deathPayload is the NDEATH of a session.
func deathPayload(bdSeq uint64) []byte {
	return Append(nil, &Payload{Metrics: []Metric{{Name: []byte(MetricBdSeq), Datatype: TypeUInt64, Kind: KindLong, Bits: bdSeq}}})
}

// Run connects and publishes until ctx ends, reconnecting (with a new
// birth) whenever the broker goes away. With a PrimaryHost, births wait
// for its online STATE, and its offline STATE ends the session (NDEATH,
// disconnect) before a new one waits for it again. It returns nil when
// ctx ends.
func (e *Edge) Run(ctx context.Context) error {
	u, err := url.Parse(e.opts.Broker)
	if err != nil {
		return fmt.Errorf("parse sparkplug broker url: %w", err)
	}
	sub := e.tab.Subscribe(tag.SubOptions{Name: "sparkplug." + e.opts.Name, Mode: tag.Coalesce})
	defer e.tab.Unsubscribe(sub)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.commands(ctx)
	}()
	defer wg.Wait()
	for {
		gone, err := e.session(ctx, u, sub)
		if err != nil || !gone {
			return err
		}
		e.opts.Logger.Info("sparkplug primary host offline: session ended", "edge", e.opts.Name, "host", e.opts.PrimaryHost)
	}
}

func (e *Edge) stateTopic() string { return Topic{Type: STATE, Host: e.opts.PrimaryHost}.String() }

// session runs one MQTT connection (with its own reconnections) until ctx
// ends or the primary host goes offline (gone).
func (e *Edge) session(ctx context.Context, u *url.URL, sub *tag.Subscription) (gone bool, err error) {
	log := e.opts.Logger
	cmdTopic, devCmdTopic := e.topic(NCMD), ""
	if e.opts.Device != "" {
		devCmdTopic = e.devTopic(DCMD)
	}
	cfg := autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		TlsCfg:                        e.opts.TLS,
		KeepAlive:                     uint16(e.opts.KeepAlive / time.Second),
		CleanStartOnInitialConnection: true,
		ReconnectBackoff:              autopaho.NewConstantBackoff(e.opts.ReconnectDelay),
		ConnectPacketBuilder: func(c *paho.Connect, _ *url.URL) (*paho.Connect, error) {
			// Each connection has its own bdSeq, in its will and its
			// birth, so a host can tell a late will from the current one.
			e.mu.Lock()
			e.bdSeq = (e.bdSeq + 1) % 256
			bd := e.bdSeq
			e.mu.Unlock()
			if e.opts.BdSeqFile != "" {
				// Kept across restarts, so that a host never takes the
				// late will of a session before the restart for this one's.
				if err := atomicfile.Write(e.opts.BdSeqFile, []byte(strconv.FormatUint(bd, 10)+"\n"), 0o644); err != nil {
					e.stats.LastError.Store("bdSeq file: " + err.Error())
					log.Warn("sparkplug bdSeq not saved", "edge", e.opts.Name, "err", err)
				}
			}
			c.WillMessage = &paho.WillMessage{QoS: 1, Topic: e.topic(NDEATH), Payload: deathPayload(bd)}
			return c, nil
		},
		OnConnectionUp: func(cm *autopaho.ConnectionManager, _ *paho.Connack) {
			e.stats.Connects.Add(1)
			log.Info("sparkplug edge node connected", "edge", e.opts.Name, "broker", e.opts.Broker)
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			subs := []paho.SubscribeOptions{
				{Topic: cmdTopic, QoS: 1},
				{Topic: Topic{Group: e.opts.Group, Type: DCMD, Node: e.opts.Node}.String() + "/+", QoS: 1},
			}
			if e.opts.PrimaryHost != "" {
				// Its retained STATE, delivered on subscribing, says
				// whether to be born now.
				e.hostOnline.Store(false)
				subs = append(subs, paho.SubscribeOptions{Topic: e.stateTopic(), QoS: 1})
			}
			if _, err := cm.Subscribe(sctx, &paho.Subscribe{Subscriptions: subs}); err != nil {
				e.stats.LastError.Store("subscribe: " + err.Error())
				log.Warn("sparkplug edge subscribe failed", "edge", e.opts.Name, "err", err)
			}
			e.rebirth()
		},
		OnConnectError: func(err error) {
			e.stats.LastError.Store("connect: " + err.Error())
			log.Warn("sparkplug edge connect", "edge", e.opts.Name, "broker", e.opts.Broker, "err", err)
		},
		ClientConfig: paho.ClientConfig{
			ClientID: e.opts.ClientID,
			OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
				if e.opts.PrimaryHost != "" && pr.Packet.Topic == e.stateTopic() {
					e.hostState(pr.Packet.Payload)
					return true, nil
				}
				e.stats.Commands.Add(1)
				if pr.Packet.Topic != cmdTopic && pr.Packet.Topic != devCmdTopic {
					e.stats.Refused.Add(1)
					log.Info("sparkplug DCMD refused: not the edge node's device", "edge", e.opts.Name, "topic", pr.Packet.Topic)
					return true, nil
				}
				select {
				case e.cmds <- append([]byte(nil), pr.Packet.Payload...):
				default:
					e.stats.Refused.Add(1)
					log.Warn("sparkplug NCMD dropped: commands queue full", "edge", e.opts.Name)
				}
				return true, nil
			}},
			OnClientError: func(err error) { e.stats.LastError.Store("client: " + err.Error()) },
		},
	}
	if e.opts.Username != "" {
		cfg.ConnectUsername = e.opts.Username
		cfg.ConnectPassword = []byte(e.opts.Password)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	defer ccancel()
	cm, err := autopaho.NewConnection(cctx, cfg)
	if err != nil {
		return false, fmt.Errorf("start sparkplug connection: %w", err)
	}
	gone = e.loop(ctx, cm, sub)
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// A clean end sends no will: publish the deaths ourselves. The loop
	// has ended, so seq is ours.
	if e.opts.Device != "" && !gone {
		e.seq = (e.seq + 1) % 256
		_, _ = cm.Publish(dctx, &paho.Publish{Topic: e.devTopic(DDEATH), QoS: 0,
			Payload: Append(nil, &Payload{Timestamp: uint64(time.Now().UnixMilli()), HasSeq: true, Seq: e.seq})})
	}
	e.mu.Lock()
	bd := e.bdSeq
	e.mu.Unlock()
	_, _ = cm.Publish(dctx, &paho.Publish{Topic: e.topic(NDEATH), QoS: 1, Payload: deathPayload(bd)})
	_ = cm.Disconnect(dctx)
	return gone, nil
}

// hostState applies a STATE of the primary host: online (newer than the
// last) allows the births; offline, no older than the last online, ends
// the session.
func (e *Edge) hostState(b []byte) {
	var st struct {
		Online    bool  `json:"online"`
		Timestamp int64 `json:"timestamp"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		e.opts.Logger.Warn("sparkplug primary host STATE not readable", "edge", e.opts.Name, "err", err)
		return
	}
	switch {
	case st.Online && st.Timestamp >= e.hostTS.Load():
		e.hostTS.Store(st.Timestamp)
		if !e.hostOnline.Swap(true) {
			e.opts.Logger.Info("sparkplug primary host online", "edge", e.opts.Name, "host", e.opts.PrimaryHost)
			e.rebirth()
		}
	case !st.Online && st.Timestamp >= e.hostTS.Load() && e.hostOnline.Swap(false):
		select {
		case e.hostGone <- struct{}{}:
		default:
		}
	}
}

// rebirth asks the loop for a new NBIRTH.
func (e *Edge) rebirth() {
	e.needBirth.Store(true)
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// loop publishes births and data until ctx ends or the primary host
// goes offline (it then returns true); it alone owns seq and the alias
// maps. Nothing is published before the first birth of the session.
func (e *Edge) loop(ctx context.Context, cm *autopaho.ConnectionManager, sub *tag.Subscription) bool {
	tick := time.NewTicker(e.opts.Interval)
	defer tick.Stop()
	var buf []tag.Change
	born := false
	for {
		select {
		case <-ctx.Done():
			return false
		case <-e.hostGone:
			return true
		case <-e.kick:
		case <-tick.C:
		}
		if !e.hostOnline.Load() {
			continue // changes wait in the subscription, then the birth has them
		}
		if e.needBirth.Load() {
			e.needBirth.Store(false)
			sub.Take(buf[:0]) // the birth carries the current values
			if err := e.birth(ctx, cm); err != nil {
				e.needBirth.Store(true)
				e.stats.LastError.Store("birth: " + err.Error())
			} else {
				born = true
			}
			continue
		}
		if !born {
			continue
		}
		buf = sub.Take(buf[:0])
		if len(buf) == 0 {
			continue
		}
		if err := e.data(ctx, cm, buf); err != nil {
			e.stats.Lost.Add(1)
			e.stats.LastError.Store("data: " + err.Error())
			e.needBirth.Store(true) // the host may have missed it: start over
		}
	}
}

// publish sends one message at QoS 0, as the specification has births
// and data sent.
func publish(ctx context.Context, cm *autopaho.ConnectionManager, topic string, b []byte) error {
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := cm.Publish(pctx, &paho.Publish{Topic: topic, QoS: 0, Payload: b})
	return err
}

// birth publishes an NBIRTH with every matching tag.
func (e *Edge) birth(ctx context.Context, cm *autopaho.ConnectionManager) error {
	vals, err := e.tab.Latest()
	if err != nil {
		return err
	}
	e.mu.Lock()
	bd := e.bdSeq
	e.mu.Unlock()
	now := uint64(time.Now().UnixMilli())
	p := Payload{Timestamp: now, HasSeq: true, Seq: 0, Metrics: []Metric{
		{Name: []byte(MetricBdSeq), Datatype: TypeUInt64, Kind: KindLong, Bits: bd},
		{Name: []byte(MetricRebirth), Datatype: TypeBoolean, Kind: KindBool, Bits: 0},
	}}
	// With a device, the tags go in its DBIRTH after the NBIRTH.
	tp := &p
	dev := Payload{Timestamp: now, HasSeq: true, Seq: 1}
	if e.opts.Device != "" {
		tp = &dev
	}
	byMetric := map[string]string{}
	byAlias := map[uint64]string{}
	units := map[string]string{}
	for _, d := range e.tab.Defs() {
		if d.Unit != "" && Match(e.opts.Tags, d.Name) {
			units[d.Name] = d.Unit
		}
	}
	for _, v := range vals {
		if !Match(e.opts.Tags, v.Tag) {
			continue
		}
		a, ok := e.aliases[v.Tag]
		if !ok {
			a = uint64(len(e.aliases) + 1)
			e.aliases[v.Tag] = a
		}
		name := MetricName(v.Tag)
		byMetric[name], byAlias[a] = v.Tag, v.Tag
		m := Metric{Name: []byte(name), Alias: a, HasAlias: true, Datatype: TypeDouble}
		if v.IsText {
			m.Datatype = TypeString
			setText(&m, v.T, v.Text, v.Q, v.Has)
		} else {
			setValue(&m, v.T, v.V, v.Q, v.Has)
		}
		if u := units[v.Tag]; u != "" {
			m.Properties = AppendUnitProperty(nil, u)
		}
		tp.Metrics = append(tp.Metrics, m)
	}
	e.byID, e.known = map[tag.ID]uint64{}, map[tag.ID]bool{}
	if err := publish(ctx, cm, e.topic(NBIRTH), Append(nil, &p)); err != nil {
		return err
	}
	e.seq = 0
	if e.opts.Device != "" {
		if err := publish(ctx, cm, e.devTopic(DBIRTH), Append(nil, &dev)); err != nil {
			return err
		}
		e.seq = 1
	}
	e.mu.Lock()
	e.byMetric, e.byAlias = byMetric, byAlias
	e.mu.Unlock()
	e.stats.Births.Add(1)
	e.opts.Logger.Info("sparkplug birth published", "edge", e.opts.Name, "device", e.opts.Device, "metrics", len(byMetric), "bdSeq", bd)
	return nil
}

// setValue sets a published metric's value: a bad or absent one is null.
func setValue(m *Metric, t int64, v float64, q model.Quality, has bool) {
	if t > 0 {
		m.Timestamp = uint64(t)
	}
	if !has || q == model.QualityBad {
		m.IsNull = true
		return
	}
	m.Kind, m.Bits = KindDouble, math.Float64bits(v)
}

// setText sets a published text metric's value (a String metric): a bad
// or absent one is null.
func setText(m *Metric, t int64, text string, q model.Quality, has bool) {
	if t > 0 {
		m.Timestamp = uint64(t)
	}
	if !has || q == model.QualityBad {
		m.IsNull = true
		return
	}
	m.Kind, m.Raw = KindString, []byte(text)
}

// data publishes the changes of published tags as one NDATA by alias; a
// matching tag the birth did not hold makes a new birth instead.
func (e *Edge) data(ctx context.Context, cm *autopaho.ConnectionManager, cs []tag.Change) error {
	p := Payload{Timestamp: uint64(time.Now().UnixMilli()), HasSeq: true}
	for _, c := range cs {
		a, ok := e.byID[c.ID]
		if !ok && !e.known[c.ID] {
			e.known[c.ID] = true
			if Match(e.opts.Tags, c.Tag) {
				e.mu.Lock()
				_, born := e.byMetric[MetricName(c.Tag)]
				e.mu.Unlock()
				if !born {
					e.rebirth() // a new tag: metrics are only declared by a birth
					return nil
				}
				a = e.aliases[c.Tag]
				e.byID[c.ID] = a
			}
		}
		if a == 0 {
			continue
		}
		// The specification lets data leave the type out, but decoders
		// such as Eclipse Tahu's read the value by it.
		m := Metric{Alias: a, HasAlias: true, Datatype: TypeDouble}
		if c.IsText {
			// A tag's kind is fixed by its first stored value, so a text
			// tag was born a String metric (or unborn, and this is its
			// first value: the birth that follows declares it).
			m.Datatype = TypeString
			setText(&m, c.T, c.Text, c.Q, c.Has)
		} else {
			setValue(&m, c.T, c.V, c.Q, c.Has)
		}
		p.Metrics = append(p.Metrics, m)
	}
	if len(p.Metrics) == 0 {
		return nil
	}
	e.seq = (e.seq + 1) % 256
	p.Seq = e.seq
	if err := publish(ctx, cm, e.dataTopic(), Append(nil, &p)); err != nil {
		return err
	}
	e.stats.Data.Add(1)
	e.stats.Values.Add(int64(len(p.Metrics)))
	return nil
}

// commands applies NCMDs in order: rebirth requests, and writes of
// writable tags through the Controller.
func (e *Edge) commands(ctx context.Context) {
	var p Payload
	for {
		var b []byte
		select {
		case <-ctx.Done():
			return
		case b = <-e.cmds:
		}
		if err := DecodeMessage(b, &p); err != nil {
			e.stats.Refused.Add(1)
			e.opts.Logger.Warn("sparkplug NCMD not readable", "edge", e.opts.Name, "err", err)
			continue
		}
		for i := range p.Metrics {
			e.command(ctx, &p.Metrics[i])
		}
	}
}

// command applies one metric of an NCMD.
func (e *Edge) command(ctx context.Context, m *Metric) {
	log := e.opts.Logger
	if string(m.Name) == MetricRebirth {
		if v, _ := m.Float(TypeBoolean); v != 0 {
			log.Info("sparkplug rebirth requested", "edge", e.opts.Name)
			e.rebirth()
		}
		return
	}
	e.mu.Lock()
	var name string
	if m.Name != nil {
		name = e.byMetric[string(m.Name)]
	} else if m.HasAlias {
		name = e.byAlias[m.Alias]
	}
	e.mu.Unlock()
	refuse := func(why string, args ...any) {
		e.stats.Refused.Add(1)
		log.Warn("sparkplug NCMD write refused", append([]any{"edge", e.opts.Name, "metric", string(m.Name), "alias", m.Alias, "why", why}, args...)...)
	}
	switch {
	case name == "":
		refuse("not a metric of the birth")
		return
	case !Match(e.opts.Writable, name):
		refuse("not writable", "tag", name)
		return
	case e.ctl == nil:
		refuse("no control path", "tag", name)
		return
	}
	v, why := m.Float(TypeDouble)
	if why != "" {
		refuse("value: "+why, "tag", name)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, e.opts.ControlTimeout)
	defer cancel()
	if err := e.ctl.Control(cctx, name, v, "sparkplug:"+e.opts.Name); err != nil {
		refuse("control: "+err.Error(), "tag", name)
		return
	}
	e.stats.Writes.Add(1)
}
