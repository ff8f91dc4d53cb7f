package events

// ring keeps the most recent events for GET /api/v1/events. It is not
// safe for concurrent use; the Collector guards it with its mutex.
type ring struct {
	buf  []Event
	next int  // where the next event goes
	full bool // buf has wrapped
}

func newRing(n int) ring { return ring{buf: make([]Event, n)} }

func (r *ring) add(ev Event) {
	r.buf[r.next] = ev
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

// each calls fn on the events from the newest to the oldest until fn
// returns false.
func (r *ring) each(fn func(*Event) bool) {
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	for i := range n {
		j := r.next - 1 - i
		if j < 0 {
			j += len(r.buf)
		}
		if !fn(&r.buf[j]) {
			return
		}
	}
}
