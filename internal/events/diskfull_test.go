package events

import (
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/store/vfs"
)

// TestDiskFull507: with the disk full the collector answers 507 with a
// JSON error, and takes the same events again once space returns,
// without a restart.
func TestDiskFull507(t *testing.T) {
	fsys := vfs.NewFaultFS()
	c, err := New("/data", testOptions(fsys), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	h := c.Handler()
	body := `{"id":"e1","name":"door","num":{"open":1}}` + "\n"
	fsys.SetCapacity(1) // everything written so far stays, nothing more fits
	code, resp := post(t, h, body)
	if code != 507 || !strings.Contains(resp, `"error"`) || !strings.Contains(resp, "disk full") {
		t.Fatalf("post on a full disk: %d %s", code, resp)
	}
	fsys.SetCapacity(0)
	code, resp = post(t, h, body)
	if code != 200 || !strings.Contains(resp, `"accepted":1`) {
		t.Fatalf("post after space returned: %d %s", code, resp)
	}
}
