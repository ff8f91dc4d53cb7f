//go:build !unix

package events

// mapAnon has no mapping to offer here: the table lives on the Go heap.
func mapAnon(int) ([]byte, bool) { return nil, false }

func unmapAnon([]byte) {}
