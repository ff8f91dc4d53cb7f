package schedule

import (
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
)

// FuzzBookingsFile feeds arbitrary bytes as DATA/schedules/bookings.json
// (a file on disk, which a failing card may corrupt) to the decoder New
// uses: it refuses the file or returns bookings, and the schedule's
// weekly period still answers whatever the bookings hold.
func FuzzBookingsFile(f *testing.F) {
	f.Add([]byte(`{"bookings":[{"id":"ab","schedule":"s","start":"2026-12-03T08:00","end":"2026-12-03T12:00","note":"n"}]}`))
	f.Add([]byte(`{"bookings":[{"id":"x","schedule":"gone","start":"2026-12-03T08:00","end":"2026-12-03T07:00"}]}`))
	f.Add([]byte(`{"bookings":null}`))
	f.Add([]byte(`[`))
	cal, err := NewCalendar(config.Schedules{Timezone: "Europe/London",
		Schedule: []config.ScheduleDef{{Name: "s", Weekly: []string{"mon-fri 08:00-18:00"}}}})
	if err != nil {
		f.Fatal(err)
	}
	s, _ := cal.Schedule("s")
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, data []byte) {
		bs, err := decodeBookings(data, cal, func(Booking, error) {})
		if err != nil {
			return
		}
		for _, b := range bs {
			if b.Source != "api" {
				t.Fatalf("source %q", b.Source)
			}
			if !b.start.IsZero() && !b.end.After(b.start) {
				t.Fatalf("accepted booking ends before it starts: %+v", b)
			}
		}
		if !cal.On(s, bs, at) {
			t.Fatal("weekly period lost")
		}
	})
}
