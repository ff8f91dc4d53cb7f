package events

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
	"github.com/pith-historian/pith/internal/walcursor"
)

// TestLegacyCursor opens a collector directory whose cursor was written by
// the release before the shared cursor format (one line "v1 <segment>
// <offset> <seq>", see docs/format/cursor.md): the collector goes on from
// it, numbering files after its seq and writing no event twice, and the
// next save writes the current format. A damaged cursor stops New.
func TestLegacyCursor(t *testing.T) {
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
	cur, ok, err := walcursor.Read(fsys, "/data/cursor")
	if err != nil || !ok || cur.Seq == 0 {
		t.Fatalf("cursor after close = %+v, %v, %v", cur, ok, err)
	}
	legacy := fmt.Sprintf("v1 %d %d %d\n", cur.Pos.Segment, cur.Pos.Offset, cur.Seq)
	writeFile(t, fsys, "/data/cursor", []byte(legacy))

	c, err = New("/data", testOptions(fsys), nil)
	if err != nil {
		t.Fatalf("open with a legacy cursor: %v", err)
	}
	if code, body := post(t, c.Handler(), `{"id":"c","name":"x"}`); code != 200 {
		t.Fatalf("post: %d %s", code, body)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range sinkEvents(t, fsys, "/data") {
		ids = append(ids, ev.ID)
	}
	if got := strings.Join(ids, ","); got != "a,b,c" {
		t.Errorf("sink has %s, want a,b,c once each", got)
	}
	after, _, err := walcursor.Read(fsys, "/data/cursor")
	if err != nil || after.Seq != cur.Seq+1 {
		t.Errorf("cursor after the next file = %+v, %v, want seq %d", after, err, cur.Seq+1)
	}
	if b := readFile(t, fsys, "/data/cursor"); !bytes.HasPrefix(b, []byte("PWC1")) {
		t.Errorf("cursor file %q, want the current format", b)
	}

	writeFile(t, fsys, "/data/cursor", []byte("v1 1 2"))
	if _, err := New("/data", testOptions(fsys), nil); !errors.Is(err, walcursor.ErrCorrupt) || !strings.Contains(err.Error(), "/data/cursor") {
		t.Errorf("open with a damaged cursor: %v, want ErrCorrupt naming the file", err)
	}
}

func writeFile(t *testing.T, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err == nil {
		_, err = f.Write(b)
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, fsys vfs.FS, path string) []byte {
	t.Helper()
	f, err := vfs.Open(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := f.ReadAt(b, 0)
	return b[:n]
}
