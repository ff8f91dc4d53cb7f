package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/pith-historian/pith/internal/atomicfile"
	"github.com/pith-historian/pith/internal/store"
)

// Log is the store's log as a Forwarder reads it; *store.Follower
// implements it. Next is called from the forwarder's goroutine only; Ack
// after the upstream confirmed everything up to pos.
type Log interface {
	// Next blocks until committed, durable entries follow the last ones
	// returned and returns about max points of them.
	Next(ctx context.Context, max int) (store.Batch, error)
	// AckToken makes pos, the End of a batch Next returned, the durable
	// cursor, and stores token with it in the same write: a restart
	// resumes there, and Token returns token.
	AckToken(pos store.Position, token uint64) error
	// Token returns the token stored with the durable cursor, 0 when
	// none.
	Token() uint64
}

// Resumer is implemented by a Sink whose upstream numbers what it stores
// (a JetStream stream's sequence). The forwarder keeps that number with
// its cursor, so that after a restart the sink can find what it published
// past the cursor without an acknowledgement (the publish was stored, the
// ack lost) and send it no second time, however long ago that was.
// Both methods are called from the forwarder's goroutine.
type Resumer interface {
	// Resume is called once before the first Send with the token stored
	// with the cursor: where the upstream stood when the cursor was
	// written (0 when unknown).
	Resume(token uint64)
	// Token returns where the upstream stands after the last confirmed
	// Send: everything the sink stores after it comes from later sends.
	Token() uint64
}

var _ Log = (*store.Follower)(nil)

// Defaults of Options.
const (
	DefaultBatchPoints = 10000                  // points asked of the log per batch
	DefaultRetryMin    = 100 * time.Millisecond // first wait after a failed send
	DefaultRetryMax    = 5 * time.Second        // longest wait between retries: also how late a recovered upstream is noticed
	DefaultAckInterval = 250 * time.Millisecond // longest a confirmed batch waits for its Ack
)

// Options configure a Forwarder.
type Options struct {
	Site        string        // the first part of entry ids; required
	MaxBytes    int64         // while the upstream fails, batches are released once the log lag passes this; 0 never
	MaxAge      time.Duration // while the upstream fails, batches whose newest value is older are released; 0 never
	BatchPoints int           // points per batch
	RetryMin    time.Duration // first wait after a failed send; doubles up to RetryMax
	RetryMax    time.Duration // longest wait between retries
	PoisonDir   string        // where refused batches are set aside; "" logs them only
	// AckInterval is the longest a confirmed batch waits to be
	// acknowledged to the log while more follow: what a crash resends.
	// Keep it far under the upstream's duplicate window.
	AckInterval time.Duration
}

// DefaultOptions returns the options of a forwarder that never releases
// a batch it could not send (the store's follower budget still applies).
func DefaultOptions() Options {
	return Options{BatchPoints: DefaultBatchPoints, RetryMin: DefaultRetryMin, RetryMax: DefaultRetryMax, AckInterval: DefaultAckInterval}
}

// Stats describe a forwarder. Counters only grow.
type Stats struct {
	Sent     uint64 // points the upstream confirmed
	Batches  uint64 // batches the upstream confirmed
	Errors   uint64 // failed sends (each retried)
	Dropped  uint64 // points released unsent (MaxBytes, MaxAge) or refused permanently
	Deletes  uint64 // deletes handed to the sink
	OldestMs int64  // Unix ms of the oldest value of the batch in flight; 0 when idle
	Acked    store.Position
	// WaitingSince is when the forwarder began waiting for the store to
	// commit more, having sent everything before; zero while it reads or
	// sends. A follower's lag may count trailing records that carry no
	// entries (a restart's open record), which are acknowledged only with
	// the next entry: a forwarder waiting for a while has nothing to send.
	WaitingSince time.Time
}

// Forwarder moves what the store committed to one upstream: it reads a
// batch from its follower (Log), hands it to its sink and acknowledges it
// to the follower only once the upstream confirmed it, so that a crash at
// any moment resends (with the same entry ids) rather than loses. There
// is no queue of its own: the backlog is the store's WAL, held for the
// follower within the store's budget.
type Forwarder struct {
	log  Log
	sink Sink
	opts Options
	lg   *slog.Logger

	mu  sync.Mutex
	st  Stats
	lag int64 // bytes of log not yet acknowledged, as last told by SetLag
}

// NewForwarder returns a forwarder of l to sink; Run starts it.
func NewForwarder(l Log, sink Sink, opts Options, lg *slog.Logger) (*Forwarder, error) {
	if opts.Site == "" {
		return nil, errors.New("create forwarder: site name is empty")
	}
	def := DefaultOptions()
	if opts.BatchPoints <= 0 {
		opts.BatchPoints = def.BatchPoints
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = def.RetryMin
	}
	if opts.AckInterval < 0 {
		opts.AckInterval = 0
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = max(def.RetryMax, opts.RetryMin)
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	return &Forwarder{log: l, sink: sink, opts: opts, lg: lg}, nil
}

// Stats returns the forwarder's counters; safe for concurrent use.
func (f *Forwarder) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.st
}

// SetLag tells the forwarder how many bytes of log its follower has not
// acknowledged (store.FollowerStats.LagBytes), for MaxBytes. Safe for
// concurrent use.
func (f *Forwarder) SetLag(bytes int64) {
	f.mu.Lock()
	f.lag = bytes
	f.mu.Unlock()
}

// Run forwards until ctx ends or the log is closed. Confirmed batches are
// acknowledged to the log at most every AckInterval (each Ack writes the
// follower's cursor durably), and at once when the log has nothing more
// or Run ends: a crash resends at most that much, with the same ids.
func (f *Forwarder) Run(ctx context.Context) {
	wait := f.opts.RetryMin
	var pending store.Position // End of the last confirmed batch not acknowledged yet
	var acked time.Time        // when the last Ack was written
	ack := func() {
		if pending == (store.Position{}) {
			return
		}
		var token uint64
		if r, ok := f.sink.(Resumer); ok {
			token = r.Token()
		} else {
			token = f.log.Token()
		}
		if err := f.log.AckToken(pending, token); err != nil {
			// The batches come again after a restart, with the same ids.
			f.lg.Error("acknowledge forwarded batches", "end", pending, "err", err)
		} else {
			f.mu.Lock()
			f.st.Acked = pending
			f.mu.Unlock()
		}
		pending, acked = store.Position{}, time.Now()
	}
	defer ack()
	if r, ok := f.sink.(Resumer); ok {
		r.Resume(f.log.Token())
	}
	for ctx.Err() == nil {
		f.mu.Lock()
		f.st.WaitingSince = time.Now()
		f.mu.Unlock()
		nctx, cancel := ctx, context.CancelFunc(func() {})
		if pending != (store.Position{}) {
			// Wait for more only until the pending Ack is due.
			nctx, cancel = context.WithTimeout(ctx, max(0, f.opts.AckInterval-time.Since(acked)))
		}
		sb, err := f.log.Next(nctx, f.opts.BatchPoints)
		cancel()
		f.mu.Lock()
		f.st.WaitingSince = time.Time{}
		f.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
				return
			}
			if nctx.Err() != nil {
				ack() // the log has nothing more for now
				continue
			}
			f.lg.Error("read store log; retrying", "retry_in", wait, "err", err)
			sleep(ctx, wait)
			wait = min(2*wait, f.opts.RetryMax)
			continue
		}
		wait = f.opts.RetryMin
		b := toBatch(f.opts.Site, sb)
		if len(b.Entries) > 0 && !f.deliver(ctx, b) {
			return
		}
		pending = sb.End
		if time.Since(acked) >= f.opts.AckInterval {
			ack()
		}
	}
}

// deliver sends b until the upstream confirms it, refuses it for good or
// the release policy lets it go; it returns false when ctx ended first.
func (f *Forwarder) deliver(ctx context.Context, b Batch) bool {
	oldest, newest := span(b)
	f.mu.Lock()
	f.st.OldestMs = oldest
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.st.OldestMs = 0
		f.mu.Unlock()
	}()
	wait := f.opts.RetryMin
	for {
		err := f.sink.Send(ctx, b)
		switch {
		case err == nil:
			f.mu.Lock()
			f.st.Sent += uint64(b.Points)
			f.st.Batches++
			f.st.Deletes += uint64(b.Deletes())
			f.mu.Unlock()
			return true
		case ctx.Err() != nil:
			return false
		case errors.Is(err, ErrPermanent):
			f.poison(b, err)
			return true
		}
		f.mu.Lock()
		f.st.Errors++
		lag := f.lag
		f.mu.Unlock()
		if why := f.release(newest, lag); why != "" {
			f.lg.Warn("upstream unreachable; released values unsent", "batch", b.ID, "points", b.Points, "deletes", b.Deletes(), "because", why, "err", err)
			f.drop(b)
			return true
		}
		f.lg.Warn("forward send failed; retrying", "batch", b.ID, "retry_in", wait, "err", err)
		f.pause(ctx, wait)
		if ctx.Err() != nil {
			return false
		}
		wait = min(2*wait, f.opts.RetryMax)
	}
}

// release says why a batch whose send failed may be let go, or "".
func (f *Forwarder) release(newest, lag int64) string {
	if f.opts.MaxAge > 0 && newest != 0 && time.Since(time.UnixMilli(newest)) > f.opts.MaxAge {
		return fmt.Sprintf("newest value older than max_age %s", f.opts.MaxAge)
	}
	if f.opts.MaxBytes > 0 && lag > f.opts.MaxBytes {
		return fmt.Sprintf("backlog of %d bytes past max_bytes %d", lag, f.opts.MaxBytes)
	}
	return ""
}

func (f *Forwarder) drop(b Batch) {
	f.mu.Lock()
	f.st.Dropped += uint64(b.Points)
	f.mu.Unlock()
}

// poison counts a refused batch as dropped and sets its points aside in
// PoisonDir (batch encoding, docs/format/forward.md), where an operator
// can inspect them.
func (f *Forwarder) poison(b Batch, cause error) {
	f.drop(b)
	f.lg.Error("upstream refused batch; set aside", "batch", b.ID, "points", b.Points, "deletes", b.Deletes(), "err", cause)
	if f.opts.PoisonDir == "" {
		return
	}
	if err := os.MkdirAll(f.opts.PoisonDir, 0o755); err != nil {
		f.lg.Error("create poison dir", "err", err)
		return
	}
	path := filepath.Join(f.opts.PoisonDir, firstID(b)+".batch")
	if err := atomicfile.Write(path, EncodeBatch(time.Now().UnixMilli(), b.allPoints(nil)), 0o644); err != nil {
		f.lg.Error("write poison batch", "batch", b.ID, "err", err)
	}
}

// toBatch converts a batch of the store's log. Replica entries (values
// copied from the other Pith of a redundant pair, which forwards them
// itself) are left out: a site's values are forwarded once. A batch of
// replicas only has no entries.
func toBatch(site string, sb store.Batch) Batch {
	b := Batch{Entries: make([]Entry, 0, len(sb.Entries)), Points: sb.Points}
	var last store.Position
	for _, e := range sb.Entries {
		if e.Replica {
			b.Points -= len(e.Points) + len(e.Texts)
			continue
		}
		last = e.ID
		b.Entries = append(b.Entries, Entry{})
		out := &b.Entries[len(b.Entries)-1]
		out.ID = EntryID(site, e.ID.Segment, e.ID.Offset)
		switch e.Kind {
		case store.EntryPoints:
			out.Points, out.Texts = e.Points, e.Texts
		case store.EntryDelete:
			out.Delete = &Delete{Tag: e.Tag, From: e.From, To: e.To}
		case store.EntryLabels:
			out.Labels = e.Series
		}
	}
	if len(b.Entries) == 0 {
		return b
	}
	b.ID = b.Entries[0].ID
	if len(b.Entries) > 1 {
		b.ID += fmt.Sprintf("..%d-%d", last.Segment, last.Offset)
	}
	return b
}

// firstID returns the id of b's first entry.
func firstID(b Batch) string {
	if len(b.Entries) == 0 {
		return b.ID
	}
	return b.Entries[0].ID
}

// span returns the oldest and newest time of b's points; 0, 0 when none.
func span(b Batch) (oldest, newest int64) {
	first := true
	for i := range b.Entries {
		for _, p := range b.Entries[i].Points {
			if first || p.T < oldest {
				oldest = p.T
			}
			if first || p.T > newest {
				newest = p.T
			}
			first = false
		}
	}
	return oldest, newest
}

// sleep waits d or until ctx is done.
// pause waits d before a send is tried again, less when the sink says its
// upstream is back (Waker).
func (f *Forwarder) pause(ctx context.Context, d time.Duration) {
	w, ok := f.sink.(Waker)
	if !ok {
		sleep(ctx, d)
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-w.Woken():
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
