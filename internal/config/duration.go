package config

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written in the file as a Go duration string
// ("1s", "500ms", "8760h"). Bare numbers are refused: "period = 1" could
// mean seconds or nanoseconds, and a wrong guess goes unnoticed.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String formats d like time.Duration does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText writes d as a duration string, so that an encoded Config reads
// back unchanged.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a duration string.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("parse duration: %w", err)
	}
	*d = Duration(v)
	return nil
}
