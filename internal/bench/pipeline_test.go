package bench

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestPipelineVerified runs the in-process pipeline briefly and checks that
// every produced sample is in the store.
func TestPipelineVerified(t *testing.T) {
	res, err := RunPipeline(context.Background(), PipelineOptions{
		Dir: t.TempDir(), Tags: 100, Duration: 300 * time.Millisecond, Verify: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verified || res.Dropped != 0 || res.Written != res.Produced {
		t.Fatalf("produced %d, written %d, dropped %d, read back %d", res.Produced, res.Written, res.Dropped, res.ReadBack)
	}
	if os.Getenv("PITH_DIAG_VERBOSE") != "" {
		t.Logf("%+v", res)
	}
}
