// Package alarm watches tags and raises, clears, logs and notifies alarms.
//
// An alarm is a condition on one tag (a limit crossed, a digital state, a
// station not communicating, a value gone stale) or a condition another
// part sets directly (a refused control write). The Engine follows the tag
// table's changes, so a crossing is judged when its sample arrives, and
// checks delays and stale values on a scan; a delay that expires between
// two scans wakes the engine at its deadline, so alarms are raised on time,
// not up to a scan late.
//
// Alarm states follow ISA-18.2 in short: an alarm is normal, then active
// (raised, not acknowledged), acknowledged (still active), or cleared
// (no longer active but not yet acknowledged); an acknowledged alarm that
// clears, or a cleared alarm that is acknowledged, is normal again. Every
// transition is an Event, appended and fsynced to the alarm log before it
// is notified.
package alarm

import (
	"fmt"
	"time"

	"github.com/pith-historian/pith/internal/model"
)

// Kind is what an alarm watches.
type Kind uint8

// The alarm kinds.
const (
	KindHiHi     Kind = iota + 1 // value > Limit
	KindHi                       // value > Limit
	KindLo                       // value < Limit
	KindLoLo                     // value < Limit
	KindState                    // value == Value
	KindStale                    // no new sample for MaxAge
	KindComm                     // a station's comm tag reads 0
	KindExternal                 // set by another part with Engine.Set
)

var kindNames = [...]string{"", "hihi", "hi", "lo", "lolo", "state", "stale", "comm", "external"}

// String returns the configuration name of the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) && k != 0 {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind is the inverse of Kind.String.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if i > 0 && n == s {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown alarm type %q", s)
}

// Def describes one alarm.
type Def struct {
	Name     string        // unique; the id in the API
	Kind     Kind          // what is watched
	Tag      string        // the watched tag (for KindComm the station's comm tag)
	Limit    float64       // threshold of the limit kinds
	Deadband float64       // a raised limit alarm clears once past Limit -+ Deadband
	Value    float64       // KindState: the active value
	MaxAge   time.Duration // KindStale: the largest sample age
	OnDelay  time.Duration // how long the condition must hold before raising
	OffDelay time.Duration // how long it must be gone before clearing
	Severity string        // info, warning, major, critical
	Message  string        // for people
}

// State is where an alarm is in its life.
type State uint8

// The alarm states.
const (
	StateNormal       State = iota // not active, nothing to acknowledge
	StateActive                    // active, not acknowledged
	StateAcknowledged              // active and acknowledged
	StateCleared                   // no longer active, not acknowledged
)

var stateNames = [...]string{"normal", "active", "acknowledged", "cleared"}

// String returns the API name of the state.
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

func parseState(s string) (State, bool) {
	for i, n := range stateNames {
		if n == s {
			return State(i), true
		}
	}
	return 0, false
}

func stateOf(active, acked bool) State {
	switch {
	case active && !acked:
		return StateActive
	case active:
		return StateAcknowledged
	case !acked:
		return StateCleared
	}
	return StateNormal
}

// delayed is the on/off delay state machine shared by every kind: the
// alarm's active flag follows the condition once the condition has held
// its new value without interruption for the delay of that direction.
type delayed struct {
	active  bool
	pending bool      // the condition differs from active since `since`
	since   time.Time // start of the pending change
}

// step feeds the condition observed at now and reports whether active
// changed.
func (d *delayed) step(now time.Time, cond bool, on, off time.Duration) bool {
	if cond == d.active {
		d.pending = false
		return false
	}
	if !d.pending {
		d.pending, d.since = true, now
	}
	delay := on
	if d.active {
		delay = off
	}
	if now.Sub(d.since) < delay {
		return false
	}
	d.active, d.pending = cond, false
	return true
}

// deadline returns when a pending change takes effect, if one is pending.
func (d *delayed) deadline(on, off time.Duration) (time.Time, bool) {
	if !d.pending {
		return time.Time{}, false
	}
	if d.active {
		return d.since.Add(off), true
	}
	return d.since.Add(on), true
}

// reset forgets a pending change, when no judgement can be made.
func (d *delayed) reset() { d.pending = false }

// valueCond says whether a value makes the alarm's condition hold, given
// whether it is active now (the deadband applies on the way back). ok is
// false when the sample cannot be judged (bad quality, no value).
func (def *Def) valueCond(v float64, q model.Quality, has, active bool) (cond, ok bool) {
	if def.Kind == KindComm {
		// The scheduler writes 0 with good quality when a poll fails; a
		// bad comm tag means the station is not reporting at all.
		return !has || q == model.QualityBad || v == 0, true
	}
	if !has || q == model.QualityBad {
		return false, false
	}
	switch def.Kind {
	case KindHi, KindHiHi:
		if active {
			return v > def.Limit-def.Deadband, true
		}
		return v > def.Limit, true
	case KindLo, KindLoLo:
		if active {
			return v < def.Limit+def.Deadband, true
		}
		return v < def.Limit, true
	case KindState:
		return v == def.Value, true
	}
	return false, false
}
