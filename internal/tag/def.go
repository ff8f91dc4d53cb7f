// Package tag holds Pith's tag definitions and the current-value table,
// the hub every value passes through (docs/architecture.md, "The road of a
// value").
//
// Data flows one way through it. Acquisition stations and Pith's own
// system tags call Update with a batch of samples from one scan; the table
// keeps the newest value of every tag, applies each tag's archive policy
// and hands the samples that pass it synchronously to the archive Sink's
// Enqueue. Push inputs call Write, which stores the batch durably and
// atomically through the Sink's Write before the table applies it; a
// committed import is applied with Stored. Whatever the road, the table
// then fans the changes out to subscribers without ever blocking the
// producer.
//
// Subscriber kinds and what each gets when it falls behind:
//   - the archive is the Sink: a synchronous, non-blocking hand-off of every
//     sample that passes its tag's policy, in order; it never loses a value
//     unless the archive queue's byte bound is reached, which is counted on
//     both sides (Stats.Refused here, archive Stats.Dropped there);
//   - the Modbus server and the web live view subscribe in Coalesce mode:
//     they need current values, so a slow one gets the newest value per
//     tag and a count of the replaced ones;
//   - alarms and calculated tags subscribe in Queue mode: every change in
//     order up to a bound, then counted overflow;
//   - forwarders do not subscribe: they follow the store's log, which holds
//     every stored sample whatever its road.
//
// Lock ordering: Table.mu is taken first; while holding it the table calls
// Sink.Enqueue (which takes the archive queue's own lock) and takes each
// Subscription.mu briefly. Sink.Write is called without Table.mu.
// Consumers of a Subscription only take its own lock, so no cycle exists.
package tag

import (
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/pith-historian/pith/internal/model"
)

// ID is the dense handle of a defined tag: an index into the table, stable
// for the life of the table. Producers resolve names to IDs once and then
// update by ID, which keeps the hot path free of map lookups.
type ID uint32

// Policy says which samples of a tag go to the archive.
type Policy uint8

// The archive policies. ArchiveChange is the zero value and the default.
// Quality changes always pass, whatever the policy.
const (
	// ArchiveChange archives a sample when its value or quality differs
	// from the last archived one.
	ArchiveChange Policy = iota
	// ArchiveAll archives every sample.
	ArchiveAll
	// ArchiveDeadband archives a sample when it differs from the last
	// archived value by at least Def.Deadband (absolute units), the
	// meaning of the configuration's deadband.
	ArchiveDeadband
)

var policyNames = [...]string{"change", "all", "deadband"}

// String returns the configuration name of the policy.
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// ParsePolicy is the inverse of Policy.String; the empty string means the
// default, ArchiveChange.
func ParsePolicy(s string) (Policy, error) {
	if s == "" {
		return ArchiveChange, nil
	}
	for i, n := range policyNames {
		if n == s {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown archive policy %q (want all, change or deadband)", s)
}

// Def describes a tag. Name is required; the rest is metadata shown by the
// API plus the archive policy.
type Def struct {
	Name        string  // dotted path, e.g. "site.pump1.flow"
	Unit        string  // engineering unit, e.g. "m3/h"
	Description string  // free text for people
	Source      string  // who produces it, e.g. "modbus:plc1", "import", "pith"
	Archive     Policy  // which samples are archived
	Deadband    float64 // absolute deadband for ArchiveDeadband; must be >= 0
	// Labels are the key/value pairs the tag arrived with (remote_write
	// labels, line-protocol measurement, field and tag keys), sorted by
	// name; nil for none. They are metadata kept once per tag, never per
	// sample; model.Labels.Check bounds them.
	Labels model.Labels
}

// ErrUnknownTag is returned (wrapped, naming the tag) for names the table
// has never defined.
var ErrUnknownTag = errors.New("unknown tag")

// maxNameLen bounds tag names so that one bad import line cannot create a
// megabyte-long key in every layer below.
const maxNameLen = 256

// CheckName reports whether name is a usable tag name: non-empty, at most
// 256 bytes, no spaces, commas, quotes or control characters (they would
// break CSV export and line protocol), no empty dotted segment.
func CheckName(name string) error {
	if name == "" {
		return errors.New("check tag name: empty")
	}
	if len(name) > maxNameLen {
		return fmt.Errorf("check tag name %.40q...: longer than %d bytes", name, maxNameLen)
	}
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return fmt.Errorf("check tag name %q: empty path segment", name)
	}
	for _, r := range name {
		if r == ',' || r == '"' || r == '\'' || r == '\\' || unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("check tag name %q: character %q not allowed", name, r)
		}
	}
	return nil
}

// check validates a whole definition.
func (d *Def) check() error {
	if err := CheckName(d.Name); err != nil {
		return err
	}
	if d.Archive > ArchiveDeadband {
		return fmt.Errorf("check tag %q: unknown archive policy %d", d.Name, d.Archive)
	}
	if !(d.Deadband >= 0) || d.Deadband > 1e300 {
		return fmt.Errorf("check tag %q: deadband %v must be a finite number >= 0", d.Name, d.Deadband)
	}
	if err := d.Labels.Check(); err != nil {
		return fmt.Errorf("check tag %q: %w", d.Name, err)
	}
	return nil
}
