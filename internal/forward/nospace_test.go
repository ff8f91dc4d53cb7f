package forward

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
)

// TestQueueDiskFull: while the disk is full Enqueue fails with ENOSPC and
// the queue keeps working; batches spilled to the WAL (none in memory)
// around the failure are each sent once, in order, once the upstream is
// back, and every acknowledged point arrives.
func TestQueueDiskFull(t *testing.T) {
	s := &fakeSink{down: true}
	fs := vfs.NewFaultFS()
	o := testOptions()
	o.MemoryBytes = 1 // every batch is read back from the WAL
	o.WAL.FS = fs
	q := openQueue(t, t.TempDir(), o, s)
	defer q.Close()
	acked := 0
	enqueue(t, q, 0, 50, 10)
	acked += 50
	fs.SetCapacity(1)
	err := q.Enqueue(context.Background(), points(50, 10))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("enqueue on a full disk: got %v, want ENOSPC", err)
	}
	fs.SetCapacity(0)
	// The refused points are numbered again: the sink must see 0..acked-1.
	// The sender may have tried to reopen the WAL while the disk was full,
	// leaving it closed until its next retry: Enqueue fails meanwhile.
	for i := 50; i < 100; i += 10 {
		waitUntil(t, "enqueue after space returned", func() bool {
			err := q.Enqueue(context.Background(), points(i, 10))
			if err != nil && !errors.Is(err, wal.ErrClosed) {
				t.Fatalf("enqueue after space returned: %v", err)
			}
			return err == nil
		})
	}
	acked += 50
	s.mu.Lock()
	s.down = false
	s.mu.Unlock()
	waitUntil(t, "all points sent", func() bool { return q.Stats().Sent == uint64(acked) })
	_, pts := s.got()
	checkSeq(t, pts, acked)
}
