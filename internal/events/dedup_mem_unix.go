//go:build unix

package events

import "syscall"

// mapAnon maps size bytes of zeroed private memory.
func mapAnon(size int) ([]byte, bool) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	return b, err == nil
}

// unmapAnon gives a mapping of mapAnon back to the system.
func unmapAnon(b []byte) {
	syscall.Munmap(b)
}
