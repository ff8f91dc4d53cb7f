package forward

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/testpeer"
)

// lostAckSink passes batches to a NATSSink; batch number n (from 0) is
// published and stored, then handled as if its acks had been lost on the
// way back: the sink is left as a failed Send leaves it, and the error
// comes only after wait, past the stream's duplicate window. With stop
// set, the forwarder is stopped instead of seeing the error, as a crash
// between the publish and the Ack leaves it.
type lostAckSink struct {
	*NATSSink
	n    int32
	wait time.Duration
	stop bool
	sent atomic.Int32
	lost atomic.Bool
}

func (s *lostAckSink) Send(ctx context.Context, b Batch) error {
	if s.sent.Load() != s.n || s.lost.Load() {
		if err := s.NATSSink.Send(ctx, b); err != nil {
			return err
		}
		s.sent.Add(1)
		return nil
	}
	seq := s.NATSSink.seq
	if err := s.NATSSink.Send(ctx, b); err != nil {
		return err
	}
	s.NATSSink.seq, s.NATSSink.unsure = seq, true // the acks never came
	s.lost.Store(true)
	if s.stop {
		<-ctx.Done()
		return ctx.Err()
	}
	sleep(ctx, s.wait)
	return errors.New("wait for ack: connection lost")
}

// TestNATSResendPastDupWindow: a batch whose publish the stream stored but
// whose acks were lost is sent again only after the stream's duplicate
// window has passed (a long outage, or an edge down for longer than the
// window), after a reconnect in the same process and after a restart.
// The stream must still hold each message once: the sink reads back what
// it published after the last sequence it knew and does not send it again.
func TestNATSResendPastDupWindow(t *testing.T) {
	cl := testpeer.StartNATSCluster(t, testpeer.NATSServer(t), 1)
	url := cl.URL(0)
	const window = time.Second
	newSink := func(t *testing.T, site string) *NATSSink {
		o := DefaultNATSOptions()
		o.URL, o.Site, o.DupWindow, o.Timeout = url, site, window, 5*time.Second
		s, err := NewNATSSink(o, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	for _, restart := range []bool{false, true} {
		name := "reconnect"
		if restart {
			name = "restart"
		}
		t.Run(name, func(t *testing.T) {
			site := testSite(t)
			dir := t.TempDir()
			o := testOptions(site)
			o.BatchPoints = 2000
			first := &lostAckSink{NATSSink: newSink(t, site), n: 4, wait: window + 500*time.Millisecond, stop: restart}
			h := openForwarder(t, dir, o, first)
			h.write(0, 20000, 1000)
			waitUntil(t, "a batch published without its acks", first.lost.Load)
			var sink *NATSSink = first.NATSSink
			if restart {
				h.close()
				first.Close()
				time.Sleep(window + 500*time.Millisecond)
				sink = newSink(t, site)
				h = openForwarder(t, dir, o, sink)
			}
			h.drained()
			h.close()
			if sink.Duplicates() < 1 {
				t.Errorf("the sink skipped %d messages, want those of the batch whose acks were lost", sink.Duplicates())
			}
			ids, pts := streamMessages(t, url, sink.Subject())
			checkUniqueIDs(t, ids)
			checkSeq(t, pts, 20000)
		})
	}
}
