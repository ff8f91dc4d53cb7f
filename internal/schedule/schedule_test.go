package schedule

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/config"
	"github.com/pith-historian/pith/internal/tag"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestWeeklyAcrossDSTAndMidnight checks states at UTC instants around the
// 2026 clock changes: London 29 Mar (01:00 GMT -> 02:00 BST) and 25 Oct;
// New York 8 Mar (02:00 EST -> 03:00 EDT) and 1 Nov.
func TestWeeklyAcrossDSTAndMidnight(t *testing.T) {
	type check struct {
		at   string // UTC
		want bool
	}
	tests := []struct {
		name     string
		zone     string
		weekly   []string
		lead     time.Duration
		holidays []string
		checks   []check
	}{
		{"london 07:00 before and after spring forward", "Europe/London", []string{"daily 07:00-08:00"}, 0, nil, []check{
			{"2026-03-28T06:59:59Z", false}, {"2026-03-28T07:00:00Z", true}, {"2026-03-28T07:59:59Z", true}, {"2026-03-28T08:00:00Z", false},
			{"2026-03-30T05:59:59Z", false}, {"2026-03-30T06:00:00Z", true}, {"2026-03-30T06:59:59Z", true}, {"2026-03-30T07:00:00Z", false},
		}},
		{"london full sunday of 23 hours", "Europe/London", []string{"sun 00:00-24:00"}, 0, nil, []check{
			{"2026-03-28T23:59:59Z", false}, {"2026-03-29T00:00:00Z", true}, {"2026-03-29T22:59:59Z", true}, {"2026-03-29T23:00:00Z", false},
		}},
		{"london full sunday of 25 hours", "Europe/London", []string{"sun 00:00-24:00"}, 0, nil, []check{
			{"2026-10-24T22:59:59Z", false}, {"2026-10-24T23:00:00Z", true}, {"2026-10-25T23:59:59Z", true}, {"2026-10-26T00:00:00Z", false},
		}},
		{"new york overnight across spring forward", "America/New_York", []string{"daily 22:00-06:00"}, 0, nil, []check{
			{"2026-03-08T02:59:59Z", false}, {"2026-03-08T03:00:00Z", true}, // 22:00 EST on the 7th
			{"2026-03-08T09:59:59Z", true}, {"2026-03-08T10:00:00Z", false}, // 06:00 EDT
		}},
		{"new york overnight across fall back", "America/New_York", []string{"daily 22:00-06:00"}, 0, nil, []check{
			{"2026-11-01T01:59:59Z", false}, {"2026-11-01T02:00:00Z", true}, // 22:00 EDT on 31 Oct
			{"2026-11-01T10:59:59Z", true}, {"2026-11-01T11:00:00Z", false}, // 06:00 EST: 9 hours
		}},
		{"new york 08:00 week across spring forward", "America/New_York", []string{"mon-fri 08:00-17:00"}, 0, nil, []check{
			{"2026-03-06T13:00:00Z", true},                                  // Fri 08:00 EST
			{"2026-03-07T13:00:00Z", false},                                 // Saturday
			{"2026-03-09T11:59:59Z", false}, {"2026-03-09T12:00:00Z", true}, // Mon 08:00 EDT
			{"2026-03-09T20:59:59Z", true}, {"2026-03-09T21:00:00Z", false},
		}},
		{"friday night past midnight", "UTC", []string{"fri 22:00-02:00"}, 0, nil, []check{
			{"2026-11-27T21:59:59Z", false}, {"2026-11-27T22:00:00Z", true}, {"2026-11-28T01:59:59Z", true}, {"2026-11-28T02:00:00Z", false},
			{"2026-11-28T22:00:00Z", false}, // Saturday night is not Friday night
		}},
		{"lead before midnight", "Europe/London", []string{"mon 00:30-01:00"}, time.Hour, nil, []check{
			{"2026-11-29T23:29:59Z", false}, {"2026-11-29T23:30:00Z", true}, {"2026-11-30T00:59:59Z", true}, {"2026-11-30T01:00:00Z", false},
		}},
		{"pre-heat lead", "Europe/London", []string{"mon-fri 08:00-18:00"}, 30 * time.Minute, nil, []check{
			{"2026-12-03T07:29:59Z", false}, {"2026-12-03T07:30:00Z", true}, {"2026-12-03T17:59:59Z", true}, {"2026-12-03T18:00:00Z", false},
		}},
		{"holiday skipped", "Europe/London", []string{"mon-fri 08:00-18:00"}, 0, []string{"2026-12-25"}, []check{
			{"2026-12-24T09:00:00Z", true}, {"2026-12-25T09:00:00Z", false}, {"2026-12-28T09:00:00Z", true},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := config.Schedules{Timezone: tc.zone, Holidays: tc.holidays, Schedule: []config.ScheduleDef{{
				Name: "s", Weekly: tc.weekly, Lead: config.Duration(tc.lead), Holidays: tc.holidays != nil}}}
			cal, err := NewCalendar(c)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := cal.Schedule("s")
			for _, ck := range tc.checks {
				if got := cal.On(s, nil, utc(ck.at)); got != ck.want {
					t.Errorf("at %s (%s): on = %v, want %v", ck.at, utc(ck.at).In(cal.Location()).Format("Mon 15:04 MST"), got, ck.want)
				}
			}
		})
	}
}

// TestWeeklyMatchesNaiveModel compares On with a minute-by-minute model
// that walks local wall-clock minutes, over two weeks around each DST
// change in both zones.
func TestWeeklyMatchesNaiveModel(t *testing.T) {
	weekly := []string{"mon-fri 08:00-18:00", "sat 22:00-03:00", "sun 01:30-02:30"}
	for _, zone := range []string{"Europe/London", "America/New_York"} {
		c := config.Schedules{Timezone: zone, Schedule: []config.ScheduleDef{{Name: "s", Weekly: weekly}}}
		cal, err := NewCalendar(c)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := cal.Schedule("s")
		for _, start := range []string{"2026-03-02T00:00:00Z", "2026-03-23T00:00:00Z", "2026-10-20T00:00:00Z", "2026-10-28T00:00:00Z"} {
			from := utc(start)
			for m := 0; m < 14*24*60; m += 7 {
				at := from.Add(time.Duration(m) * time.Minute)
				if got, want := cal.On(s, nil, at), naiveOn(s, cal.Location(), at); got != want {
					t.Fatalf("%s at %s (%s): on = %v, model %v", zone, at.Format(time.RFC3339), at.In(cal.Location()).Format("Mon 15:04 MST"), got, want)
				}
			}
		}
	}
}

// naiveOn: the schedule is on when, for some period and some start day d
// among the three around now, the period's wall-clock start on d and its
// wall-clock end (on d, or d+1 past midnight) bracket now. Wall clock
// times that do not exist (a DST gap) are resolved by time.Date's rule
// in both implementations, so only day iteration differs.
func naiveOn(s *Schedule, loc *time.Location, now time.Time) bool {
	local := now.In(loc)
	for back := 0; back <= 2; back++ {
		d := time.Date(local.Year(), local.Month(), local.Day()-back+1, 12, 0, 0, 0, loc)
		for _, p := range s.Weekly {
			if p.Days&(1<<d.Weekday()) == 0 {
				continue
			}
			sh, sm := p.Start/60, p.Start%60
			start := time.Date(d.Year(), d.Month(), d.Day(), sh, sm, 0, 0, loc)
			endDay, endMin := d.Day(), p.End
			if endMin >= 1440 {
				endDay, endMin = endDay+1, endMin-1440
			}
			end := time.Date(d.Year(), d.Month(), endDay, endMin/60, endMin%60, 0, 0, loc)
			if !now.Before(start) && now.Before(end) {
				return true
			}
		}
	}
	return false
}

func TestBookingsPersistAndDrive(t *testing.T) {
	dir := t.TempDir()
	tab := tag.New(nil, tag.DefaultOptions(), nil)
	c := config.Schedules{Timezone: "Europe/London", Scan: config.Duration(time.Second),
		Schedule: []config.ScheduleDef{{Name: "roomB", Lead: config.Duration(30 * time.Minute)}},
		Booking:  []config.BookingDef{{Schedule: "roomB", Start: "2026-12-01T10:00", End: "2026-12-01T11:00"}}}
	clk := &fakeClock{t: utc("2026-12-03T07:00:00Z")}
	e, err := New(c, dir, tab, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := e.Handler()
	post := func(body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/api/v1/schedules/bookings", bytes.NewBufferString(body)))
		return w
	}
	w := post(`{"schedule":"roomB","start":"2026-12-03T08:00","end":"2026-12-03T12:00","note":"heat room B"}`)
	if w.Code != http.StatusCreated {
		t.Fatalf("POST booking: %d %s", w.Code, w.Body)
	}
	var b Booking
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.ID == "" {
		t.Fatalf("booking answer %s: %v", w.Body, err)
	}
	for _, bad := range []string{`{"schedule":"nope","start":"2026-12-03T08:00","end":"2026-12-03T12:00"}`,
		`{"schedule":"roomB","start":"2026-12-03T12:00","end":"2026-12-03T08:00"}`,
		`{"schedule":"roomB","start":"tomorrow","end":"2026-12-03T08:00"}`, `{"schedule":"roomB","x":1}`} {
		if w := post(bad); w.Code != http.StatusBadRequest {
			t.Errorf("POST %s: %d, want 400", bad, w.Code)
		}
	}

	id, _ := tab.Lookup("pith.schedule.roomB")
	for _, ck := range []struct {
		at   string
		want float64
	}{{"2026-12-01T09:29:00Z", 0}, {"2026-12-01T09:30:00Z", 1}, {"2026-12-01T11:00:00Z", 0}, // the config booking, with lead
		{"2026-12-03T07:29:00Z", 0}, {"2026-12-03T07:30:00Z", 1}, {"2026-12-03T11:59:00Z", 1}, {"2026-12-03T12:00:00Z", 0}} {
		clk.t = utc(ck.at)
		e.Scan(clk.t)
		if v, _ := tab.Get(id); v.V != ck.want {
			t.Errorf("at %s: tag = %v, want %v", ck.at, v.V, ck.want)
		}
	}

	// A new engine (a restart) reads the stored booking back.
	e2, err := New(c, dir, tag.New(nil, tag.DefaultOptions(), nil), clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	if on, ok := e2.On("roomB", utc("2026-12-03T09:00:00Z")); !ok || !on {
		t.Fatal("stored booking not restored")
	}
	if in := e2.Info(clk.t); len(in.Bookings) != 2 || len(in.Schedules) != 1 {
		t.Fatalf("info = %+v", in)
	}
	req := httptest.NewRequest(http.MethodDelete, "/api/v1/schedules/bookings/"+b.ID, nil)
	w = httptest.NewRecorder()
	e2.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", w.Code, w.Body)
	}
	w = httptest.NewRecorder()
	e2.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodDelete, "/api/v1/schedules/bookings/"+b.ID, nil))
	if w.Code != http.StatusNotFound {
		t.Fatalf("DELETE again: %d", w.Code)
	}
	e3, err := New(c, dir, tag.New(nil, tag.DefaultOptions(), nil), clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	if on, _ := e3.On("roomB", utc("2026-12-03T09:00:00Z")); on {
		t.Fatal("deleted booking came back")
	}

	// Reload: a new weekly period applies, API bookings are kept.
	c.Schedule[0].Weekly = []string{"daily 00:00-24:00"}
	if err := e3.Reload(c); err != nil {
		t.Fatal(err)
	}
	if on, _ := e3.On("roomB", utc("2026-12-05T03:00:00Z")); !on {
		t.Fatal("reloaded weekly period not applied")
	}
	// Reload without the schedule: its tag goes to 0.
	tab3 := tag.New(nil, tag.DefaultOptions(), nil)
	e4, err := New(c, t.TempDir(), tab3, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	e4.Scan(clk.t)
	id4, _ := tab3.Lookup("pith.schedule.roomB")
	if v, _ := tab3.Get(id4); v.V != 1 {
		t.Fatalf("before removal: %v", v.V)
	}
	if err := e4.Reload(config.Schedules{Timezone: "UTC"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := tab3.Get(id4); v.V != 0 {
		t.Fatalf("removed schedule's tag = %v, want 0", v.V)
	}
	w = httptest.NewRecorder()
	e3.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/schedules", nil))
	if w.Code != 200 || !bytes.Contains(w.Body.Bytes(), []byte(`"weekly":["sun,mon,tue,wed,thu,fri,sat 00:00-24:00"]`)) {
		t.Fatalf("GET: %d %s", w.Code, w.Body)
	}
}

func TestParseWeekly(t *testing.T) {
	good := map[string]string{
		"mon-fri 08:00-18:00": "mon,tue,wed,thu,fri 08:00-18:00",
		"sat,sun 9:00-12:30":  "sun,sat 09:00-12:30",
		"fri-mon 22:00-06:00": "sun,mon,fri,sat 22:00-06:00",
		"daily 00:00-24:00":   "sun,mon,tue,wed,thu,fri,sat 00:00-24:00",
	}
	for in, want := range good {
		p, err := config.ParseWeekly(in)
		if err != nil || p.String() != want {
			t.Errorf("ParseWeekly(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, in := range []string{"", "mon", "mon 08:00", "mon 08:00-08:00", "xyz 08:00-09:00", "mon 25:00-26:00",
		"mon 08:60-09:00", "mon 24:00-01:00", "mon 8-9", "mon 08:00-24:01"} {
		if _, err := config.ParseWeekly(in); err == nil {
			t.Errorf("ParseWeekly(%q) accepted", in)
		}
	}
}
