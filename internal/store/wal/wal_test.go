package wal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// testLogger sends WAL logs to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

func openWAL(t testing.TB, fs vfs.FS, dir string, mod func(*Options)) *WAL {
	t.Helper()
	opts := DefaultOptions()
	opts.FS = fs
	if mod != nil {
		mod(&opts)
	}
	w, err := Open(dir, opts, testLogger(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return w
}

type replayed struct {
	pos Pos
	rec string
}

func replayAll(t testing.TB, w *WAL) ([]replayed, error) {
	t.Helper()
	var got []replayed
	err := w.Replay(Pos{}, func(pos, _ Pos, rec []byte) error {
		got = append(got, replayed{pos, string(rec)})
		return nil
	})
	return got, err
}

func recs(got []replayed) []string {
	var s []string
	for _, r := range got {
		s = append(s, r.rec)
	}
	return s
}

func TestAppendSyncReopen(t *testing.T) {
	for _, fsName := range []string{"os", "fault"} {
		t.Run(fsName, func(t *testing.T) {
			var fs vfs.FS = vfs.OS{}
			dir := filepath.Join(t.TempDir(), "wal")
			if fsName == "fault" {
				fs, dir = vfs.NewFaultFS(), "data/wal"
			}
			w := openWAL(t, fs, dir, func(o *Options) { o.SegmentSize = 100 })
			var want []string
			var positions []Pos
			for i := range 20 {
				rec := fmt.Sprintf("record-%02d", i)
				pos, err := w.Commit(context.Background(), []byte(rec))
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, rec)
				positions = append(positions, pos)
			}
			for i := 1; i < len(positions); i++ {
				if !positions[i-1].Less(positions[i]) {
					t.Fatalf("positions not increasing: %v then %v", positions[i-1], positions[i])
				}
			}
			if positions[len(positions)-1].Segment < 3 {
				t.Errorf("last position %v: want segments cut at 100 bytes", positions[len(positions)-1])
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Append([]byte("x")); !errors.Is(err, ErrClosed) {
				t.Errorf("append after close: got %v", err)
			}
			w = openWAL(t, fs, dir, nil)
			defer w.Close()
			got, err := replayAll(t, w)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(recs(got)) != fmt.Sprint(want) {
				t.Fatalf("replay: got %v, want %v", recs(got), want)
			}
			for i := range got {
				if got[i].pos != positions[i] {
					t.Fatalf("record %d at %v, appended at %v", i, got[i].pos, positions[i])
				}
			}
			// Replay from a position skips what comes before it.
			var from []string
			if err := w.Replay(positions[7], func(_, _ Pos, rec []byte) error {
				from = append(from, string(rec))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(from) != fmt.Sprint(want[7:]) {
				t.Fatalf("replay from %v: got %v", positions[7], from)
			}
		})
	}
}

func TestCutAndTruncateBefore(t *testing.T) {
	fs := vfs.NewFaultFS()
	w := openWAL(t, fs, "wal", nil)
	ctx := context.Background()
	if _, err := w.Commit(ctx, []byte("a")); err != nil {
		t.Fatal(err)
	}
	seg, err := w.Cut()
	if err != nil {
		t.Fatal(err)
	}
	if seg != 2 {
		t.Fatalf("cut: got segment %d, want 2", seg)
	}
	// Cutting an empty segment is a no-op.
	if again, _ := w.Cut(); again != seg {
		t.Fatalf("second cut: got %d, want %d", again, seg)
	}
	pos, err := w.Commit(ctx, []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	if pos != (Pos{Segment: 2, Offset: headerSize}) {
		t.Fatalf("first record after cut at %v", pos)
	}
	if err := w.TruncateBefore(seg); err != nil {
		t.Fatal(err)
	}
	// The segment being written is never removed.
	if err := w.TruncateBefore(100); err != nil {
		t.Fatal(err)
	}
	names, _ := fs.ReadDir("wal")
	if fmt.Sprint(names) != "[00000002.wal]" {
		t.Fatalf("after truncate: %v", names)
	}
	w.Close()
	w = openWAL(t, fs.Crash(vfs.CrashOptions{}), "wal", nil)
	defer w.Close()
	got, err := replayAll(t, w)
	if err != nil || fmt.Sprint(recs(got)) != "[b]" {
		t.Fatalf("replay after truncate: %v, %v", recs(got), err)
	}
}

func TestAppendErrors(t *testing.T) {
	w := openWAL(t, vfs.NewFaultFS(), "wal", func(o *Options) { o.MaxRecordSize = 10 })
	defer w.Close()
	if _, err := w.Append(make([]byte, 11)); !errors.Is(err, ErrRecordTooLarge) {
		t.Errorf("big record: got %v", err)
	}
	if err := w.Sync(context.Background(), Pos{Segment: 9, Offset: 0}); err == nil {
		t.Errorf("sync of a position never appended: got nil")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pos, _ := w.Append([]byte("x"))
	if err := w.Sync(ctx, pos); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("sync with cancelled context: got %v", err)
	}
}

func TestStickyFsyncFailure(t *testing.T) {
	fs := vfs.NewFaultFS()
	w := openWAL(t, fs, "wal", nil)
	ctx := context.Background()
	if _, err := w.Commit(ctx, []byte("durable")); err != nil {
		t.Fatal(err)
	}
	fs.FailSync(0, syscall.EIO)
	pos, err := w.Append([]byte("lost"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx, pos); !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync over failing fsync: got %v, want EIO", err)
	}
	syncs := fs.Syncs()
	// Every later call fails with the same error and never fsyncs again,
	// though the filesystem would now report success.
	if _, err := w.Append([]byte("more")); !errors.Is(err, syscall.EIO) {
		t.Errorf("append after failure: got %v", err)
	}
	if err := w.Sync(ctx, pos); !errors.Is(err, syscall.EIO) {
		t.Errorf("second sync after failure: got %v", err)
	}
	if _, err := w.Cut(); !errors.Is(err, syscall.EIO) {
		t.Errorf("cut after failure: got %v", err)
	}
	if err := w.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("close after failure: got %v", err)
	}
	if got := fs.Syncs(); got != syncs {
		t.Errorf("fsyncs after failure: %d, want none", got-syncs)
	}
	w = openWAL(t, fs.Crash(vfs.CrashOptions{}), "wal", nil)
	defer w.Close()
	got, err := replayAll(t, w)
	if err != nil || fmt.Sprint(recs(got)) != "[durable]" {
		t.Fatalf("replay: %v, %v", recs(got), err)
	}
}

func TestStickyWriteFailure(t *testing.T) {
	tests := []struct {
		name   string
		inject func(*vfs.FaultFS)
		want   error
	}{
		{"write error", func(f *vfs.FaultFS) { f.FailWrite(0, syscall.EIO) }, syscall.EIO},
		// A full disk is not sticky: see TestNoSpace* in nospace_test.go.
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := vfs.NewFaultFS()
			w := openWAL(t, fs, "wal", nil)
			tt.inject(fs)
			_, err := w.Commit(context.Background(), bytes.Repeat([]byte("z"), 100))
			if !errors.Is(err, tt.want) {
				t.Fatalf("commit: got %v, want %v", err, tt.want)
			}
			if _, err := w.Append([]byte("x")); !errors.Is(err, tt.want) {
				t.Errorf("append after failure: got %v", err)
			}
			w.Close()
		})
	}
}

func TestRelaxedMode(t *testing.T) {
	fs := vfs.NewFaultFS()
	w := openWAL(t, fs, "wal", func(o *Options) {
		o.Durability = DurabilityRelaxed
		o.CommitInterval = time.Hour
	})
	syncs := fs.Syncs()
	pos, err := w.Commit(context.Background(), []byte("written"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fs.Syncs(); got != syncs {
		t.Errorf("relaxed commit fsynced %d times, want 0", got-syncs)
	}
	// A process crash keeps what the OS has: read it back through the live view.
	w2 := openWAL(t, fs, "wal", nil)
	got, err := replayAll(t, w2)
	if err != nil || len(got) != 1 || got[0].pos != pos {
		t.Fatalf("replay of live view: %v, %v", got, err)
	}
	w2.Close()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRelaxedBackgroundFsync(t *testing.T) {
	fs := vfs.NewFaultFS()
	w := openWAL(t, fs, "wal", func(o *Options) {
		o.Durability = DurabilityRelaxed
		o.CommitInterval = time.Millisecond
	})
	defer w.Close()
	pos, err := w.Commit(context.Background(), []byte("soon durable"))
	if err != nil {
		t.Fatal(err)
	}
	// Wait (without a deadline assertion) for the background fsync.
	for {
		w.mu.Lock()
		done := pos.Less(w.durable)
		w.mu.Unlock()
		if done {
			break
		}
		time.Sleep(time.Millisecond)
	}
}

func TestConcurrentCommit(t *testing.T) {
	dir := t.TempDir()
	w := openWAL(t, vfs.OS{}, dir, func(o *Options) { o.SegmentSize = 4096 })
	const writers, each = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := w.Commit(context.Background(), fmt.Appendf(nil, "%d/%d", g, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := w.Stats()
	if st.Records != writers*each {
		t.Errorf("records: %d", st.Records)
	}
	t.Logf("stats: %+v", st)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = openWAL(t, vfs.OS{}, dir, nil)
	defer w.Close()
	got, err := replayAll(t, w)
	if err != nil {
		t.Fatal(err)
	}
	next := make([]int, writers)
	for _, r := range got {
		var g, i int
		fmt.Sscanf(r.rec, "%d/%d", &g, &i)
		if i != next[g] {
			t.Fatalf("writer %d: got record %d, want %d", g, i, next[g])
		}
		next[g]++
	}
	if len(got) != writers*each {
		t.Fatalf("replayed %d records, want %d", len(got), writers*each)
	}
}

// TestTornTailRealFiles damages the end of a real segment file in the ways
// a power cut does and checks that Open cuts it and keeps the rest.
func TestTornTailRealFiles(t *testing.T) {
	tests := []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"short payload", func(b []byte) []byte { return b[:len(b)-3] }},
		{"short header", func(b []byte) []byte { return b[:len(b)-len("last")-recHeaderSize+4] }},
		{"zeros appended", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }},
		{"zeroed last record", func(b []byte) []byte { clear(b[len(b)-len("last")-recHeaderSize:]); return b }},
		{"bad crc of last record", func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b }},
		{"garbage appended", func(b []byte) []byte { return append(b, "garbage\x01\x02\x03\xff"...) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w := openWAL(t, vfs.OS{}, dir, nil)
			for _, r := range []string{"first", "second", "last"} {
				if _, err := w.Commit(context.Background(), []byte(r)); err != nil {
					t.Fatal(err)
				}
			}
			w.Close()
			path := filepath.Join(dir, segmentName(1))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b = tt.damage(b)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			w = openWAL(t, vfs.OS{}, dir, nil)
			defer w.Close()
			got, err := replayAll(t, w)
			if err != nil {
				t.Fatal(err)
			}
			want := "[first second]"
			if tt.name == "zeros appended" || tt.name == "garbage appended" {
				want = "[first second last]"
			}
			if fmt.Sprint(recs(got)) != want {
				t.Fatalf("replay: got %v, want %v", recs(got), want)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			wantSize := int64(headerSize) + recordSize(len("first")) + recordSize(len("second"))
			if want != "[first second]" {
				wantSize += recordSize(len("last"))
			}
			if fi.Size() != wantSize {
				t.Errorf("segment size after repair: %d, want %d", fi.Size(), wantSize)
			}
			if w.Stats().TornBytes == 0 {
				t.Errorf("torn bytes not counted")
			}
		})
	}
}
