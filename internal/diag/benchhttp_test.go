package diag

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

func TestGenerateDatasetsShape(t *testing.T) {
	dir := t.TempDir()
	if err := GenerateDatasets(dir, 0.01); err != nil {
		t.Fatal(err)
	}
	ref, _, h, err := computeReference(dir)
	if err != nil {
		t.Fatal(err)
	}
	// 100 tags every 100 s for a day; a hundredth of the feed.
	if ref.plantTags != 100 || ref.plantN != 86400 || ref.feedN != 90000 || ref.q5N != 36 || h.cnt[23] != 36 {
		t.Fatalf("%+v, last hour %d", ref, h.cnt[23])
	}
}
