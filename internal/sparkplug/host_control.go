package sparkplug

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/pith-historian/pith/internal/api"
)

// ErrNotHostTag is returned by Host.Control for a tag the host does not
// archive: the caller tries the next control path.
var ErrNotHostTag = errors.New("not a metric of this sparkplug host")

// metricRef locates an archived metric.
type metricRef struct {
	node *node
	dev  string
	ms   *metricState
}

// writeWait is a control write waiting for its metric to report the
// value written.
type writeWait struct {
	v    float64
	done chan struct{}
}

// confirm releases the writes of ms waiting for v; h.mu is held.
func (h *hostState) confirm(ms *metricState, v float64) {
	ws := h.waiters[ms]
	if len(ws) == 0 {
		return
	}
	out := ws[:0]
	for _, w := range ws {
		if sameValue(ms.dt, w.v, v) {
			close(w.done)
			continue
		}
		out = append(out, w)
	}
	if len(out) == 0 {
		delete(h.waiters, ms)
	} else {
		h.waiters[ms] = out
	}
}

// sameValue compares a written value with a reported one at the
// precision of the metric's type.
func sameValue(dt DataType, a, b float64) bool {
	if dt == TypeFloat {
		return float32(a) == float32(b)
	}
	return a == b
}

// commandMetric encodes v as a metric of type dt, refusing what the type
// cannot hold: a clipped or rounded setpoint is a different command.
func commandMetric(name string, dt DataType, v float64) (Metric, error) {
	m := Metric{Name: []byte(name), Datatype: dt, Timestamp: uint64(time.Now().UnixMilli())}
	whole := v == math.Trunc(v)
	inRange := func(lo, hi float64) error {
		if !whole || v < lo || v > hi {
			return fmt.Errorf("%w: %v does not fit %s", api.ErrControlValue, v, dt)
		}
		return nil
	}
	var err error
	switch dt {
	case TypeInt8:
		err = inRange(math.MinInt8, math.MaxInt8)
		m.Kind, m.Bits = KindInt, uint64(uint32(int32(v)))
	case TypeInt16:
		err = inRange(math.MinInt16, math.MaxInt16)
		m.Kind, m.Bits = KindInt, uint64(uint32(int32(v)))
	case TypeInt32:
		err = inRange(math.MinInt32, math.MaxInt32)
		m.Kind, m.Bits = KindInt, uint64(uint32(int32(v)))
	case TypeUInt8:
		err = inRange(0, math.MaxUint8)
		m.Kind, m.Bits = KindInt, uint64(v)
	case TypeUInt16:
		err = inRange(0, math.MaxUint16)
		m.Kind, m.Bits = KindInt, uint64(v)
	case TypeUInt32:
		err = inRange(0, math.MaxUint32)
		m.Kind, m.Bits = KindLong, uint64(v)
	case TypeInt64:
		err = inRange(-(1 << 53), 1<<53)
		m.Kind, m.Bits = KindLong, uint64(int64(v))
	case TypeUInt64, TypeDateTime:
		err = inRange(0, 1<<53)
		m.Kind, m.Bits = KindLong, uint64(v)
	case TypeBoolean:
		if v != 0 && v != 1 {
			err = fmt.Errorf("%w: a Boolean takes 0 or 1, not %v", api.ErrControlValue, v)
		}
		m.Kind, m.Bits = KindBool, uint64(v)
	case TypeFloat:
		if math.Abs(v) > math.MaxFloat32 {
			err = fmt.Errorf("%w: %v does not fit Float", api.ErrControlValue, v)
		}
		m.Kind, m.Bits = KindFloat, uint64(math.Float32bits(float32(v)))
	default:
		m.Datatype, m.Kind, m.Bits = TypeDouble, KindDouble, math.Float64bits(v)
	}
	return m, err
}

// Control writes a tag the host archives to its edge node: an NCMD (node
// metric) or DCMD (device metric) setting the metric, in the type its
// birth declared. Sparkplug has no write acknowledgement, so Control
// returns once the node reported the value written (at once when it is
// already the current one), or the context's error when it did not in
// time. A tag that does not match Writable is refused; one the host does
// not archive is ErrNotHostTag.
func (h *Host) Control(ctx context.Context, name string, value float64, who string) error {
	h.mu.Lock()
	ref, ok := h.st.byTag[name]
	if !ok {
		h.mu.Unlock()
		return fmt.Errorf("write tag %q: %w", name, ErrNotHostTag)
	}
	if !Match(h.opts.Writable, name) {
		h.mu.Unlock()
		return fmt.Errorf("write tag %q: %w: not in the writable tags of sparkplug host %q", name, api.ErrControlForbidden, h.opts.Name)
	}
	n, ms := ref.node, ref.ms
	if ms.text {
		h.mu.Unlock()
		return fmt.Errorf("write tag %q: %w: a %s metric holds text, and the control path writes numbers", name, api.ErrControlValue, ms.dt)
	}
	online := n.scope != nil && n.scope.online
	if d := n.devices[ref.dev]; ref.dev != "" && (d == nil || !d.online) {
		online = false
	}
	if !online {
		h.mu.Unlock()
		return fmt.Errorf("write tag %q: edge node %s/%s offline", name, n.group, n.id)
	}
	m, err := commandMetric(ms.name, ms.dt, value)
	if err != nil {
		h.mu.Unlock()
		return fmt.Errorf("write tag %q: %w", name, err)
	}
	w := &writeWait{v: value, done: make(chan struct{})}
	if ms.has && sameValue(ms.dt, ms.last, value) {
		close(w.done)
	} else {
		h.st.waiters[ms] = append(h.st.waiters[ms], w)
	}
	t := Topic{Group: n.group, Type: NCMD, Node: n.id}
	if ref.dev != "" {
		t.Type, t.Device = DCMD, ref.dev
	}
	cm := h.cm
	h.mu.Unlock()
	defer h.dropWait(ms, w)
	if cm == nil {
		return fmt.Errorf("write tag %q: sparkplug host %q not connected", name, h.opts.Name)
	}
	payload := Append(nil, &Payload{Timestamp: uint64(time.Now().UnixMilli()), Metrics: []Metric{m}})
	if _, err := cm.Publish(ctx, &paho.Publish{Topic: t.String(), QoS: 0, Payload: payload}); err != nil {
		return fmt.Errorf("write tag %q: publish %s: %w", name, t, err)
	}
	h.opts.Logger.Info("sparkplug command published", "who", who, "tag", name, "topic", t.String(), "metric", ms.name, "value", value)
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("write tag %q: %s did not report the value written: %w", name, t, ctx.Err())
	}
}

// dropWait forgets a write that ended.
func (h *Host) dropWait(ms *metricState, w *writeWait) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.st.waiters[ms]
	for i, x := range ws {
		if x == w {
			h.st.waiters[ms] = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(h.st.waiters[ms]) == 0 {
		delete(h.st.waiters, ms)
	}
}
