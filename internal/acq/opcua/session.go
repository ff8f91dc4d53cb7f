package opcua

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gopcua/opcua"
	"github.com/gopcua/opcua/ua"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/tag"
)

// Subscription settings.
const (
	// minLifetime is the least time the server keeps the subscription
	// (and its queues) without hearing from the client: a link loss
	// shorter than it loses nothing.
	minLifetime = time.Minute
	// probePeriod is how often a station without monitored items checks
	// that its session is alive.
	probePeriod = time.Second
)

// session runs one session from connection to its loss beyond recovery.
// A broken connection is repaired on a new secure channel with the same
// session (ActivateSession), and the notification messages the server
// sent on the broken one are republished, so a short loss loses and
// repeats nothing. When the server no longer knows the session (it
// restarted, or the loss outlived the session), session returns and run
// starts a new one.
func (s *Station) session(ctx context.Context) error {
	c, opts, err := dial(ctx, s.cfg)
	if err != nil {
		return err
	}
	defer func() {
		s.client.Store(nil)
		closeClient(c, s.cfg.Timeout.Std())
	}()
	var subID uint32
	if len(s.subs) > 0 {
		if subID, err = s.subscribe(ctx, c); err != nil {
			return err
		}
	}
	s.client.Store(c)
	s.log.Info("opcua session open", "endpoint", s.cfg.Endpoint, "security", s.cfg.SecurityPolicy+"/"+s.cfg.SecurityMode,
		"monitored", len(s.subs), "read", len(s.reads))
	s.setComm(true)
	s.refresh(ctx, c)

	var readWG sync.WaitGroup
	rctx, rcancel := context.WithCancel(ctx)
	defer func() { rcancel(); readWG.Wait() }()
	if len(s.reads) > 0 {
		readWG.Add(1)
		go func() {
			defer readWG.Done()
			s.readLoop(rctx)
		}()
	}
	for {
		err := s.consume(ctx, c, subID)
		if ctx.Err() != nil {
			return nil
		}
		s.cnt.errors.Add(1)
		s.setLastErr(err)
		s.log.Warn("opcua connection lost; reconnecting", "endpoint", s.cfg.Endpoint, "err", err)
		s.markBad()
		s.client.Store(nil)
		next, err := s.resume(ctx, c, opts)
		if err != nil {
			return err
		}
		c = next
		n := 0
		if subID != 0 {
			n = s.republish(ctx, c, subID)
		}
		s.client.Store(c)
		s.log.Info("opcua session recovered", "republished", n)
		s.setComm(true)
		s.refresh(ctx, c)
	}
}

// closeClient closes c's secure channel (and its session, unless
// detached), bounded by timeout.
func closeClient(c *opcua.Client, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = c.Close(ctx)
}

// resume opens a new secure channel and moves the session of old onto it,
// retrying every reconnectInterval while the session may still live on
// the server. It fails at once when the server answers that the session
// is gone.
func (s *Station) resume(ctx context.Context, old *opcua.Client, opts []opcua.Option) (*opcua.Client, error) {
	sess, _ := old.DetachSession(ctx)
	closeClient(old, s.cfg.Timeout.Std())
	if sess == nil {
		return nil, errors.New("resume session: no session")
	}
	deadline := time.Now().Add(max(sess.RevisedTimeout(), reconnectInterval))
	for {
		c, err := opcua.NewClient(s.cfg.Endpoint, opts...)
		if err != nil {
			return nil, fmt.Errorf("resume session: %w", err)
		}
		cctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout.Std())
		err = c.Dial(cctx)
		if err == nil {
			err = c.ActivateSession(cctx, sess)
			cancel()
			if err == nil {
				return c, nil
			}
			closeClient(c, s.cfg.Timeout.Std())
			// The channel is up but the session is refused: the server
			// lost it, and waiting will not bring it back.
			return nil, fmt.Errorf("resume session: %w", err)
		}
		cancel()
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("resume session: server unreachable past the session timeout: %w", err)
		}
		t := time.NewTimer(reconnectInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// subscribe creates the subscription and its monitored items, and
// returns the subscription's id. An item the server refuses (an unknown
// node, a wrong filter) is logged and its tags turn bad; the others run.
func (s *Station) subscribe(ctx context.Context, c *opcua.Client) (uint32, error) {
	interval := s.cfg.PublishInterval.Std()
	keepAlive := keepAliveCount(s.cfg)
	lifetime := max(3*keepAlive, uint32(minLifetime/interval))
	req := &ua.CreateSubscriptionRequest{
		RequestedPublishingInterval: float64(interval) / float64(time.Millisecond),
		RequestedLifetimeCount:      lifetime,
		RequestedMaxKeepAliveCount:  keepAlive,
		PublishingEnabled:           true,
	}
	var res *ua.CreateSubscriptionResponse
	if err := send(ctx, c, s.cfg.Timeout.Std(), req, &res); err != nil {
		return 0, fmt.Errorf("create subscription: %w", err)
	}
	subID := res.SubscriptionID
	s.seq, s.acks = 0, nil
	for start := 0; start < len(s.subs); start += itemsPerCall {
		end := min(start+itemsPerCall, len(s.subs))
		mreq := &ua.CreateMonitoredItemsRequest{SubscriptionID: subID, TimestampsToReturn: ua.TimestampsToReturnBoth}
		for h := start; h < end; h++ {
			mreq.ItemsToCreate = append(mreq.ItemsToCreate, monitorRequest(s.subs[h], uint32(h)))
		}
		var mres *ua.CreateMonitoredItemsResponse
		if err := send(ctx, c, s.cfg.Timeout.Std(), mreq, &mres); err != nil {
			return 0, fmt.Errorf("create monitored items: %w", err)
		}
		if len(mres.Results) > 0 {
			r := mres.Results[0]
			s.log.Debug("opcua monitored items created", "items", len(mres.Results),
				"revised_sampling_ms", r.RevisedSamplingInterval, "revised_queue", r.RevisedQueueSize)
		}
		now := time.Now().UnixMilli()
		var bad []tag.Sample
		for i, r := range mres.Results {
			if r.StatusCode == ua.StatusOK {
				continue
			}
			it := s.subs[start+i]
			s.log.Warn("opcua monitored item refused", "node", it.spec.Node, "tag", s.tags[it.tags[0]].Name, "status", StatusName(r.StatusCode))
			for _, ti := range it.tags {
				if !s.isText(ti) {
					bad = append(bad, tag.Sample{ID: s.ids[ti], T: now, Q: model.QualityBad, Hold: true})
				}
			}
		}
		if len(bad) > 0 {
			s.tab.Update(bad)
		}
	}
	return subID, nil
}

// send sends req and stores the answer in *res, a pointer to the
// expected response type.
func send[R ua.Response](ctx context.Context, c *opcua.Client, timeout time.Duration, req ua.Request, res *R) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.Send(cctx, req, func(v ua.Response) error {
		r, ok := v.(R)
		if !ok {
			return fmt.Errorf("unexpected answer %T", v)
		}
		*res = r
		return nil
	})
}

// consume runs the publish loop of subscription subID (or, without one,
// probes the session) until the connection fails or ctx ends. One publish
// request is outstanding at a time; it carries the acknowledgements of
// the messages applied since the previous one.
func (s *Station) consume(ctx context.Context, c *opcua.Client, subID uint32) error {
	if subID == 0 {
		for {
			t := time.NewTimer(probePeriod)
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C:
			}
			req := &ua.ReadRequest{NodesToRead: []*ua.ReadValueID{{NodeID: ua.NewNumericNodeID(0, 2258), AttributeID: ua.AttributeIDValue}}}
			var res *ua.ReadResponse
			if err := send(ctx, c, s.cfg.Timeout.Std(), req, &res); err != nil {
				return err
			}
		}
	}
	for {
		req := &ua.PublishRequest{SubscriptionAcknowledgements: s.acks}
		var res *ua.PublishResponse
		err := send(ctx, c, publishTimeout(s.cfg), req, &res)
		switch {
		case err == nil:
			s.acks = nil
		case errors.Is(err, ua.StatusBadTimeout), errors.Is(err, ua.StatusBadTooManyPublishRequests):
			continue // the server had nothing, or too much at once: ask again
		default:
			return fmt.Errorf("publish: %w", err)
		}
		if res.SubscriptionID != subID || res.NotificationMessage == nil {
			continue
		}
		s.apply(subID, res.NotificationMessage)
	}
}

// apply applies one notification message, unless it is one the station
// already applied, and queues its acknowledgement.
func (s *Station) apply(subID uint32, m *ua.NotificationMessage) {
	if len(m.NotificationData) == 0 {
		return // a keep-alive: its sequence number is the next one's
	}
	s.acks = append(s.acks, &ua.SubscriptionAcknowledgement{SubscriptionID: subID, SequenceNumber: m.SequenceNumber})
	if m.SequenceNumber <= s.seq && s.seq-m.SequenceNumber < 1<<31 {
		return // republished before, or repeated
	}
	if s.seq != 0 && m.SequenceNumber != s.seq+1 {
		s.log.Warn("opcua notification messages missing", "after", s.seq, "got", m.SequenceNumber)
	}
	s.seq = m.SequenceNumber
	if s.log.Enabled(context.Background(), -8) {
		for _, d := range m.NotificationData {
			if x, ok := d.Value.(*ua.DataChangeNotification); ok && len(x.MonitoredItems) > 0 {
				f, l := x.MonitoredItems[0], x.MonitoredItems[len(x.MonitoredItems)-1]
				s.log.Log(context.Background(), -8, "opcua message", "seq", m.SequenceNumber, "items", len(x.MonitoredItems),
					"first", f.Value.Value.Value(), "last", l.Value.Value.Value())
			}
		}
	}
	for _, d := range m.NotificationData {
		if d == nil {
			continue
		}
		switch x := d.Value.(type) {
		case *ua.DataChangeNotification:
			s.dataChange(x)
		case *ua.StatusChangeNotification:
			s.log.Warn("opcua subscription status changed", "status", StatusName(x.Status))
		}
	}
}

// dataChange applies one data change notification to the table.
func (s *Station) dataChange(x *ua.DataChangeNotification) {
	batch := make([]tag.Sample, 0, len(x.MonitoredItems))
	var texts []textSample
	for _, m := range x.MonitoredItems {
		if m == nil || int(m.ClientHandle) >= len(s.subs) {
			continue
		}
		batch, texts = s.samples(batch, texts, s.subs[m.ClientHandle], m.Value, 0)
	}
	s.cnt.notifications.Add(uint64(len(x.MonitoredItems)))
	if len(batch) > 0 {
		s.cnt.changes.Add(uint64(s.tab.Update(batch)))
	}
	if len(texts) > 0 {
		s.cnt.changes.Add(uint64(s.writeTexts(context.Background(), texts)))
	}
}

// republish asks the server, after a reconnection, for the notification
// messages after the last one applied: those went out on the broken
// connection and wait in the server's retransmission queue. It returns
// how many it applied.
func (s *Station) republish(ctx context.Context, c *opcua.Client, subID uint32) int {
	n := 0
	for {
		req := &ua.RepublishRequest{SubscriptionID: subID, RetransmitSequenceNumber: s.seq + 1}
		var res *ua.RepublishResponse
		err := send(ctx, c, s.cfg.Timeout.Std(), req, &res)
		if err != nil || res.NotificationMessage == nil || len(res.NotificationMessage.NotificationData) == 0 {
			if err != nil && !errors.Is(err, ua.StatusBadMessageNotAvailable) {
				s.log.Warn("opcua republish failed", "seq", req.RetransmitSequenceNumber, "err", err)
			}
			return n
		}
		s.apply(subID, res.NotificationMessage)
		n++
	}
}
