// Package crc32c computes the CRC-32C (Castagnoli) checksum that every
// checksummed Pith file and record uses, from one table built once.
package crc32c

import (
	"hash"
	"hash/crc32"
)

// table is the CRC-32C table; it is read-only after initialisation, so the
// functions below are safe for concurrent use.
var table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C checksum of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, table) }

// New returns a hash computing the CRC-32C checksum. The hash is not safe
// for concurrent use.
func New() hash.Hash32 { return crc32.New(table) }
