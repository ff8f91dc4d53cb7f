// Package clock is the time source of the engines that act on wall time
// (alarms, schedules, rules): the real clock in service, a fake one in
// tests.
package clock

import "time"

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Real is the system clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }
