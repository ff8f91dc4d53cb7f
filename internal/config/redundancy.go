package config

import (
	"strings"
	"time"
)

// Redundancy makes this Pith one box of a hot-standby pair
// (docs/redundancy.md): the box holding a lease in a NATS JetStream
// key-value bucket acts, the other mirrors it. It is on when Group is set.
type Redundancy struct {
	// Group names the pair; both boxes give the same one.
	Group string `toml:"group"`
	// Node names this box within the pair; each box its own.
	Node string `toml:"node"`
	// NATS is the NATS cluster holding the lease and carrying the values:
	// nats://host:port, several separated by commas.
	NATS string `toml:"nats"`
	// LeaseTTL is how long a lease lives unless renewed: the takeover
	// time is about LeaseTTL plus one poll period. Zero: DefaultLeaseTTL.
	LeaseTTL Duration `toml:"lease_ttl"`
	// URL is the address clients reach this box at (http(s)://host:port):
	// the other box names it when it refuses a control request or a
	// pushed write as the standby. Optional.
	URL string `toml:"url"`
}

// TTL returns the lease TTL in force.
func (r Redundancy) TTL() time.Duration {
	if r.LeaseTTL == 0 {
		return DefaultLeaseTTL
	}
	return r.LeaseTTL.Std()
}

// DefaultLeaseTTL is the lease TTL when lease_ttl is not given.
const DefaultLeaseTTL = 2 * time.Second

// Enabled reports whether this Pith is one box of a pair.
func (r Redundancy) Enabled() bool { return r.Group != "" }

func (r *Redundancy) validate(add func(key, format string, args ...any)) {
	if !r.Enabled() {
		return
	}
	if err := checkSegment(r.Group); err != nil {
		add("redundancy.group", "%v", err)
	}
	if err := checkSegment(r.Node); err != nil || strings.Contains(r.Node, ".") {
		add("redundancy.node", "want this box's name (letters, digits, '_', '-'), got %q", r.Node)
	}
	if r.NATS == "" {
		add("redundancy.nats", "want the NATS servers holding the lease (nats://host:port, comma separated)")
	} else if err := checkNATSURLs(r.NATS); err != nil {
		add("redundancy.nats", "%v", err)
	}
	if t := r.TTL(); t < 400*time.Millisecond || t > time.Minute {
		add("redundancy.lease_ttl", "want 400ms to 1m, got %s", t)
	}
	if r.URL != "" && !hasScheme(r.URL, "http://", "https://") {
		add("redundancy.url", "want http(s)://host:port clients reach this box at, got %q", r.URL)
	}
}
