package opcua

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"

	"github.com/pith-historian/pith/internal/acq"
	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/tag"
)

// Limits of one session.
const (
	// itemsPerCall is how many monitored items one CreateMonitoredItems
	// request carries, and nodes one Read request: servers limit both
	// (node-opcua and many PLCs to a few thousand).
	itemsPerCall = 1000
	// reconnectInterval is how often the station tries to reopen a lost
	// secure channel while the session may still live on the server.
	reconnectInterval = time.Second
)

// item is one node the station reads: a scalar feeding one tag, or an
// array feeding one tag per element.
type item struct {
	node  *ua.NodeID
	spec  config.OPCUATag // the first tag's settings (shared by the entry)
	tags  []int           // indexes into Station.tags
	elems []int           // element of each tag, -1 for a scalar
}

// Station is one OPC UA server endpoint: a session with a subscription
// for the monitored tags and a cyclic read for the others, writing into the
// tag table. It reconnects on its own; Start and Stop bracket its life.
type Station struct {
	cfg   config.OPCUAClient
	tags  []config.OPCUATag
	byTag map[string]int
	tab   acq.Table
	log   *slog.Logger
	ids   []tag.ID
	// status is the raw status code of each tag's last value, or
	// statusNone before the first; a connection loss sets
	// BadServerNotConnected, the communication failure.
	status []atomic.Uint32
	subs   []item // monitored; the client handle is the index
	reads  []item
	stat   statIDs
	cnt    counters

	tt   TextTable // the table's text road, nil without String tags
	text texts

	client atomic.Pointer[opcua.Client] // the connected client, for writes
	// seq is the sequence number of the last notification message of
	// the subscription the station applied, so that after a reconnection
	// it can ask the server to republish the ones lost on the broken
	// connection; acks are the messages to acknowledge with the next
	// publish request. Both belong to the session goroutine.
	seq  uint32
	acks []*ua.SubscriptionAcknowledgement
	// badAt is the Unix ms at which the station last marked its tags bad
	// (0 when they are not): reads stamp their values no earlier, so that a
	// value unchanged since before the loss turns good again.
	badAt atomic.Int64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewStation builds a station from its configuration (validated by
// config) and defines its tags and statistic tags in tab.
func NewStation(c config.OPCUAClient, tab acq.Table, log *slog.Logger) (*Station, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tags, err := c.ExpandedTags()
	if err != nil {
		return nil, fmt.Errorf("build opcua station %q: %w", c.Name, err)
	}
	s := &Station{cfg: c, tags: tags, byTag: make(map[string]int, len(tags)), tab: tab, log: log.With("station", c.Name)}
	for i, t := range tags {
		if t.Type == config.OPCUAString && s.tt == nil {
			tt, ok := tab.(TextTable)
			if !ok {
				return nil, fmt.Errorf("build opcua station %q: tag %q: type String needs a tag table that stores text", c.Name, t.Name)
			}
			s.tt = tt
		}
		id, err := tab.Define(tag.Def{Name: t.Name, Unit: t.Unit, Description: t.Description,
			Source: "opcua:" + c.Name, Archive: archivePolicy(t.Archive), Deadband: t.Deadband})
		if err != nil {
			return nil, fmt.Errorf("build opcua station %q: %w", c.Name, err)
		}
		s.ids = append(s.ids, id)
		s.byTag[t.Name] = i
	}
	s.status = make([]atomic.Uint32, len(tags))
	for i := range s.status {
		s.status[i].Store(statusNone)
	}
	for i := 0; i < len(tags); {
		j := i
		for j < len(tags) && tags[j].Entry == tags[i].Entry {
			j++
		}
		node, err := ua.ParseNodeID(tags[i].Node)
		if err != nil {
			return nil, fmt.Errorf("build opcua station %q: tags[%d].node: %w", c.Name, tags[i].Entry, err)
		}
		it := item{node: node, spec: tags[i]}
		for k := i; k < j; k++ {
			it.tags = append(it.tags, k)
			it.elems = append(it.elems, tags[k].Element)
		}
		if tags[i].Read {
			s.reads = append(s.reads, it)
		} else {
			s.subs = append(s.subs, it)
		}
		i = j
	}
	if err := s.defineStats(); err != nil {
		return nil, fmt.Errorf("build opcua station %q: %w", c.Name, err)
	}
	return s, nil
}

func archivePolicy(a config.Archive) tag.Policy {
	switch a {
	case config.ArchiveAll:
		return tag.ArchiveAll
	case config.ArchiveDeadband:
		return tag.ArchiveDeadband
	}
	return tag.ArchiveChange
}

// Name returns the station's name.
func (s *Station) Name() string { return s.cfg.Name }

// Start runs the station until Stop or ctx's end: it connects, and
// reconnects after every loss.
func (s *Station) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Add(2)
	go func() {
		defer s.wg.Done()
		s.run(ctx)
	}()
	go func() {
		defer s.wg.Done()
		s.statsLoop(ctx)
	}()
}

// Stop ends the session and waits for the station's goroutines.
func (s *Station) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	s.wg.Wait()
}

// run connects and keeps a session until ctx ends. A session the client
// could not recover (the server refused the reconnection or forgot the
// session and its subscription) is replaced by a new one after RetryPause.
func (s *Station) run(ctx context.Context) {
	failing := false
	for {
		err := s.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if s.cnt.comm.Load() {
			failing = false // it ran: this is a new failure
		}
		s.markBad()
		s.cnt.errors.Add(1)
		s.setLastErr(err)
		if !failing {
			s.log.Warn("opcua session lost", "err", err)
		} else {
			s.log.Debug("opcua session still failing", "err", err)
		}
		failing = true
		t := time.NewTimer(s.cfg.RetryPause.Std())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// monitorRequest is the monitored item of it, with client handle h.
func monitorRequest(it item, h uint32) *ua.MonitoredItemCreateRequest {
	req := opcua.NewMonitoredItemCreateRequestWithDefaults(it.node, ua.AttributeIDValue, h)
	p := req.RequestedParameters
	p.SamplingInterval = float64(it.spec.SamplingInterval.Std()) / float64(time.Millisecond)
	p.QueueSize = uint32(it.spec.QueueSize)
	p.DiscardOldest = true
	if it.spec.ServerDeadband != config.OPCUADeadbandNone {
		kind := uint32(ua.DeadbandTypeAbsolute)
		if it.spec.ServerDeadband == config.OPCUADeadbandPercent {
			kind = uint32(ua.DeadbandTypePercent)
		}
		p.Filter = ua.NewExtensionObject(&ua.DataChangeFilter{
			Trigger:       ua.DataChangeTriggerStatusValue,
			DeadbandType:  kind,
			DeadbandValue: it.spec.ServerDeadbandValue,
		})
	}
	return req
}

// samples appends the samples of one data value of it: numbers to batch,
// the values of String tags to texts. floor is the earliest time they may
// carry (see Station.badAt); 0 for none.
func (s *Station) samples(batch []tag.Sample, texts []textSample, it item, dv *ua.DataValue, floor int64) ([]tag.Sample, []textSample) {
	if dv == nil {
		return batch, texts
	}
	if Overflowed(dv.Status) {
		s.cnt.overflows.Add(1)
	}
	t := s.stamp(dv)
	if t < floor {
		t = floor
	}
	q := Quality(dv.Status)
	has := dv.EncodingMask&ua.DataValueValue != 0
	for k, ti := range it.tags {
		s.status[ti].Store(uint32(dv.Status))
		if s.isText(ti) {
			text, cut, ok := Text(dv.Value, it.elems[k])
			switch {
			case q == model.QualityBad || !has || !ok:
				// No text Pith can store (a bad status, another type
				// than String): bad, the last text kept.
				texts = append(texts, textSample{tag: ti, t: t, q: model.QualityBad, hold: true})
			case cut && q == model.QualityGood:
				// Cut or repaired: no longer the server's text.
				texts = append(texts, textSample{tag: ti, t: t, text: text, q: model.QualityUncertain})
			default:
				texts = append(texts, textSample{tag: ti, t: t, text: text, q: q})
			}
			continue
		}
		smp := tag.Sample{ID: s.ids[ti], T: t, Q: q}
		v, ok := Float(dv.Value, it.elems[k])
		switch {
		case q == model.QualityBad || !has:
			smp.Q, smp.Hold = model.QualityBad, true
		case !ok:
			// A value Pith cannot hold as a number (another type than
			// configured, an array too short): bad, the last value kept.
			smp.Q, smp.Hold = model.QualityBad, true
		default:
			smp.V = v*s.tags[ti].Scale + s.tags[ti].Offset
		}
		batch = append(batch, smp)
	}
	return batch, texts
}

// stamp picks a value's time: the source timestamp unless the station
// wants the server's or the source gave none, then the server timestamp,
// then now.
func (s *Station) stamp(dv *ua.DataValue) int64 {
	if s.cfg.Timestamps == config.OPCUATimestampSource && dv.EncodingMask&ua.DataValueSourceTimestamp != 0 && !dv.SourceTimestamp.IsZero() {
		return dv.SourceTimestamp.UnixMilli()
	}
	if dv.EncodingMask&ua.DataValueServerTimestamp != 0 && !dv.ServerTimestamp.IsZero() {
		return dv.ServerTimestamp.UnixMilli()
	}
	return time.Now().UnixMilli()
}

// refresh reads every node once, so that tags marked bad by a connection
// loss turn good again with their current value even if it did not change
// (a recovered subscription only sends changes).
func (s *Station) refresh(ctx context.Context, c *opcua.Client) {
	floor := s.badAt.Swap(0)
	if floor == 0 {
		return
	}
	all := append(append([]item(nil), s.subs...), s.reads...)
	if err := s.read(ctx, c, all, floor); err != nil {
		s.log.Warn("opcua refresh read failed", "err", err)
	}
}

// readLoop reads the mode = "read" tags every ReadPeriod, on ticks
// aligned to the wall clock as Modbus polls are.
func (s *Station) readLoop(ctx context.Context) {
	period := s.cfg.ReadPeriod.Std()
	for {
		now := time.Now()
		next := now.Truncate(period).Add(period)
		t := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		c := s.client.Load()
		if c == nil {
			continue // reconnecting: the tags are bad already
		}
		start := time.Now()
		err := s.read(ctx, c, s.reads, s.badAt.Load())
		s.cnt.recordRead(time.Since(start), err)
		if err != nil && ctx.Err() == nil {
			s.log.Debug("opcua read failed", "err", err)
		}
	}
}

// read reads the value of every node of items and applies them.
func (s *Station) read(ctx context.Context, c *opcua.Client, items []item, floor int64) error {
	for start := 0; start < len(items); start += itemsPerCall {
		part := items[start:min(start+itemsPerCall, len(items))]
		req := &ua.ReadRequest{TimestampsToReturn: ua.TimestampsToReturnBoth}
		for _, it := range part {
			req.NodesToRead = append(req.NodesToRead, &ua.ReadValueID{NodeID: it.node, AttributeID: ua.AttributeIDValue})
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout.Std())
		res, err := c.Read(cctx, req)
		cancel()
		if err != nil {
			return fmt.Errorf("read %d nodes: %w", len(part), err)
		}
		if len(res.Results) != len(part) {
			return fmt.Errorf("read %d nodes: %d results", len(part), len(res.Results))
		}
		batch := make([]tag.Sample, 0, len(part))
		var texts []textSample
		for i, dv := range res.Results {
			batch, texts = s.samples(batch, texts, part[i], dv, floor)
		}
		s.cnt.changes.Add(uint64(s.tab.Update(batch) + s.writeTexts(ctx, texts)))
	}
	return nil
}

// markBad turns every tag of the station bad, keeping its value, and the
// comm tag 0.
func (s *Station) markBad() {
	now := time.Now().UnixMilli()
	s.badAt.Store(now)
	batch := make([]tag.Sample, 0, len(s.ids)+1)
	var texts []textSample
	for i, id := range s.ids {
		s.status[i].Store(uint32(ua.StatusBadServerNotConnected))
		if s.isText(i) {
			texts = append(texts, textSample{tag: i, t: now, q: model.QualityBad, hold: true})
			continue
		}
		batch = append(batch, tag.Sample{ID: id, T: now, Q: model.QualityBad, Hold: true})
	}
	batch = append(batch, tag.Sample{ID: s.stat.comm, T: now, V: 0})
	s.tab.Update(batch)
	s.writeTexts(context.Background(), texts)
	s.cnt.comm.Store(false)
}

// setComm writes the comm tag.
func (s *Station) setComm(ok bool) {
	v := 0.0
	if ok {
		v = 1
	}
	s.cnt.comm.Store(ok)
	s.tab.Update([]tag.Sample{{ID: s.stat.comm, T: time.Now().UnixMilli(), V: v}})
}
