package web

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/pith-historian/pith/internal/store"
	"github.com/pith-historian/pith/internal/tag"
)

// Source answers current values from the archive; *store.DB implements
// it. Latest is called concurrently by every live stream and display
// request and must be safe for that.
type Source interface {
	// Latest returns the newest sample of each named tag, of every tag
	// when none is named.
	Latest(tags ...string) ([]store.Latest, error)
}

// Table is the current-value table that pushes changes; *tag.Table
// implements it. Each live stream holds one Coalesce-mode subscription, so
// a slow browser gets the newest value of each tag and never slows the
// producers. All methods are called concurrently.
type Table interface {
	// Latest returns the current values of the named tags, of every tag
	// when none is named.
	Latest(names ...string) ([]tag.Value, error)
	// Subscribe registers a subscriber; changes made after it returns
	// are delivered.
	Subscribe(opts tag.SubOptions) *tag.Subscription
	// Unsubscribe stops deliveries to s.
	Unsubscribe(s *tag.Subscription)
}

// History answers the bucketed reads of the public display's sparklines;
// *store.DB implements it. Called concurrently.
type History interface {
	// Aggregate splits [from, to) into n equal buckets and aggregates
	// each (see docs/api.md, "Buckets").
	Aggregate(tag string, from, to int64, n int, agg model.Agg) ([]store.Bucket, error)
}

// liveWriteTimeout bounds one write to a live client: a browser that stops
// reading (a sleeping phone) is dropped instead of holding a goroutine and
// its subscription forever.
const liveWriteTimeout = 30 * time.Second

// liveValue is one current value as the live stream sends it.
type liveValue struct {
	Tag string
	T   int64
	V   float64
	Q   model.Quality
	Has bool // false: the tag has a quality but no value yet (sent as null)
	// IsText marks a text tag, whose value is Text (sent as a string).
	IsText bool
	Text   string
}

// serveLive answers GET /api/v1/live with a server-sent events stream:
// one "snapshot" event with every current value, then "update" events
// with the values that changed, at most one per FlushInterval. Optional
// tag=T parameters restrict the stream to those tags. The data of both
// events is {"now": server ms, "values": [[tag, ms, value|null, quality], ...]};
// "now" lets the page compute ages without trusting its own clock.
func (s *Server) serveLive(w http.ResponseWriter, r *http.Request) {
	setSecurityHeaders(w.Header())
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method "+r.Method+" not allowed", http.StatusMethodNotAllowed)
		return
	}
	if s.opts.Source == nil && s.opts.Table == nil {
		http.Error(w, "live values are not available", http.StatusNotFound)
		return
	}
	if s.closed() {
		http.Error(w, "server is shutting down", http.StatusServiceUnavailable)
		return
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		w.Header().Set("Retry-After", "10")
		http.Error(w, "too many live streams", http.StatusServiceUnavailable)
		return
	}
	var only map[string]bool
	if names := r.URL.Query()["tag"]; len(names) > 0 {
		only = make(map[string]bool, len(names))
		for _, n := range names {
			only[n] = true
		}
	}
	ctx, cancel := s.streamContext(r)
	defer cancel()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	st := &liveStream{w: w, rc: http.NewResponseController(w), only: only, now: s.opts.Now}
	var err error
	if s.opts.Table != nil {
		err = s.pushLoop(ctx, st, r.RemoteAddr)
	} else {
		err = s.pollLoop(ctx, st)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.Debug("live stream ended", "remote", r.RemoteAddr, "err", err)
	}
}

// liveStream writes events to one client, reusing its buffers.
type liveStream struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	only map[string]bool // nil: every tag
	buf  []byte
	vals []liveValue
	now  func() time.Time
}

// send writes one event and flushes it.
func (st *liveStream) send(event string, vals []liveValue) error {
	st.buf = appendEvent(st.buf[:0], event, st.now().UnixMilli(), vals)
	return st.write(st.buf)
}

func (st *liveStream) write(b []byte) error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(liveWriteTimeout)) // unsupported writers simply have none
	if _, err := st.w.Write(b); err != nil {
		return err
	}
	return st.rc.Flush()
}

func (st *liveStream) keep(name string) bool { return st.only == nil || st.only[name] }

// pushLoop streams the table's changes. The subscription is made before
// the snapshot is read, so no change falls between them (one may be sent
// twice, which is harmless).
func (s *Server) pushLoop(ctx context.Context, st *liveStream, remote string) error {
	sub := s.opts.Table.Subscribe(tag.SubOptions{Name: "web live " + remote, Mode: tag.Coalesce})
	defer s.opts.Table.Unsubscribe(sub)
	cur, err := s.opts.Table.Latest()
	if err != nil {
		return err
	}
	inTable := make(map[string]bool, len(cur))
	for _, v := range cur {
		inTable[v.Tag] = true
		if st.keep(v.Tag) {
			st.vals = append(st.vals, liveValue{Tag: v.Tag, T: v.T, V: v.V, Q: v.Q, Has: v.Has, IsText: v.IsText, Text: v.Text})
		}
	}
	// Tags with stored values that the table has not seen since the start
	// (an import before a restart) are in the snapshot from the store.
	if s.opts.Source != nil {
		stored, err := s.opts.Source.Latest()
		if err != nil {
			return err
		}
		for _, l := range stored {
			if !inTable[l.Tag] && st.keep(l.Tag) {
				st.vals = append(st.vals, liveValue{Tag: l.Tag, T: l.T, V: l.V, Q: l.Q, Has: true, IsText: l.IsText, Text: l.Text})
			}
		}
	}
	if err := st.send("snapshot", st.vals); err != nil {
		return err
	}
	hb := time.NewTicker(s.opts.Heartbeat)
	defer hb.Stop()
	pause := time.NewTimer(0)
	defer pause.Stop()
	var changes []tag.Change
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-hb.C:
			if err := st.write([]byte(": ping\n\n")); err != nil {
				return err
			}
			continue
		case <-sub.Ready():
		}
		changes = sub.Take(changes[:0])
		st.vals = st.vals[:0]
		for _, c := range changes {
			if st.keep(c.Tag) {
				st.vals = append(st.vals, liveValue{Tag: c.Tag, T: c.T, V: c.V, Q: c.Q, Has: c.Has, IsText: c.IsText, Text: c.Text})
			}
		}
		if len(st.vals) > 0 {
			if err := st.send("update", st.vals); err != nil {
				return err
			}
			hb.Reset(s.opts.Heartbeat)
		}
		// Wait before taking again: changes made meanwhile coalesce per
		// tag in the subscription, which bounds the message rate.
		pause.Reset(s.opts.FlushInterval)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-pause.C:
		}
	}
}

// pollLoop streams changes found by polling Source, for servers without a
// tag table (e.g. an import-only archive).
func (s *Server) pollLoop(ctx context.Context, st *liveStream) error {
	prev := make(map[string]liveValue)
	poll := func() error {
		cur, err := s.opts.Source.Latest()
		if err != nil {
			return err
		}
		st.vals = st.vals[:0]
		for _, l := range cur {
			if !st.keep(l.Tag) {
				continue
			}
			v := liveValue{Tag: l.Tag, T: l.T, V: l.V, Q: l.Q, Has: true, IsText: l.IsText, Text: l.Text}
			if p, ok := prev[l.Tag]; ok && p == v {
				continue
			}
			prev[l.Tag] = v
			st.vals = append(st.vals, v)
		}
		return nil
	}
	if err := poll(); err != nil {
		return err
	}
	if err := st.send("snapshot", st.vals); err != nil {
		return err
	}
	tick := time.NewTicker(s.opts.PollInterval)
	defer tick.Stop()
	quiet := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if err := poll(); err != nil {
			return err
		}
		if len(st.vals) > 0 {
			quiet = 0
			if err := st.send("update", st.vals); err != nil {
				return err
			}
			continue
		}
		if quiet += s.opts.PollInterval; quiet >= s.opts.Heartbeat {
			quiet = 0
			if err := st.write([]byte(": ping\n\n")); err != nil {
				return err
			}
		}
	}
}
