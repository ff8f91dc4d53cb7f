package store

import "fmt"

// CorruptionError reports stored bytes that fail their checksum or do not
// decode. The damaged piece is isolated: everything else stays readable.
type CorruptionError struct {
	File   string
	Offset int64
	Err    error
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("corrupt data in %s at offset %d: %v", e.File, e.Offset, e.Err)
}

func (e *CorruptionError) Unwrap() error { return e.Err }
