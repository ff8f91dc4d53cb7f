package events

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/store/wal"
)

// batchBody returns an NDJSON body of n events of about 100 bytes each.
func batchBody(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"name\":\"app.click\",\"source\":{\"device\":\"pi-%02d\"},\"num\":{\"x\":%d},\"str\":{\"btn\":\"ok\"}}\n", i%7, i)
	}
	return b.String()
}

// idsBody is batchBody with a client id on every event, unique to the
// request numbered req.
func idsBody(n int, req int64) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "{\"id\":\"r%d-%d\",\"name\":\"app.click\",\"source\":{\"device\":\"pi-%02d\"},\"num\":{\"x\":%d},\"str\":{\"btn\":\"ok\"}}\n", req, i, i%7, i)
	}
	return b.String()
}

// BenchmarkPostFsync posts requests of 14 events (~100 B each) through the
// handler into the WAL on the real disk, acknowledging after fsync (group
// commit across the parallel requests), with the file sink running.
//
// The "ids" case gives every event its own client id, as a retrying
// client does, so that each one is remembered for deduplication.
//
// Run with: go test -run '^$' -bench PostFsync -benchtime 5s ./internal/events/
func BenchmarkPostFsync(b *testing.B) {
	for _, bc := range []struct {
		par int
		ids bool
	}{{1, false}, {16, false}, {64, false}, {16, true}} {
		name := fmt.Sprintf("par=%d", bc.par)
		if bc.ids {
			name += ",ids"
		}
		par := bc.par
		b.Run(name, func(b *testing.B) {
			opts := DefaultOptions()
			opts.FS = vfs.OS{}
			opts.RotateEvery = 10 * time.Second
			dir := b.TempDir()
			c, err := New(dir, opts, nil)
			if err != nil {
				b.Fatal(err)
			}
			h := c.Handler()
			body := batchBody(14)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.SetParallelism(par)
			b.ResetTimer()
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					body := body
					if bc.ids {
						body = idsBody(14, next.Add(1))
					}
					req := httptest.NewRequest("POST", "/api/v1/events", strings.NewReader(body))
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != 200 {
						// Retry-After answers are part of the load; count them.
						if rec.Code != 503 {
							b.Errorf("post: %d %s", rec.Code, rec.Body)
						}
					}
				}
			})
			b.StopTimer()
			st := c.Stats()
			b.ReportMetric(float64(st.Accepted)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(st.Overloaded), "503s")
			if st.WAL.Fsyncs > 0 {
				b.ReportMetric(float64(st.Accepted)/float64(st.WAL.Fsyncs), "events/fsync")
			}
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
			var size int64
			filepath.WalkDir(filepath.Join(dir, "events"), func(p string, d fs.DirEntry, err error) error {
				if err == nil && strings.HasSuffix(p, ".ndjson.gz") {
					if fi, err := d.Info(); err == nil {
						size += fi.Size()
					}
				}
				return nil
			})
			b.ReportMetric(float64(size)/float64(st.Accepted), "B/event-on-disk")
		})
	}
}

// BenchmarkDecode measures the JSON decoder alone on 14-event bodies.
//
// Run with: go test -run '^$' -bench Decode ./internal/events/
func BenchmarkDecode(b *testing.B) {
	body := []byte(batchBody(14))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var evs []Event
	for b.Loop() {
		var err error
		evs, err = Decode(evs[:0], bytes.NewReader(body), 1, 100)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*14)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDecodeBytes measures the fast decoder on 14-event bodies.
//
// Run with: go test -run '^$' -bench DecodeBytes ./internal/events/
func BenchmarkDecodeBytes(b *testing.B) {
	body := []byte(batchBody(14))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	var evs []Event
	for b.Loop() {
		var err error
		evs, err = DecodeBytes(evs[:0], body, 1, 100)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*14)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendJSON measures the canonical encoder used for the WAL.
//
// Run with: go test -run '^$' -bench AppendJSON ./internal/events/
func BenchmarkAppendJSON(b *testing.B) {
	evs, err := Decode(nil, strings.NewReader(batchBody(14)), 1, 100)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = buf[:0]
		for i := range evs {
			buf = AppendJSON(buf, &evs[i])
		}
	}
	b.SetBytes(int64(len(buf)))
	b.ReportMetric(float64(b.N*14)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkPostLoopback is BenchmarkPostFsync over a real HTTP server on
// loopback with keep-alive clients in the same process (which take their
// share of the CPU, so this understates a server measured with wrk).
//
// Run with: go test -run '^$' -bench PostLoopback -benchtime 5s ./internal/events/
func BenchmarkPostLoopback(b *testing.B) {
	for _, n := range []int{1, 14, 100} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) { benchPostLoopback(b, n) })
	}
}

func benchPostLoopback(b *testing.B, n int) {
	opts := DefaultOptions()
	opts.RotateEvery = 10 * time.Second
	c, err := New(b.TempDir(), opts, nil)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 128}
	client := &http.Client{Transport: tr}
	body := batchBody(n)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(srv.URL+"/api/v1/events", "application/x-ndjson", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 && resp.StatusCode != 503 {
				b.Errorf("post: %d", resp.StatusCode)
			}
		}
	})
	b.StopTimer()
	st := c.Stats()
	b.ReportMetric(float64(st.Accepted)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(st.Overloaded), "503s")
	if err := c.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCanon measures the path of a POST body to its canonical WAL
// lines (batch.decode, the canonical decoder on these plain bodies) with
// a warm batch and the event name known, as in a running collector: on
// bodies of 14 and 1 events with assigned ids, and of 14 events with
// client ids. DecodeBytes followed by AppendJSON is the path it replaced.
//
// Run with: go test -run '^$' -bench Canon ./internal/events/
func BenchmarkCanon(b *testing.B) {
	var withIDs strings.Builder
	for i := range 14 {
		fmt.Fprintf(&withIDs, "{\"id\":\"c-%08d\",\"name\":\"app.click\",\"source\":{\"device\":\"pi-%02d\"},\"num\":{\"x\":%d},\"str\":{\"btn\":\"ok\"}}\n", i, i%7, i)
	}
	names := map[string]string{"app.click": "app.click"}
	for _, bc := range []struct {
		name string
		body string
		n    int
	}{{"events=14", batchBody(14), 14}, {"events=1", batchBody(1), 1}, {"events=14,ids", withIDs.String(), 14}} {
		b.Run(bc.name, func(b *testing.B) {
			body := []byte(bc.body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var bt batch
			for b.Loop() {
				if err := bt.decode(body, 1, 100, names); err != nil {
					b.Fatal(err)
				}
			}
			if len(bt.evs) != bc.n {
				b.Fatalf("%d events, want %d", len(bt.evs), bc.n)
			}
			b.ReportMetric(float64(b.N*bc.n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkDedupMemory measures the memory that remembering client ids
// costs: it accepts the same events twice, into two collectors, once
// with a client id on each and once without (ids the collector assigns
// are not remembered), waits until both delivered everything, and
// reports the difference of their heaps, plus the id table when it
// lives outside the heap (Stats.DedupBytes), per remembered id.
//
// Run with: go test -run '^$' -bench DedupMemory -benchtime 1x ./internal/events/
func BenchmarkDedupMemory(b *testing.B) {
	const events = 400000
	heap := func(ids bool) (uint64, int) {
		opts := DefaultOptions()
		opts.RotateEvery = time.Second
		c, err := New(b.TempDir(), opts, nil)
		if err != nil {
			b.Fatal(err)
		}
		evs := make([]Event, 100)
		for n := 0; n < events; n += len(evs) {
			for i := range evs {
				evs[i] = Event{Name: "app.click", Time: 1, Num: map[string]float64{"x": float64(i)}}
				if ids {
					evs[i].ID = fmt.Sprintf("client-%08d", n+i)
				}
			}
			if _, _, err := c.Accept(context.Background(), evs, time.Now().UnixMilli()); err != nil {
				b.Fatal(err)
			}
		}
		for c.Stats().BacklogRecords > 0 {
			time.Sleep(10 * time.Millisecond)
		}
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		st := c.Stats()
		used := ms.HeapAlloc
		c.mu.Lock()
		if c.ids.mem.mapped != nil {
			used += uint64(st.DedupBytes)
		}
		c.mu.Unlock()
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
		return used, st.DedupIDs
	}
	for b.Loop() {
		without, _ := heap(false)
		with, n := heap(true)
		b.ReportMetric(float64(int64(with)-int64(without))/float64(n), "B/id")
		b.ReportMetric(float64(n), "ids")
	}
}

// BenchmarkIDTable measures what the dedup table costs per new id once
// it is full at its default size: a lookup that finds nothing, then an
// add that forgets the oldest id.
//
// Run with: go test -run '^$' -bench IDTable ./internal/events/
func BenchmarkIDTable(b *testing.B) {
	n := idTableCap(DefaultDedupMemory-DefaultDedupMemory/sigMemoryShare, DefaultMaxDedupIDs)
	tab := newIDTable(n)
	h := uint64(1)
	next := func() uint64 {
		h ^= h << 13
		h ^= h >> 7
		h ^= h << 17
		return h
	}
	for range n {
		tab.add(next(), wal.Pos{}, 1<<62)
	}
	b.ReportAllocs()
	for b.Loop() {
		k := next()
		if tab.find(k, func(*idEntry) bool { return true }) {
			b.Fatal("found an id never added")
		}
		tab.add(k, wal.Pos{}, 1<<62)
	}
	b.ReportMetric(float64(tab.memory())/float64(tab.len()), "B/id")
}
