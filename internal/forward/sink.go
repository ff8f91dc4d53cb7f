package forward

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pith-historian/pith/internal/model"
)

// Sink sends batches to one upstream. A Forwarder calls Send from a
// single goroutine, one batch at a time, in the store's commit order.
type Sink interface {
	// Send delivers b and returns nil only once the upstream confirmed
	// it. After a crash or a failed send the same entries come again
	// with the same ids, possibly grouped into other batches: the sink
	// passes the entry ids on (or writes idempotently) so that the
	// upstream holds each value once. An error wrapping ErrPermanent
	// sets the batch aside; any other error is retried. Send returns
	// early with ctx's error when the forwarder stops.
	Send(ctx context.Context, b Batch) error
}

// Waker is a Sink whose client notices by itself when its upstream is back
// (it reconnects on its own): the forwarder then sends again at once
// rather than at the end of its wait between retries (up to RetryMax).
type Waker interface {
	// Woken is signalled once the upstream may be reachable again.
	Woken() <-chan struct{}
}

// reconnected is the Woken signal of a sink whose client reconnects by
// itself: signalled each time the client is connected again.
type reconnected chan struct{}

func newReconnected() reconnected { return make(reconnected, 1) }

// Woken implements Waker.
func (r reconnected) Woken() <-chan struct{} { return r }

func (r reconnected) signal() {
	select {
	case r <- struct{}{}:
	default:
	}
}

// Batch is what a Forwarder hands its sink: committed entries of the
// store's log, in commit order.
type Batch struct {
	ID      string  // "<first entry id>..<segment>-<offset> of the last", for logs and headers
	Entries []Entry // at least one
	Points  int     // points in Entries
}

// Entry is one committed WAL record of the store: points, or a delete.
type Entry struct {
	// ID is "<site>-<segment>-<offset>": the site name and the WAL
	// position of the record (decimal). It never repeats within one data
	// directory and is the same on every delivery, so an upstream drops
	// an entry it already has.
	ID     string
	Points []model.Point // in write order; nil for a delete
	// Texts are the entry's text values, in write order (a record of
	// numbers and text: a line-protocol request with string fields, an
	// import with quoted values). Their index in the entry follows the
	// points: len(Points) + i.
	Texts  []model.TextPoint
	Delete *Delete // a committed delete; nil for points
	// Labels are committed tag labels (each tag with its new labels); nil
	// for points and deletes. Sinks whose upstream keeps tag metadata send
	// them (NATS, hence a central Pith; PostgreSQL); the others skip them.
	Labels []model.Series
}

// Delete removes the samples of Tag in [From, To), Unix ms.
type Delete struct {
	Tag      string
	From, To int64
}

// ErrPermanent is wrapped by sink errors that retrying cannot cure (the
// upstream refused the batch itself); such a batch is set aside.
var ErrPermanent = errors.New("refused permanently")

// EntryID returns the id of the WAL record at (segment, offset) of site.
func EntryID(site string, segment uint32, offset int64) string {
	return fmt.Sprintf("%s-%d-%d", site, segment, offset)
}

// Deletes returns how many entries of b are deletes.
func (b *Batch) Deletes() int {
	n := 0
	for i := range b.Entries {
		if b.Entries[i].Delete != nil {
			n++
		}
	}
	return n
}

// allPoints appends the points of every entry of b to dst.
func (b *Batch) allPoints(dst []model.Point) []model.Point {
	for i := range b.Entries {
		dst = append(dst, b.Entries[i].Points...)
	}
	return dst
}

// runs splits entries into runs: each delete alone, and the point entries
// between deletes together, in order.
func runs(entries []Entry) [][]Entry {
	var out [][]Entry
	for len(entries) > 0 {
		n := 1
		if entries[0].Delete == nil {
			for n < len(entries) && entries[n].Delete == nil {
				n++
			}
		}
		out = append(out, entries[:n])
		entries = entries[n:]
	}
	return out
}

// runID names a run of entries in logs and headers: its entry's id, or
// "<first id>..<segment>-<offset> of the last".
func runID(run []Entry) string {
	if len(run) == 1 {
		return run[0].ID
	}
	last := run[len(run)-1].ID
	// Drop the site: the part after the site is "<segment>-<offset>".
	if i := strings.LastIndexByte(last, '-'); i > 0 {
		if j := strings.LastIndexByte(last[:i], '-'); j >= 0 {
			last = last[j+1:]
		}
	}
	return run[0].ID + ".." + last
}
