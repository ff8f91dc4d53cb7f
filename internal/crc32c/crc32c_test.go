package crc32c

import "testing"

// TestKnownValues checks the checksum against the check value of the
// CRC-32C definition and the incremental hash against it.
func TestKnownValues(t *testing.T) {
	in := []byte("123456789")
	const want = 0xE3069283
	if got := Checksum(in); got != want {
		t.Errorf("Checksum = %#x, want %#x", got, want)
	}
	h := New()
	h.Write(in[:2])
	h.Write(in[2:])
	if got := h.Sum32(); got != want {
		t.Errorf("New().Sum32 = %#x, want %#x", got, want)
	}
}
