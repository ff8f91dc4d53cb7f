package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
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
)

// SinkFunc receives the points of one batch published by site. Returning
// nil means the points are durable: the message is then acknowledged.
type SinkFunc func(site string, pts []model.Point) error

// DeleteFunc applies a delete published by site: the samples of tag (as
// the site names it) in [from, to), Unix ms. Returning nil means the
// delete is durable: the message is then acknowledged.
type DeleteFunc func(site, tag string, from, to int64) error

// LabelsFunc applies tag labels published by site (tags as the site names
// them). Returning nil means they are durable: the message is then
// acknowledged.
type LabelsFunc func(site string, series []model.Series) error

// Handlers are what Consume calls for each message.
type Handlers struct {
	Points SinkFunc   // a batch of points; required unless Sites is set
	Delete DeleteFunc // a delete; nil acknowledges and logs delete messages unapplied
	Labels LabelsFunc // tag labels; nil acknowledges labels messages unapplied
	// Text stores the text values of a message (header Pith-Kind: text);
	// nil acknowledges and logs them unstored.
	Text TextFunc
	// SkipNode, when set, acknowledges unapplied every message whose
	// header Pith-Node is SkipNode: a box of a redundant pair skips what
	// it published itself.
	SkipNode string
	// Sites, when set, replaces Points: it receives the points of
	// consecutive messages of several sites at once, so that a fleet's
	// interleaved small messages cost one store write per group instead
	// of one per message.
	Sites SitesFunc
	// Document stores a document (header Pith-Op: document); nil
	// acknowledges and logs it unstored.
	Document DocFunc
}

// SitePoints are points published by one site.
type SitePoints struct {
	Site   string
	Points []model.Point
}

// SitesFunc receives the points of consecutive messages of several sites,
// each site's in message order. Returning nil means they are all durable:
// the messages are then acknowledged.
type SitesFunc func(groups []SitePoints) error

// TextFunc stores text values published by site; nil means they are
// durable and the message is acknowledged.
type TextFunc func(site string, pts []model.TextPoint) error

// Consume pulls batches from the JetStream stream holding subjects with
// the durable pull consumer named durable (created or updated), and calls
// h.Points with their points, those of consecutive messages of one site
// together. A message is acknowledged only after h.Points returned nil;
// after an error, or a lost ack, it is delivered again later, so h sees
// every batch at least once and must tolerate repeats (the store does). A
// delete message (header Pith-Op: delete, see docs/format/forward.md)
// goes to h.Delete, after the points before it. A message that does not
// decode is terminated and logged. Several processes consuming with the
// same durable share the work. Consume returns when ctx is done.
func Consume(ctx context.Context, url string, subjects []string, durable string, h Handlers, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if len(subjects) == 0 || durable == "" || (h.Points == nil && h.Sites == nil) {
		return errors.New("consume: subjects, durable name and points handler are required")
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
	// until its AckWait, a minute on. Consume keeps one inbox and pulls
	// ahead into it; its callback subscription buffers in the client (the
	// Messages iterator's channel of exactly the pull size drops messages
	// as a "slow consumer" when it is full). The callback only hands each
	// message to this goroutine, through a channel that holds every
	// message the server may have unacknowledged, so it never blocks.
	in := make(chan jetstream.Msg, consumeMaxPending)
	cc, err := cons.Consume(func(m jetstream.Msg) { in <- m }, jetstream.PullMaxMessages(consumeFetch),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if ctx.Err() == nil && !errors.Is(err, nats.ErrTimeout) {
				log.Warn("pull from jetstream", "err", err)
			}
		}))
	if err != nil {
		return fmt.Errorf("pull from consumer %s: %w", durable, err)
	}
	defer func() {
		cc.Stop()
		<-cc.Closed()
	}()
	g := &consumeGroup{h: h, log: log}
	for {
		var m jetstream.Msg
		select {
		case m = <-in:
		default:
			// Nothing more has arrived: store what is held rather than
			// wait for more.
			g.flush(ctx)
			select {
			case m = <-in:
			case <-ctx.Done():
				return nil
			}
		}
		g.add(ctx, m)
	}
}

// consumeGroupPoints bounds the points of one site stored by one
// h.Points call: a group is stored once it holds this many, so it holds
// at most consumeGroupPoints-1 plus one message's natsMaxEntryPoints,
// within the store's default BulkPoints (1<<16). A larger write would be a
// bulk load: a run file of its own per group, and a flush of the head,
// which a central Pith draining an edge's backlog pays for every group.
const consumeGroupPoints = 1 << 15

// consumeGroup gathers the points of consecutive messages of one site, so
// that a backlog of many small messages costs one store write per group
// rather than one per message.
type consumeGroup struct {
	h    Handlers
	log  *slog.Logger
	site string
	msgs []jetstream.Msg
	pts  []model.Point

	starts []int        // with h.Sites: where each site's run starts in pts
	runs   []SitePoints // with h.Sites: the runs handed to it
}

// add takes m into the group, storing the group first when m is of
// another site, a delete or would make it too large.
func (g *consumeGroup) add(ctx context.Context, m jetstream.Msg) {
	if g.h.SkipNode != "" && m.Headers().Get(NATSNodeHeader) == g.h.SkipNode {
		if err := m.Ack(); err != nil {
			g.log.Warn("ack message", "err", err)
		}
		return
	}
	site := siteOf(m.Subject())
	if len(g.msgs) > 0 && ((site != g.site && g.h.Sites == nil) || len(g.pts) >= consumeGroupPoints) {
		g.flush(ctx)
	}
	switch m.Headers().Get(natsOpHeader) {
	case natsOpDelete:
		g.flush(ctx)
		consumeDelete(ctx, m, g.h, g.log)
		return
	case natsOpLabels:
		g.flush(ctx)
		consumeLabels(ctx, m, g.h, g.log)
		return
	case natsOpDocument:
		g.flush(ctx)
		consumeDoc(ctx, m, g.h, g.log)
		return
	}
	if m.Headers().Get(natsKindHeader) == natsKindText {
		g.flush(ctx)
		consumeText(ctx, m, g.h, g.log)
		return
	}
	n := len(g.pts)
	var err error
	if _, g.pts, err = DecodeBatch(g.pts, m.Data()); err != nil {
		g.pts = g.pts[:n]
		terminate(m, err, g.log)
		return
	}
	if g.h.Sites != nil && (len(g.msgs) == 0 || site != g.site) {
		g.starts = append(g.starts, n)
		g.runs = append(g.runs, SitePoints{Site: site})
	}
	g.site = site
	g.msgs = append(g.msgs, m)
}

// flush stores the group's points and acknowledges its messages, or naks
// them for a later redelivery when the store refuses.
func (g *consumeGroup) flush(ctx context.Context) {
	if len(g.msgs) == 0 {
		return
	}
	defer func() { g.msgs, g.pts, g.starts, g.runs = g.msgs[:0], g.pts[:0], g.starts[:0], g.runs[:0] }()
	var err error
	if g.h.Sites != nil {
		for i := range g.runs {
			end := len(g.pts)
			if i+1 < len(g.starts) {
				end = g.starts[i+1]
			}
			g.runs[i].Points = g.pts[g.starts[i]:end]
		}
		err = g.h.Sites(g.runs)
	} else {
		err = g.h.Points(g.site, g.pts)
	}
	if err != nil {
		g.log.Warn("sink refused messages; redelivering later", "site", g.site, "messages", len(g.msgs), "points", len(g.pts), "err", err)
		for _, m := range g.msgs {
			if err := m.NakWithDelay(consumeNakDelay); err != nil {
				g.log.Warn("nak message", "err", err)
			}
		}
		return
	}
	// A plain ack, not waiting for the server's answer: a lost ack
	// redelivers the message after consumeAckWait, and the store takes
	// the repeat as it is.
	for _, m := range g.msgs {
		if err := m.Ack(); err != nil {
			g.log.Warn("ack message", "err", err)
		}
	}
}

// consumeDelete applies the delete message m with h and acknowledges it,
// or naks it for a later redelivery when h fails, or terminates it when it
// does not decode.
func consumeDelete(ctx context.Context, m jetstream.Msg, h Handlers, log *slog.Logger) {
	site := siteOf(m.Subject())
	d, err := decodeDelete(m.Headers())
	if err != nil {
		terminate(m, err, log)
		return
	}
	if h.Delete == nil {
		log.Warn("no delete handler; delete message acknowledged unapplied", "site", site, "tag", d.Tag, "from", d.From, "to", d.To)
	} else if err := h.Delete(site, d.Tag, d.From, d.To); err != nil {
		log.Warn("sink refused delete; redelivering later", "site", site, "tag", d.Tag, "from", d.From, "to", d.To, "err", err)
		if err := m.NakWithDelay(consumeNakDelay); err != nil {
			log.Warn("nak message", "err", err)
		}
		return
	}
	if err := m.DoubleAck(ctx); err != nil {
		// The message will come again; deletes are idempotent.
		log.Warn("ack message", "err", err)
	}
}

// consumeLabels applies the labels message m with h and acknowledges it,
// naks it when h fails, or terminates it when it does not decode.
func consumeLabels(ctx context.Context, m jetstream.Msg, h Handlers, log *slog.Logger) {
	site := siteOf(m.Subject())
	series, err := decodeLabels(m.Data())
	if err != nil {
		terminate(m, err, log)
		return
	}
	if h.Labels != nil {
		if err := h.Labels(site, series); err != nil {
			log.Warn("sink refused labels; redelivering later", "site", site, "tags", len(series), "err", err)
			if err := m.NakWithDelay(consumeNakDelay); err != nil {
				log.Warn("nak message", "err", err)
			}
			return
		}
	}
	if err := m.DoubleAck(ctx); err != nil {
		log.Warn("ack message", "err", err) // labels are idempotent
	}
}

// consumeText stores the text values of one message, in order with the
// points before it (the group was flushed).
func consumeText(ctx context.Context, m jetstream.Msg, h Handlers, log *slog.Logger) {
	site := siteOf(m.Subject())
	_, texts, err := DecodeTextBatch(nil, m.Data())
	if err != nil {
		terminate(m, err, log)
		return
	}
	if h.Text == nil {
		log.Warn("no text handler; text message acknowledged unstored", "site", site, "values", len(texts))
	} else if err := h.Text(site, texts); err != nil {
		log.Warn("sink refused text; redelivering later", "site", site, "values", len(texts), "err", err)
		if err := m.NakWithDelay(consumeNakDelay); err != nil {
			log.Warn("nak message", "err", err)
		}
		return
	}
	if err := m.DoubleAck(ctx); err != nil {
		log.Warn("ack message", "err", err) // the message comes again; the store takes the repeat
	}
}

// terminate ends the deliveries of a message that does not decode.
func terminate(m jetstream.Msg, err error, log *slog.Logger) {
	log.Error("terminating undecodable message", "subject", m.Subject(), "err", err)
	if err := m.Term(); err != nil {
		log.Warn("terminate message", "err", err)
	}
}

// decodeDelete reads the headers of a delete message.
func decodeDelete(h nats.Header) (Delete, error) {
	d := Delete{Tag: h.Get(natsTagHeader)}
	from, err1 := strconv.ParseInt(h.Get(natsFromHeader), 10, 64)
	to, err2 := strconv.ParseInt(h.Get(natsToHeader), 10, 64)
	if d.Tag == "" || err1 != nil || err2 != nil || from >= to {
		return d, fmt.Errorf("read delete message: %w: tag %q, range %q to %q", ErrBadBatch, d.Tag, h.Get(natsFromHeader), h.Get(natsToHeader))
	}
	d.From, d.To = from, to
	return d, nil
}

// siteOf returns the site part of a pith.<site>.samples subject.
func siteOf(subject string) string {
	parts := strings.Split(subject, ".")
	// pith.<site>.samples, or pith.<site>.samples.<partition> once the
	// servers split the sites (see docs/fleet.md).
	if len(parts) == 3 || len(parts) == 4 && parts[2] == "samples" {
		return parts[1]
	}
	return subject
}
