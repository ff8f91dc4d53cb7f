package energy

import (
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/pith-historian/pith/internal/model"
)

func get(t *testing.T, h http.Handler, url string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, url, nil))
	return w
}

func TestSafeCell(t *testing.T) {
	for in, want := range map[string]string{
		"=1+1": "'=1+1", "+cmd": "'+cmd", "-2+3": "'-2+3", "@SUM(A1)": "'@SUM(A1)",
		"\tx": "'\tx", "\rx": "'\rx", "plain": "plain", "": "", "a=b": "a=b",
	} {
		if got := SafeCell(in); got != want {
			t.Errorf("SafeCell(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]bool{"-3.5": true, "12": true, "1e-7": true, "-": false, "=1": false, "1.": false, "--1": false} {
		if got := plainNumber(in); got != want {
			t.Errorf("plainNumber(%q) = %v", in, got)
		}
	}
}

// TestReportCSVMatchesJSON runs a month's report both ways: every CSV
// number is the JSON's, and a hostile tag name reaches the CSV as text.
func TestReportCSVMatchesJSON(t *testing.T) {
	loc := mustLoc(t, "Europe/London")
	a, b := ms(t, loc, "2026-09-25 00:00"), ms(t, loc, "2026-11-02 00:00")
	var pts []model.Point
	for t0 := a; t0 < b; t0 += 60_000 {
		pts = append(pts,
			model.Point{Tag: "house.power", T: t0, V: float64(1000 + (t0/60_000)%700)},
			model.Point{Tag: "=cmd|' /C calc'!A0", T: t0, V: float64((t0 / 60_000) % 9)},
			model.Point{Tag: "room.temp", T: t0, V: 20 + float64((t0/60_000)%50)/10})
	}
	db := openStore(t, pts)
	h := NewHandler(Options{Queries: db, Location: loc, Tariffs: []*Tariff{testTariff()},
		Unit: func(tag string) string {
			if tag == "house.power" {
				return "W"
			}
			return "kWh"
		}})
	q := "/api/v1/report?month=2026-10&energy=house.power&energy=%3Dcmd%7C%27%20%2FC%20calc%27%21A0&tag=room.temp"
	jw := get(t, h, q)
	if jw.Code != 200 {
		t.Fatalf("json: %d %s", jw.Code, jw.Body)
	}
	var rep struct {
		Days   []int64 `json:"days"`
		Energy []struct {
			Tag    string  `json:"tag"`
			KWh    float64 `json:"kwh"`
			Cost   float64 `json:"cost"`
			PeakKW float64 `json:"peak_kw"`
			Days   []struct {
				KWh  float64 `json:"kwh"`
				Cost float64 `json:"cost"`
			} `json:"days"`
		} `json:"energy"`
		Stats []struct {
			Min, Mean, Max float64
		} `json:"stats"`
	}
	if err := json.Unmarshal(jw.Body.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Days) != 31 || len(rep.Energy) != 2 || len(rep.Stats) != 1 {
		t.Fatalf("report shape: %d days, %d energy, %d stats", len(rep.Days), len(rep.Energy), len(rep.Stats))
	}
	if rep.Energy[0].PeakKW != 1.699 {
		t.Errorf("peak %v kW, want 1.699", rep.Energy[0].PeakKW)
	}
	cw := get(t, h, q+"&format=csv")
	if cw.Code != 200 || !strings.HasPrefix(cw.Header().Get("Content-Type"), "text/csv") {
		t.Fatalf("csv: %d %s", cw.Code, cw.Header())
	}
	rows, err := csv.NewReader(strings.NewReader(cw.Body.String())).ReadAll()
	if err == nil {
		t.Fatal("the CSV is two tables; the reader should see uneven rows")
	}
	r := csv.NewReader(strings.NewReader(cw.Body.String()))
	r.FieldsPerRecord = -1
	if rows, err = r.ReadAll(); err != nil {
		t.Fatal(err)
	}
	if got := rows[0][3]; got != "'=cmd|' /C calc'!A0 kWh" {
		t.Errorf("hostile header cell %q", got)
	}
	for i := 0; i < 31; i++ {
		row := rows[1+i]
		for k, e := range rep.Energy {
			kwh, _ := strconv.ParseFloat(row[1+2*k], 64)
			cost, _ := strconv.ParseFloat(row[2+2*k], 64)
			if kwh != e.Days[i].KWh || cost != e.Days[i].Cost {
				t.Errorf("day %d tag %d: csv %v %v, json %v %v", i, k, kwh, cost, e.Days[i].KWh, e.Days[i].Cost)
			}
		}
	}
	if tot := rows[32]; tot[0] != "total" || tot[1] != strconv.FormatFloat(rep.Energy[0].KWh, 'f', -1, 64) {
		t.Errorf("total row %v, json %v", tot, rep.Energy[0].KWh)
	}
}

func TestHandlerErrors(t *testing.T) {
	db := openStore(t, []model.Point{{Tag: "a", T: 1000, V: 1}})
	h := NewHandler(Options{Queries: db})
	for _, tc := range []struct {
		url  string
		code int
		msg  string
	}{
		{"/api/v1/energy?from=0&to=10", 400, "missing parameter tag"},
		{"/api/v1/energy?tag=a&from=10&to=0", 400, "greater than from"},
		{"/api/v1/energy?tag=a&from=0&to=10&bucket=fortnight", 400, "bucket"},
		{"/api/v1/energy?tag=a&from=0&to=10&tz=Mars/Olympus", 400, "time zone"},
		{"/api/v1/energy?tag=a&from=0&to=10&tariff=gold", 400, "no tariff"},
		{"/api/v1/energy?tag=a&from=0&to=10&kind=gas", 400, "kind"},
		{"/api/v1/energy?tag=nope&from=0&to=10", 404, "nope"},
		{"/api/v1/energy?tag=a&from=0&to=100000000000000&bucket=hour", 400, "buckets"},
		{"/api/v1/histogram?tag=a&from=0&to=10&bins=0", 400, "bins"},
		{"/api/v1/histogram?tag=a&from=0&to=10&min=1", 400, "together"},
		{"/api/v1/histogram?tag=a&from=0&to=100000000000&res=1000", 400, "slots"},
		{"/api/v1/report?month=2026-13", 400, "month"},
		{"/api/v1/report?month=2026-10", 400, "at least one tag"},
		{"/api/v1/report?month=2026-10&tag=a&format=xls", 400, "format"},
	} {
		w := get(t, h, tc.url)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.msg) {
			t.Errorf("%s: %d %s, want %d with %q", tc.url, w.Code, w.Body, tc.code, tc.msg)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/api/v1/report", nil))
	if w.Code != 405 {
		t.Errorf("POST: %d", w.Code)
	}
	// A good energy answer for the one sample: 1 kW for the hour holding it.
	w = get(t, h, "/api/v1/energy?tag=a&from=0&to=3600000&bucket=hour")
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"kwh":1,`) {
		t.Errorf("energy: %d %s", w.Code, w.Body)
	}
}
