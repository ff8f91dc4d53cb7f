//go:build race

package store

// raceEnabled: the race detector is on, and allocation counts are its own.
const raceEnabled = true
