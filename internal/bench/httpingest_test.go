package bench

import (
	"context"
	"testing"
	"time"
)

func TestHTTPIngestShort(t *testing.T) {
	res, err := RunHTTPIngest(context.Background(), HTTPIngestOptions{Dir: t.TempDir(), Clients: 2, Rows: 1000, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.Errors != 0 || res.Points != res.Requests*1000 {
		t.Fatalf("%+v", res)
	}
}
