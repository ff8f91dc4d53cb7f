package clock

import (
	"testing"
	"time"
)

func TestUntilNext(t *testing.T) {
	base := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at   time.Duration
		d    time.Duration
		want time.Duration
	}{
		{0, time.Second, time.Second},
		{1, time.Second, time.Second - 1},
		{250 * time.Millisecond, time.Second, 750 * time.Millisecond},
		{999 * time.Millisecond, time.Second, time.Millisecond},
		{3*time.Second + 100*time.Millisecond, 10 * time.Second, 6*time.Second + 900*time.Millisecond},
	} {
		if got := untilNext(base.Add(tc.at), tc.d); got != tc.want {
			t.Errorf("untilNext(+%v, %v) = %v, want %v", tc.at, tc.d, got, tc.want)
		}
	}
}

// TestAlignedTicks: a ticker created a third into a period ticks first
// at the period's end, not a period after its creation, and keeps ticking
// at multiples of the period after Next.
func TestAlignedTicks(t *testing.T) {
	const d = 300 * time.Millisecond
	time.Sleep(untilNext(time.Now(), d) + d/3)
	start := time.Now()
	a := NewAligned(d)
	defer a.Stop()
	boundary := start.Truncate(d).Add(d)
	for i := range 3 {
		tk := <-a.C
		a.Next()
		if tk.Before(boundary) {
			t.Fatalf("tick %d at %v, before the multiple %v", i, tk, boundary)
		}
		if i == 0 && tk.Sub(start) >= d {
			// A timer fires late on a loaded machine, never early: a
			// first tick a whole period after creation is not aligned.
			t.Logf("first tick %v after creation (loaded machine?)", tk.Sub(start))
		}
		boundary = tk.Truncate(d).Add(d)
	}
}
