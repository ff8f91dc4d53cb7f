package energy

import (
	"testing"
)

// TestEdgesDST checks local buckets across DST: the spring day has 23
// hours, the autumn day 25, and weeks, months and years start at local
// midnight.
func TestEdgesDST(t *testing.T) {
	london := mustLoc(t, "Europe/London")
	lordHowe := mustLoc(t, "Australia/Lord_Howe")
	kolkata := mustLoc(t, "Asia/Kolkata")
	for _, tc := range []struct {
		name     string
		loc      string
		from, to string
		unit     Unit
		hours    []float64 // length of each bucket in hours
	}{
		{"spring day", "Europe/London", "2026-03-29 00:00", "2026-03-30 00:00", Day, []float64{23}},
		{"autumn day", "Europe/London", "2026-10-25 00:00", "2026-10-26 00:00", Day, []float64{25}},
		{"days around spring", "Europe/London", "2026-03-28 10:00", "2026-03-30 01:00", Day, []float64{24, 23, 24}},
		{"week with autumn change", "Europe/London", "2026-10-21 00:00", "2026-10-22 00:00", Week, []float64{7*24 + 1}},
		{"march", "Europe/London", "2026-03-10 00:00", "2026-03-11 00:00", Month, []float64{31*24 - 1}},
		{"year", "Europe/London", "2026-06-01 00:00", "2026-06-02 00:00", Year, []float64{365 * 24}},
		{"half-hour DST day", "Australia/Lord_Howe", "2026-04-05 00:00", "2026-04-06 00:00", Day, []float64{24.5}},
		{"half-hour zone hours", "Asia/Kolkata", "2026-01-01 00:00", "2026-01-01 03:00", Hour, []float64{1, 1, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc := map[string]any{"Europe/London": london, "Australia/Lord_Howe": lordHowe, "Asia/Kolkata": kolkata}[tc.loc]
			l := mustLoc(t, tc.loc)
			_ = loc
			e, err := Edges(ms(t, l, tc.from), ms(t, l, tc.to), tc.unit, l)
			if err != nil {
				t.Fatal(err)
			}
			if len(e)-1 != len(tc.hours) {
				t.Fatalf("got %d buckets, want %d", len(e)-1, len(tc.hours))
			}
			for i, h := range tc.hours {
				if got := float64(e[i+1]-e[i]) / hourMs; got != h {
					t.Errorf("bucket %d: %v hours, want %v", i, got, h)
				}
			}
		})
	}
	// The autumn day in hours: 25 local hours, two of them starting 01:00.
	e, err := Edges(ms(t, london, "2026-10-25 00:00"), ms(t, london, "2026-10-26 00:00"), Hour, london)
	if err != nil {
		t.Fatal(err)
	}
	if len(e)-1 != 25 {
		t.Fatalf("autumn day: %d hours, want 25", len(e)-1)
	}
	// Half-hour DST: every local hour starts at a local :00.
	e, err = Edges(ms(t, lordHowe, "2026-04-05 00:00"), ms(t, lordHowe, "2026-04-06 00:00"), Hour, lordHowe)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range e {
		if m := timeIn(x, lordHowe).Minute(); m != 0 {
			t.Errorf("Lord Howe hour edge at minute %d", m)
		}
	}
}
