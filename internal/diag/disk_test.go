package diag

import (
	"context"
	"testing"

	"github.com/pith-historian/pith/internal/tag"
)

// diskStore is a fakeStore that also reports its disk.
type diskStore struct {
	fakeStore
	full   bool
	errors int64
	free   int64
}

func (s *diskStore) DiskFull() bool            { return s.full }
func (s *diskStore) DiskFullErrors() int64     { return s.errors }
func (s *diskStore) FreeBytes() (int64, error) { return s.free, nil }

// TestDiskTags: the disk-full system tags follow the store on the fast
// clock, so a full disk shows within a second.
func TestDiskTags(t *testing.T) {
	st := &diskStore{free: 1 << 30}
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	c := New(Sources{Store: st, Tags: tab, Sink: tab}, nil, Options{})
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Stop()
	c.Collect(true)
	if v, _ := c.Value("pith.sys.store.disk_full"); v != 0 {
		t.Errorf("disk_full = %v, want 0", v)
	}
	st.full, st.errors, st.free = true, 3, 0
	c.Collect(false)
	for name, want := range map[string]float64{
		"pith.sys.store.disk_full":        1,
		"pith.sys.store.disk_full_errors": 3,
		"pith.sys.store.free_bytes":       0,
	} {
		if v, ok := c.Value(name); !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", name, v, ok, want)
		}
	}
	// A store without a disk view has no such tags.
	c2 := New(Sources{Store: &fakeStore{}, Tags: tab, Sink: tab}, nil, Options{})
	c2.Collect(true)
	if _, ok := c2.Value("pith.sys.store.disk_full"); ok {
		t.Error("disk_full defined for a store without DiskSource")
	}
}
