package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/pith-historian/pith/internal/testpeer"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// formatBody is a request whose events use every kind of CSV column:
// Hamustro's, extra attributes, separators and quotes in values.
const formatBody = `[
{"id":"a","time":1700000000123,"name":"Client.Open","source":{"device":"d1","client":"c1","session":"s1"},
 "num":{"nr":3,"temp":-1.5e-7},"str":{"env":"BETA","ip":"10.0.0.1","parameters":"{\"k\":\"v\"}","note":"x\u0001y \"q\"\nz"}},
{"id":"b","time":1,"name":"plain"},
{"id":"c","time":2,"name":"only.extra","str":{"who":"bob, \"jr\""}}
]`

func TestSinkFormats(t *testing.T) {
	want, err := DecodeBytes(nil, []byte(formatBody), 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct{ format, compression, ext string }{
		{FormatNDJSON, CompressGzip, ".ndjson.gz"},
		{FormatNDJSON, CompressZstd, ".ndjson.zst"},
		{FormatCSV, CompressGzip, ".csv.gz"},
		{FormatCSV, CompressZstd, ".csv.zst"},
	} {
		t.Run(f.format+"/"+f.compression, func(t *testing.T) {
			fsys := vfs.NewFaultFS()
			opts := testOptions(fsys)
			opts.Format, opts.Compression = f.format, f.compression
			c, err := New("/data", opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			if code, body := post(t, c.Handler(), formatBody); code != 200 {
				t.Fatalf("post: %d %s", code, body)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			files, err := listSinkFiles(fsys, "/data/events")
			if err != nil || len(files) != 1 || !strings.HasSuffix(files[0], f.ext) {
				t.Fatalf("files %v (%v), want one *%s", files, err, f.ext)
			}
			if got := sinkEvents(t, fsys, "/data"); !reflect.DeepEqual(got, want) {
				t.Errorf("got  %+v\nwant %+v", got, want)
			}
			if n, err := countEvents(fsys, files[0]); err != nil || n != 3 {
				t.Errorf("countEvents: %d %v", n, err)
			}
		})
	}
	if _, err := New("/x", Options{FS: vfs.NewFaultFS(), Format: "xml"}, nil); err == nil {
		t.Error("format xml accepted")
	}
	if _, err := New("/x", Options{FS: vfs.NewFaultFS(), Compression: "lz4"}, nil); err == nil {
		t.Error("compression lz4 accepted")
	}
}

// memUploader keeps uploads in memory and fails while failing is set.
type memUploader struct {
	mu      sync.Mutex
	objs    map[string][]byte
	failing atomic.Bool
}

func (u *memUploader) Upload(_ context.Context, key string, r io.Reader, size int64) error {
	if u.failing.Load() {
		return errors.New("store unreachable")
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if int64(len(b)) != size {
		return errors.New("short body")
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.objs[key] = b
	return nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBacklogAndUploadRetry: files stay local (and in the backlog) while
// the store fails, survive a restart, and go once it is back.
func TestBacklogAndUploadRetry(t *testing.T) {
	fsys := vfs.NewFaultFS()
	up := &memUploader{objs: map[string][]byte{}}
	up.failing.Store(true)
	opts := testOptions(fsys)
	opts.Upload = up
	opts.RotateEvery = 10 * time.Millisecond
	opts.DrainTimeout = 50 * time.Millisecond
	var mu sync.Mutex
	var reported []Backlog
	opts.BacklogEvery = time.Millisecond
	opts.OnBacklog = func(_ time.Time, b Backlog) {
		mu.Lock()
		reported = append(reported, b)
		mu.Unlock()
	}
	c, err := New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if code, body := post(t, c.Handler(), `[{"name":"a"},{"name":"b"}]`); code != 200 {
			t.Fatalf("post %d: %d %s", i, code, body)
		}
	}
	if b := c.Backlog(); b.Events != 10 {
		t.Errorf("backlog right after acceptance: %+v", b)
	}
	waitFor(t, "files committed", func() bool { return c.Stats().BacklogRecords == 0 })
	waitFor(t, "upload failures", func() bool { return c.Stats().UploadErrors > 0 })
	b := c.Backlog()
	if b.Events != 10 || b.Files == 0 || b.Bytes == 0 {
		t.Errorf("backlog while the store fails: %+v", b)
	}
	waitFor(t, "a backlog report", func() bool { mu.Lock(); defer mu.Unlock(); return len(reported) > 0 })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// The sink may still have had a file open above; Close completes it.
	files, _ := listSinkFiles(fsys, "/data/events")
	if b = c.Backlog(); len(files) != b.Files || b.Events != 10 {
		t.Errorf("%d files left locally, backlog after close said %+v", len(files), b)
	}
	// Restart with the store back: the files found are counted, then go.
	up.failing.Store(false)
	c, err = New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "uploads", func() bool { return c.Backlog() == Backlog{} })
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := listSinkFiles(fsys, "/data/events"); len(files) != 0 {
		t.Errorf("files left after upload: %v", files)
	}
	n := 0
	up.mu.Lock()
	defer up.mu.Unlock()
	for key, obj := range up.objs {
		if !strings.HasSuffix(key, ".ndjson.gz") || strings.HasPrefix(key, "/") {
			t.Errorf("object key %q", key)
		}
		n += len(readSinkFile(t, key, bytes.NewReader(obj)))
	}
	if n != 10 {
		t.Errorf("%d events uploaded, want 10", n)
	}
}

// TestS3Upload uploads through the S3 client to an in-process fake S3
// service that refuses the first PUTs (the client retries those itself).
func TestS3Upload(t *testing.T) {
	backend := s3mem.New()
	if err := backend.CreateBucket("events"); err != nil {
		t.Fatal(err)
	}
	fake := gofakes3.New(backend).Server()
	var puts, refused atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "PUT" && puts.Add(1) <= 2 {
			refused.Add(1)
			http.Error(w, "<Error><Code>InternalError</Code></Error>", http.StatusInternalServerError)
			return
		}
		fake.ServeHTTP(w, r)
	}))
	defer srv.Close()
	s3, err := NewS3(S3Options{Endpoint: strings.TrimPrefix(srv.URL, "http://"), Region: "us-east-1",
		Bucket: "events", Prefix: "site1/", AccessKey: "k", SecretKey: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	fsys := vfs.NewFaultFS()
	opts := testOptions(fsys)
	opts.Upload = s3
	opts.Format, opts.Compression = FormatCSV, CompressZstd
	c, err := New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, c.Handler(), formatBody); code != 200 {
		t.Fatalf("post: %d %s", code, body)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if refused.Load() == 0 {
		t.Error("no PUT was refused")
	}
	if files, _ := listSinkFiles(fsys, "/data/events"); len(files) != 0 {
		t.Errorf("files left after upload: %v", files)
	}
	list, err := backend.ListBucket("events", &gofakes3.Prefix{}, gofakes3.ListBucketPage{})
	if err != nil || len(list.Contents) != 1 {
		t.Fatalf("bucket: %v %+v", err, list)
	}
	key := list.Contents[0].Key
	if !strings.HasPrefix(key, "site1/") || !strings.HasSuffix(key, ".csv.zst") {
		t.Errorf("key %q", key)
	}
	obj, err := backend.GetObject("events", key, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Contents.Close()
	want, _ := DecodeBytes(nil, []byte(formatBody), 1, 10)
	if got := readSinkFile(t, key, obj.Contents); !reflect.DeepEqual(got, want) {
		t.Errorf("uploaded events:\n%+v\nwant %+v", got, want)
	}
	if st := c.Stats(); st.Uploaded != 1 || st.Backlog != (Backlog{}) {
		t.Errorf("stats %+v", st)
	}
}

// TestCrashBeforeCursorUpdate: a file renamed into place whose cursor
// update did not happen (a crash in between) is removed at start and its
// events are written again, so each event is in exactly one file.
func TestCrashBeforeCursorUpdate(t *testing.T) {
	fsys := vfs.NewFaultFS()
	c, err := New("/data", testOptions(fsys), nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, c.Handler(), `[{"id":"a","name":"x"},{"id":"b","name":"x"}]`); code != 200 {
		t.Fatalf("post: %d %s", code, body)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	// Back to the state just before the first cursor was written.
	if err := fsys.Remove("/data/cursor"); err != nil {
		t.Fatal(err)
	}
	// An hour later, so that the new file does not simply replace the
	// old one by name.
	opts := testOptions(fsys)
	opts.Now = func() time.Time { return time.Now().Add(time.Hour) }
	c, err = New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range sinkEvents(t, fsys, "/data") {
		ids = append(ids, ev.ID)
	}
	if got := strings.Join(ids, ","); got != "a,b" {
		t.Errorf("sink has %s, want a,b once", got)
	}
}

// TestNATSObjectsUpload uploads through a real NATS JetStream server's
// object store. It needs PITH_TEST_NATS (e.g. nats://127.0.0.1:4222).
func TestNATSObjectsUpload(t *testing.T) {
	url := os.Getenv("PITH_TEST_NATS")
	if url == "" {
		testpeer.Missing(t, "PITH_TEST_NATS not set (e.g. nats://127.0.0.1:4222 with JetStream): NATS upload test skipped")
	}
	bucket := fmt.Sprintf("pith_events_test_%d", time.Now().UnixNano())
	up, err := NewNATSObjects(url, bucket)
	if err != nil {
		t.Fatal(err)
	}
	// The collector closes its uploader; this one checks and cleans up.
	check, err := NewNATSObjects(url, bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	defer func() {
		if js, err := check.nc.JetStream(); err == nil {
			js.DeleteObjectStore(bucket)
		}
	}()
	fsys := vfs.NewFaultFS()
	opts := testOptions(fsys)
	opts.Upload = up
	opts.DrainTimeout = 10 * time.Second
	c, err := New("/data", opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := post(t, c.Handler(), formatBody); code != 200 {
		t.Fatalf("post: %d %s", code, body)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := listSinkFiles(fsys, "/data/events"); len(files) != 0 {
		t.Fatalf("files left after upload: %v", files)
	}
	obs, err := check.store()
	if err != nil {
		t.Fatal(err)
	}
	list, err := obs.List()
	if err != nil || len(list) != 1 {
		t.Fatalf("objects: %v %v", list, err)
	}
	obj, err := obs.GetBytes(list[0].Name)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := DecodeBytes(nil, []byte(formatBody), 1, 10)
	if got := readSinkFile(t, list[0].Name, bytes.NewReader(obj)); !reflect.DeepEqual(got, want) {
		t.Errorf("uploaded events:\n%+v\nwant %+v", got, want)
	}
}
