package bench

import "testing"

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
