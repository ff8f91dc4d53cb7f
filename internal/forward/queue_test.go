package forward

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/crc32c"
	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/walcursor"
)

// fakeSink records what it receives and fails on demand.
type fakeSink struct {
	mu      sync.Mutex
	ids     []string
	points  []model.Point
	down    bool            // every send fails with a retryable error
	refuse  map[string]bool // batch ids refused permanently
	sendErr int
}

func (s *fakeSink) Send(ctx context.Context, b Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		s.sendErr++
		return errors.New("upstream down")
	}
	if s.refuse[b.ID] {
		return fmt.Errorf("refuse: %w", ErrPermanent)
	}
	_, pts, err := DecodeBatch(nil, b.Payload)
	if err != nil {
		return fmt.Errorf("decode: %w", ErrPermanent)
	}
	if len(pts) != b.Points {
		return fmt.Errorf("got %d points, batch says %d: %w", len(pts), b.Points, ErrPermanent)
	}
	s.ids = append(s.ids, b.ID)
	s.points = append(s.points, pts...)
	return nil
}

func (s *fakeSink) setDown(d bool) {
	s.mu.Lock()
	s.down = d
	s.mu.Unlock()
}

func (s *fakeSink) got() ([]string, []model.Point) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids), slices.Clone(s.points)
}

func testOptions() Options {
	o := DefaultOptions()
	o.Site = "s1"
	o.RetryMin = 5 * time.Millisecond
	o.RetryMax = 20 * time.Millisecond
	o.CursorInterval = time.Millisecond
	return o
}

// points returns n points numbered from first, over three tags.
func points(first, n int) []model.Point {
	pts := make([]model.Point, n)
	for i := range pts {
		k := first + i
		pts[i] = model.Point{Tag: fmt.Sprintf("t%d", k%3), T: int64(1_700_000_000_000 + k*1000), V: float64(k), Q: model.Quality(k % 3)}
	}
	return pts
}

// waitUntil polls cond; the deadline only guards against a hang.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// checkSeq checks that pts are the points numbered 0..n-1, in order.
func checkSeq(t *testing.T, pts []model.Point, n int) {
	t.Helper()
	if len(pts) != n {
		t.Fatalf("got %d points, want %d", len(pts), n)
	}
	want := points(0, n)
	for i := range pts {
		if pts[i] != want[i] {
			t.Fatalf("point %d = %+v, want %+v", i, pts[i], want[i])
		}
	}
}

func openQueue(t *testing.T, dir string, o Options, s Sink) *Queue {
	t.Helper()
	q, err := Open(dir, o, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func enqueue(t *testing.T, q *Queue, first, n, per int) {
	t.Helper()
	for i := first; i < first+n; i += per {
		if err := q.Enqueue(context.Background(), points(i, min(per, first+n-i))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQueueSendsInOrder(t *testing.T) {
	s := &fakeSink{}
	o := testOptions()
	o.MaxBatchPoints = 7 // Enqueue splits the writes of 10
	q := openQueue(t, t.TempDir(), o, s)
	defer q.Close()
	enqueue(t, q, 0, 1000, 10)
	waitUntil(t, "all points sent", func() bool { return q.Stats().Sent == 1000 })
	ids, pts := s.got()
	checkSeq(t, pts, 1000)
	if len(ids) != 200 {
		t.Errorf("got %d batches, want 200", len(ids))
	}
	st := q.Stats()
	if st.Backlog != 0 || st.Batches != 0 || st.BacklogBytes != 0 || st.SentBatches != 200 {
		t.Errorf("stats after drain = %+v", st)
	}
}

func TestQueueOutageAndRestart(t *testing.T) {
	dir := t.TempDir()
	s := &fakeSink{down: true}
	q := openQueue(t, dir, testOptions(), s)
	enqueue(t, q, 0, 500, 50)
	waitUntil(t, "a failed send", func() bool { return q.Stats().Errors > 0 })
	st := q.Stats()
	if st.Backlog != 500 || st.Batches != 10 || st.Sent != 0 {
		t.Errorf("stats during outage = %+v", st)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	s.setDown(false)
	q = openQueue(t, dir, testOptions(), s)
	if got := q.Stats().Backlog; got != 500 && got != 450 { // the sender may have started
		t.Errorf("backlog after reopen = %d", got)
	}
	enqueue(t, q, 500, 500, 50)
	waitUntil(t, "all points sent", func() bool { return q.Stats().Backlog == 0 })
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	_, pts := s.got()
	checkSeq(t, pts, 1000)
	// Nothing is resent after a clean close.
	q = openQueue(t, dir, testOptions(), s)
	defer q.Close()
	if st := q.Stats(); st.Backlog != 0 {
		t.Errorf("backlog after clean reopen = %d", st.Backlog)
	}
}

func TestQueueCrashResendsSameIDs(t *testing.T) {
	dir := t.TempDir()
	s := &fakeSink{}
	o := testOptions()
	o.CursorInterval = time.Hour // the cursor is never saved before the crash
	q := openQueue(t, dir, o, s)
	enqueue(t, q, 0, 300, 30)
	waitUntil(t, "all points sent", func() bool { return q.Stats().Sent == 300 })
	q.abort()
	q = openQueue(t, dir, o, s)
	defer q.Close()
	waitUntil(t, "resend", func() bool { return q.Stats().Sent == 300 })
	ids, _ := s.got()
	if len(ids) != 20 {
		t.Fatalf("got %d sends, want 20", len(ids))
	}
	// At least once: the resent batches carry the ids of the first sends,
	// which is what lets the upstream drop them.
	if !slices.Equal(ids[:10], ids[10:]) {
		t.Errorf("resent ids %v differ from first ids %v", ids[10:], ids[:10])
	}
}

func TestQueueSpillsToDisk(t *testing.T) {
	dir := t.TempDir()
	s := &fakeSink{down: true}
	o := testOptions()
	o.MemoryBytes = 2000 // a few batches only
	o.ReadAhead = 3000
	o.WAL.SegmentSize = 4096 // many segments, to exercise truncation
	q := openQueue(t, dir, o, s)
	enqueue(t, q, 0, 3000, 20)
	s.setDown(false)
	waitUntil(t, "all points sent", func() bool { return q.Stats().Sent == 3000 })
	_, pts := s.got()
	checkSeq(t, pts, 3000)
	enqueue(t, q, 3000, 10, 10) // move the cursor into the newest segment
	waitUntil(t, "last points sent", func() bool { return q.Stats().Sent == 3010 })
	if err := q.Close(); err != nil { // saves the cursor and truncates
		t.Fatal(err)
	}
	segs, err := os.ReadDir(filepath.Join(dir, "wal"))
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) > 3 {
		t.Errorf("%d wal segments left after drain, want at most 3", len(segs))
	}
}

func TestQueueOverflowDropsOldest(t *testing.T) {
	s := &fakeSink{down: true}
	o := testOptions()
	o.MaxBytes = 2000
	q := openQueue(t, t.TempDir(), o, s)
	defer q.Close()
	enqueue(t, q, 0, 1000, 50)
	st := q.Stats()
	if st.BacklogBytes > o.MaxBytes {
		t.Errorf("backlog %d bytes exceeds cap %d", st.BacklogBytes, o.MaxBytes)
	}
	if st.Dropped == 0 || int64(st.Dropped)+st.Backlog != 1000 {
		t.Errorf("dropped %d + backlog %d != 1000", st.Dropped, st.Backlog)
	}
	s.setDown(false)
	waitUntil(t, "backlog sent", func() bool { return q.Stats().Backlog == 0 })
	_, pts := s.got()
	// What is left is the newest points, in order; the batch the sender
	// already held when the cap was hit (the oldest) is not dropped.
	got := pts
	if len(got) > 50 && slices.Equal(got[:50], points(0, 50)) {
		got = got[50:]
	}
	want := points(1000-len(got), len(got))
	if len(pts) != int(1000-st.Dropped) || !slices.Equal(got, want) {
		t.Errorf("got %d points starting at %v, want the newest %d", len(pts), pts[0], 1000-st.Dropped)
	}
}

func TestQueueRejectNew(t *testing.T) {
	s := &fakeSink{down: true}
	o := testOptions()
	o.MaxBytes = 2000
	o.Overflow = OverflowRejectNew
	q := openQueue(t, t.TempDir(), o, s)
	defer q.Close()
	var err error
	for i := 0; err == nil && i < 100; i++ {
		err = q.Enqueue(context.Background(), points(i*50, 50))
	}
	if !errors.Is(err, ErrQueueFull) {
		t.Fatalf("enqueue past cap: err = %v, want ErrQueueFull", err)
	}
	if st := q.Stats(); st.Rejected != 50 || st.Dropped != 0 {
		t.Errorf("stats = %+v", st)
	}
}

func TestQueueMaxAge(t *testing.T) {
	s := &fakeSink{down: true}
	o := testOptions()
	o.MaxAge = 50 * time.Millisecond
	q := openQueue(t, t.TempDir(), o, s)
	defer q.Close()
	enqueue(t, q, 0, 100, 10)
	waitUntil(t, "aged batches dropped", func() bool { return q.Stats().Dropped == 100 })
	if st := q.Stats(); st.Backlog != 0 {
		t.Errorf("backlog = %d after age cap", st.Backlog)
	}
}

func TestQueuePoison(t *testing.T) {
	dir := t.TempDir()
	s := &fakeSink{refuse: map[string]bool{}}
	s.refuse[fmt.Sprintf("s1-1-%d", 16)] = true // the first record of segment 1
	q := openQueue(t, dir, testOptions(), s)
	enqueue(t, q, 0, 100, 10)
	waitUntil(t, "batches sent", func() bool { return q.Stats().Sent == 90 })
	if st := q.Stats(); st.Poisoned != 1 || st.Backlog != 0 {
		t.Errorf("stats = %+v", st)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "poison", "s1-1-16.batch"))
	if err != nil {
		t.Fatal(err)
	}
	_, pts, err := DecodeBatch(nil, b)
	if err != nil || !slices.Equal(pts, points(0, 10)) {
		t.Errorf("poison batch = %v, %v; want the first 10 points", pts, err)
	}
	_, sent := s.got()
	if !slices.Equal(sent, points(10, 90)) {
		t.Errorf("sent points are not 10..99")
	}
}

// TestQueueReadsLegacyCursor opens a queue directory whose cursor was
// written by the release before the shared cursor format ("PFC1", see
// docs/format/cursor.md): the queue resumes after that position, and the
// next save writes the current format.
func TestQueueReadsLegacyCursor(t *testing.T) {
	dir := t.TempDir()
	s := &fakeSink{}
	q := openQueue(t, dir, testOptions(), s)
	enqueue(t, q, 0, 300, 30)
	waitUntil(t, "all points sent", func() bool { return q.Stats().Sent == 300 })
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// Put the cursor back to the fifth batch, as the earlier release wrote it.
	ids, _ := s.got()
	parts := strings.Split(ids[4], "-") // <site>-<segment>-<offset>
	seg, err1 := strconv.ParseUint(parts[len(parts)-2], 10, 32)
	off, err2 := strconv.ParseUint(parts[len(parts)-1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("parse batch id %q: %v", ids[4], err)
	}
	legacy := []byte("PFC1")
	legacy = binary.LittleEndian.AppendUint32(legacy, uint32(seg))
	legacy = binary.LittleEndian.AppendUint64(legacy, off)
	legacy = binary.LittleEndian.AppendUint32(legacy, crc32c.Checksum(legacy))
	path := filepath.Join(dir, cursorFile)
	if err := os.WriteFile(path, legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	q = openQueue(t, dir, testOptions(), s)
	if got := q.Stats().Backlog; got != 150 && got != 120 { // the sender may have started
		t.Errorf("backlog after reopen with a legacy cursor = %d, want 150", got)
	}
	waitUntil(t, "resend after the legacy cursor", func() bool { return q.Stats().Backlog == 0 })
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.got(); len(ids) != 15 || !slices.Equal(ids[10:], ids[5:10]) {
		t.Errorf("sent ids %v, want the last five batches again", ids)
	}
	if b, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(b, []byte("PWC1")) {
		t.Errorf("cursor after a save = %q, %v, want the current format", b, err)
	}
	// A damaged cursor stops Open with an error naming the file.
	if err := os.WriteFile(path, legacy[:10], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, testOptions(), s, nil); !errors.Is(err, walcursor.ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Errorf("Open with a damaged cursor: %v, want ErrCorrupt naming %s", err, path)
	}
}
