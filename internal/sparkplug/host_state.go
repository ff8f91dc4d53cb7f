package sparkplug

import (
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/ingest"
	"github.com/pith-historian/pith/internal/model"
)

// HostStats are a host application's counters, read with atomic loads.
type HostStats struct {
	Messages   atomic.Int64 // Sparkplug messages received
	Bad        atomic.Int64 // messages whose topic or payload could not be read
	Points     atomic.Int64 // values stored
	Deaths     atomic.Int64 // node and device deaths applied (their metrics turned bad)
	Stale      atomic.Int64 // NDEATHs ignored: their bdSeq is not the birth's
	Gaps       atomic.Int64 // sequence numbers out of order
	Rebirths   atomic.Int64 // rebirth requests sent
	Unborn     atomic.Int64 // data from a node or device whose birth Pith has not seen (dropped)
	Refused    atomic.Int64 // values the store or the new-tag cap refused (dropped)
	Dropped    atomic.Int64 // values dropped because the store failed for too long
	Skipped    [numSkipKinds]atomic.Int64
	Connects   atomic.Int64 // successful connections, reconnections included
	Subscribed atomic.Int64 // successful subscriptions (one per connection)
	LastError  atomic.Value // string
}

// SkippedBy returns the values skipped for one reason (SkipText, ...).
func (s *HostStats) SkippedBy(reason string) int64 { return s.Skipped[skipIndex(reason)].Load() }

// metricState is what the host knows of one metric since its birth.
type metricState struct {
	name  string   // the Sparkplug metric name
	tag   string   // "" when the metric is not archived (see skip)
	dt    DataType // declared by the birth
	skip  string   // why the metric is not archived; "" when it is
	last  float64  // the last value stored
	lastT int64    // its time, Unix ms
	has   bool     // last is a real value
	// text marks a String, Text or UUID metric archived as a text tag:
	// its last value is lastText.
	text     bool
	lastText string
	unit     string // the engineering unit its birth declared
}

// scope is the metrics of a node or of one of its devices.
type scope struct {
	online  bool
	byName  map[string]*metricState
	byAlias map[uint64]*metricState
	order   []*metricState // birth order, for deaths
}

func newScope() *scope {
	return &scope{online: true, byName: map[string]*metricState{}, byAlias: map[uint64]*metricState{}}
}

// node is what the host knows of one edge node.
type node struct {
	group, id   string
	scope       *scope // nil until the node's first NBIRTH
	devices     map[string]*scope
	bdSeq       uint64
	hasBdSeq    bool
	seq         uint64
	lastRebirth time.Time // zero: none since the last birth
}

// command is a message the host must publish after handling one.
type command struct {
	topic   string
	payload []byte
}

// hostState is the host application's knowledge of the edge nodes: it
// turns each message into the points to store and the commands to
// publish. It is used by one goroutine at a time (the host holds a lock).
type hostState struct {
	names       namer
	rebirthWait time.Duration
	log         *slog.Logger
	stats       *HostStats
	nodes       map[string]*node              // by group + "/" + node
	byTag       map[string]metricRef          // the archived metrics by tag, as last born
	waiters     map[*metricState][]*writeWait // control writes waiting for their value
	pl          Payload                       // reused for decoding
	pts         []model.Point                 // points of the current message
	texts       []model.TextPoint             // text points of the current message
	units       []unitDecl                    // units the current message declared anew
	textOK      bool                          // the sink stores text: String metrics become text tags
	cmds        []command
	stored      func(tag string) (int64, float64, bool) // HostOptions.Stored
	inBirth     bool                                    // the current message is a birth
	prev        *scope                                  // during a birth, the scope it replaces (nil: none)
}

// unitDecl is the engineering unit a birth declares for a tag.
type unitDecl struct{ tag, unit string }

func newHostState(n namer, rebirthWait time.Duration, stats *HostStats, log *slog.Logger) *hostState {
	return &hostState{names: n, rebirthWait: rebirthWait, stats: stats, log: log, nodes: map[string]*node{},
		byTag: map[string]metricRef{}, waiters: map[*metricState][]*writeWait{}}
}

// handle applies one message received at now. The points and commands
// returned, and h.texts and h.units, are valid until the next call.
func (h *hostState) handle(topic string, payload []byte, now time.Time) ([]model.Point, []command) {
	h.pts, h.cmds, h.texts, h.units = h.pts[:0], h.cmds[:0], h.texts[:0], h.units[:0]
	h.stats.Messages.Add(1)
	t, err := ParseTopic(topic)
	if err != nil {
		h.bad(topic, err)
		return nil, nil
	}
	switch t.Type {
	case STATE, NCMD, DCMD:
		return nil, nil // other hosts' states, and commands, are not data
	}
	if err := DecodeMessage(payload, &h.pl); err != nil {
		h.bad(topic, err)
		return nil, nil
	}
	key := t.Group + "/" + t.Node
	n := h.nodes[key]
	if n == nil {
		n = &node{group: t.Group, id: t.Node, devices: map[string]*scope{}}
		h.nodes[key] = n
	}
	nowMS := now.UnixMilli()
	switch t.Type {
	case NBIRTH:
		h.nodeBirth(n, nowMS)
	case NDEATH:
		h.nodeDeath(n, nowMS)
	case DBIRTH, DDEATH, NDATA, DDATA:
		if n.scope == nil || !n.scope.online {
			h.stats.Unborn.Add(1)
			h.rebirth(n, now, "data before the node's birth")
			return h.pts, h.cmds
		}
		h.checkSeq(n, t, now)
		switch t.Type {
		case DBIRTH:
			h.deviceBirth(n, t.Device, nowMS)
		case DDEATH:
			if d := n.devices[t.Device]; d != nil && d.online {
				h.death(d, nowMS)
			}
		case NDATA:
			h.data(n, n.scope, nowMS, now)
		case DDATA:
			d := n.devices[t.Device]
			if d == nil || !d.online {
				h.stats.Unborn.Add(1)
				h.rebirth(n, now, "data before the device's birth")
				return h.pts, h.cmds
			}
			h.data(n, d, nowMS, now)
		}
	}
	return h.pts, h.cmds
}

func (h *hostState) bad(topic string, err error) {
	h.stats.Bad.Add(1)
	h.stats.LastError.Store(err.Error())
	h.log.Debug("sparkplug message dropped", "topic", topic, "err", err)
}

// checkSeq compares a message's sequence number with the one expected
// and asks for a rebirth on a gap (the message is still applied: its
// values are real).
func (h *hostState) checkSeq(n *node, t Topic, now time.Time) {
	if !h.pl.HasSeq {
		return
	}
	want := (n.seq + 1) % 256
	got := h.pl.Seq
	n.seq = got
	if got != want {
		h.stats.Gaps.Add(1)
		h.log.Info("sparkplug sequence gap", "topic", t.String(), "want", want, "got", got)
		h.rebirth(n, now, fmt.Sprintf("sequence gap: want %d, got %d", want, got))
	}
}

// rebirth asks node n to publish its births again, at most once per
// rebirthWait until its next NBIRTH.
func (h *hostState) rebirth(n *node, now time.Time, why string) {
	if !n.lastRebirth.IsZero() && now.Sub(n.lastRebirth) < h.rebirthWait {
		return
	}
	n.lastRebirth = now
	h.stats.Rebirths.Add(1)
	h.log.Info("sparkplug rebirth requested", "group", n.group, "node", n.id, "why", why)
	h.cmds = append(h.cmds, command{topic: Topic{Group: n.group, Type: NCMD, Node: n.id}.String(), payload: RebirthPayload(now)})
}

// RebirthPayload is the NCMD asking an edge node for its births.
func RebirthPayload(now time.Time) []byte {
	p := Payload{Timestamp: uint64(now.UnixMilli()), Metrics: []Metric{{
		Name: []byte(MetricRebirth), Datatype: TypeBoolean, Kind: KindBool, Bits: 1,
	}}}
	return Append(nil, &p)
}

// Well-known metric names of the specification.
const (
	MetricBdSeq   = "bdSeq"
	MetricRebirth = "Node Control/Rebirth"
)

// control reports whether a metric is the protocol's own, not plant data.
func control(name string) bool {
	return name == MetricBdSeq || strings.HasPrefix(name, "Node Control/") || strings.HasPrefix(name, "Device Control/")
}

func (h *hostState) nodeBirth(n *node, nowMS int64) {
	old := n.scope
	n.scope, n.devices = newScope(), map[string]*scope{}
	defer h.retire(old, n.scope, nowMS)
	n.seq, n.lastRebirth, n.hasBdSeq = h.pl.Seq, time.Time{}, false
	for i := range h.pl.Metrics {
		if string(h.pl.Metrics[i].Name) == MetricBdSeq {
			n.bdSeq, n.hasBdSeq = h.pl.Metrics[i].Bits, true
		}
	}
	h.birth(n, "", n.scope, old, nowMS)
}

func (h *hostState) deviceBirth(n *node, dev string, nowMS int64) {
	old := n.devices[dev]
	d := newScope()
	n.devices[dev] = d
	h.birth(n, dev, d, old, nowMS)
	h.retire(old, d, nowMS)
}

// retire turns bad the metrics of an online scope that a new birth of it
// no longer declares: nothing will update them again.
func (h *hostState) retire(old, cur *scope, nowMS int64) {
	if old == nil || !old.online {
		return
	}
	for _, ms := range old.order {
		if _, ok := cur.byName[ms.name]; ok || ms.tag == "" || !ms.has {
			continue
		}
		h.badValue(ms, max(nowMS, ms.lastT))
	}
}

// birth declares the metrics of a scope, born again over old (nil at a
// first birth), and stores their values, but for those already stored
// (repeats).
func (h *hostState) birth(n *node, dev string, s, old *scope, nowMS int64) {
	h.inBirth, h.prev = true, old
	defer func() { h.inBirth, h.prev = false, nil }()
	for i := range h.pl.Metrics {
		m := &h.pl.Metrics[i]
		if m.Name == nil {
			h.skip(nil, SkipUnknown)
			continue
		}
		ms := s.byName[string(m.Name)]
		if ms == nil {
			ms = &metricState{name: string(m.Name), dt: m.Datatype}
			s.byName[ms.name] = ms
			s.order = append(s.order, ms)
			if !control(ms.name) {
				h.declare(n, dev, ms)
			}
		}
		if m.HasAlias {
			s.byAlias[m.Alias] = ms
		}
		if u, ok := m.Unit(); ok && ms.tag != "" && u != ms.unit {
			ms.unit = u
			h.units = append(h.units, unitDecl{tag: ms.tag, unit: u})
		}
		h.apply(ms, m, nowMS)
	}
}

// declare names a metric's tag, or decides it is not archived.
func (h *hostState) declare(n *node, dev string, ms *metricState) {
	switch {
	case ms.dt == TypeString || ms.dt == TypeText || ms.dt == TypeUUID:
		if h.textOK {
			ms.text = true
		} else {
			ms.skip = SkipText
		}
	case ms.dt != TypeUnknown && !Numeric(ms.dt):
		ms.skip = SkipType
	}
	if ms.skip != "" {
		h.log.Info("sparkplug metric not archived", "group", n.group, "node", n.id, "device", dev,
			"metric", ms.name, "type", ms.dt.String(), "reason", ms.skip)
		return
	}
	tag, err := h.names.name(n.group, n.id, dev, ms.name)
	if err != nil {
		ms.skip = SkipType
		h.log.Warn("sparkplug metric not archived", "group", n.group, "node", n.id, "device", dev,
			"metric", ms.name, "err", err)
		return
	}
	ms.tag = tag
	h.byTag[tag] = metricRef{node: n, dev: dev, ms: ms}
}

func (h *hostState) skip(ms *metricState, reason string) {
	h.stats.Skipped[skipIndex(reason)].Add(1)
}

// value stores one metric's value (or its null as bad quality).
func (h *hostState) value(ms *metricState, m *Metric, nowMS int64) {
	t := nowMS
	switch {
	case m.Timestamp != 0:
		t = int64(min(m.Timestamp, math.MaxInt64))
	case h.pl.Timestamp != 0:
		t = int64(min(h.pl.Timestamp, math.MaxInt64))
	}
	if m.IsNull {
		if !ms.has {
			h.skip(ms, SkipNoValue)
			return
		}
		h.badValue(ms, t)
		ms.lastT = max(ms.lastT, t)
		return
	}
	if ms.text {
		h.textValue(ms, m, t)
		return
	}
	v, why := m.Float(ms.dt)
	if why != "" {
		h.skip(ms, why)
		return
	}
	if !h.inBirth || !h.repeats(ms, t, v) {
		h.pts = append(h.pts, model.Point{Tag: ms.tag, T: t, V: v})
	}
	if t >= ms.lastT || !ms.has {
		ms.last, ms.lastT, ms.has = v, t, true
	}
	h.confirm(ms, v)
}

// repeats reports whether a birth's value of a metric is stored already:
// a birth repeats each metric's last value with its time, so a rebirth
// (after a reconnect or a rebirth request, or to the box of a redundant
// pair that took over, whose archive has the value from the other box)
// would store it, and forward it, twice.
func (h *hostState) repeats(ms *metricState, t int64, v float64) bool {
	if h.prev != nil {
		if p := h.prev.byName[ms.name]; p != nil && p.has && p.lastT == t && p.last == v {
			return true
		}
	}
	if h.stored == nil {
		return false
	}
	st, sv, ok := h.stored(ms.tag)
	return ok && st == t && sv == v
}

// data stores the values of an NDATA or DDATA.
func (h *hostState) data(n *node, s *scope, nowMS int64, now time.Time) {
	for i := range h.pl.Metrics {
		m := &h.pl.Metrics[i]
		var ms *metricState
		if m.Name != nil {
			ms = s.byName[string(m.Name)]
		} else if m.HasAlias {
			ms = s.byAlias[m.Alias]
		}
		if ms == nil {
			h.skip(nil, SkipUnknown)
			h.rebirth(n, now, "a metric its birth did not declare")
			continue
		}
		h.apply(ms, m, nowMS)
	}
}

// apply stores a metric's value, or counts why it is not archived.
func (h *hostState) apply(ms *metricState, m *Metric, nowMS int64) {
	switch {
	case ms.tag != "":
		h.value(ms, m, nowMS)
	case ms.skip != "":
		h.skip(ms, ms.skip)
	}
}

// nodeDeath turns every metric of the node and its devices bad, unless the
// death is a stale will of an earlier session (its bdSeq is not the
// birth's).
func (h *hostState) nodeDeath(n *node, nowMS int64) {
	for i := range h.pl.Metrics {
		m := &h.pl.Metrics[i]
		if string(m.Name) == MetricBdSeq && n.hasBdSeq && m.Bits != n.bdSeq {
			h.stats.Stale.Add(1)
			h.log.Info("sparkplug stale NDEATH ignored", "group", n.group, "node", n.id, "bdSeq", m.Bits, "birth bdSeq", n.bdSeq)
			return
		}
	}
	if n.scope == nil || !n.scope.online {
		return
	}
	for _, d := range n.devices {
		if d.online {
			h.death(d, nowMS)
		}
	}
	h.death(n.scope, nowMS)
}

// death marks a scope offline and its metrics bad, keeping their last
// values, at the time of death (the receipt time: an edge node's will
// was written when it connected) or just after a newer value.
func (h *hostState) death(s *scope, nowMS int64) {
	s.online = false
	h.stats.Deaths.Add(1)
	for _, ms := range s.order {
		if ms.tag == "" || !ms.has {
			continue
		}
		h.badValue(ms, max(nowMS, ms.lastT))
	}
}

// badValue stores a metric's last value (number or text) with quality bad.
func (h *hostState) badValue(ms *metricState, t int64) {
	if ms.text {
		h.texts = append(h.texts, model.TextPoint{Tag: ms.tag, T: t, Text: ms.lastText, Q: model.QualityBad})
		return
	}
	h.pts = append(h.pts, model.Point{Tag: ms.tag, T: t, V: ms.last, Q: model.QualityBad})
}

// textValue stores a text metric's value, made storable by
// model.FitText (quality uncertain when it had to be cut or repaired).
func (h *hostState) textValue(ms *metricState, m *Metric, t int64) {
	if m.Kind != KindString {
		h.skip(ms, SkipType)
		return
	}
	text, cut := model.FitText(string(m.Raw))
	q := model.QualityGood
	if cut {
		q = model.QualityUncertain
	}
	h.texts = append(h.texts, model.TextPoint{Tag: ms.tag, T: t, Text: text, Q: q})
	if t >= ms.lastT || !ms.has {
		ms.lastText, ms.lastT, ms.has = text, t, true
	}
}

// lost turns every metric of every online node bad: the host lost the
// broker, so it cannot tell what the nodes still do. Each node must be
// born again (a rebirth is requested at its next message).
func (h *hostState) lost(now time.Time) []model.Point {
	h.pts, h.texts = h.pts[:0], h.texts[:0]
	for _, n := range h.nodes {
		if n.scope == nil || !n.scope.online {
			continue
		}
		for _, d := range n.devices {
			if d.online {
				h.death(d, now.UnixMilli())
			}
		}
		h.death(n.scope, now.UnixMilli())
		n.lastRebirth = time.Time{}
	}
	return h.pts
}

// namer builds tag names from a template (Options.TagTemplate).
type namer struct {
	parts []namePart
	nb    ingest.NameBuilder
}

type namePart struct {
	lit   string // a literal segment when field is 0
	field byte   // 'g' group, 'n' node, 'd' device, 'm' metric
}

// DefaultTagTemplate names tags <group>.<node>[.<device>].<metric>.
const DefaultTagTemplate = "{group}.{node}.{device}.{metric}"

// newNamer parses a template: dot-separated segments, each a literal or
// one of {group}, {node}, {device}, {metric}; {metric} must appear.
func newNamer(tmpl string) (namer, error) {
	var n namer
	hasMetric := false
	for _, seg := range strings.Split(tmpl, ".") {
		p := namePart{lit: seg}
		switch seg {
		case "{group}":
			p = namePart{field: 'g'}
		case "{node}":
			p = namePart{field: 'n'}
		case "{device}":
			p = namePart{field: 'd'}
		case "{metric}":
			p, hasMetric = namePart{field: 'm'}, true
		default:
			if strings.ContainsAny(seg, "{}") {
				return n, fmt.Errorf("tag template %q: segment %q is not {group}, {node}, {device}, {metric} or a literal", tmpl, seg)
			}
		}
		n.parts = append(n.parts, p)
	}
	if !hasMetric {
		return n, fmt.Errorf("tag template %q has no {metric}", tmpl)
	}
	return n, nil
}

// name builds the tag of a metric per the push-input name rule; '/' in a
// metric name separates levels like '.'; an empty device leaves no segment.
func (n *namer) name(group, node, device, metric string) (string, error) {
	n.nb.Reset()
	for _, p := range n.parts {
		switch p.field {
		case 'g':
			n.nb.AddString(group)
		case 'n':
			n.nb.AddString(node)
		case 'd':
			n.nb.AddString(device)
		case 'm':
			n.nb.AddPath(metric)
		default:
			n.nb.AddString(p.lit)
		}
	}
	if err := n.nb.Check(); err != nil {
		return "", err
	}
	return string(n.nb.Bytes()), nil
}
