package audit

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func open(t *testing.T, dir string, now func() time.Time) *Journal {
	t.Helper()
	o := DefaultOptions()
	o.Now = now
	j, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func TestAppendQuery(t *testing.T) {
	day := time.Date(2026, 11, 24, 23, 59, 0, 0, time.UTC)
	now := day
	j := open(t, t.TempDir(), func() time.Time { return now })
	v1, v2 := 20.0, 21.5
	for i, r := range []Record{
		{Who: "ada", Action: ActionSignIn, From: "10.0.0.1:5"},
		{Who: "otto", Action: ActionControl, Target: "boiler.sp", Old: &v1, New: &v2},
		{Who: "otto", Action: ActionControl, Target: "turbine.sp", New: &v2, Result: "control forbidden"},
	} {
		if i == 2 {
			now = now.Add(2 * time.Minute) // the next day's file
		}
		if err := j.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	all, err := j.Query(Filter{})
	if err != nil || len(all) != 3 || all[0].Seq != 3 || all[2].Seq != 1 {
		t.Fatalf("query all: %+v %v, want 3 records newest first", all, err)
	}
	if all[1].Old == nil || *all[1].Old != 20 || all[2].Result != "ok" {
		t.Errorf("record round trip: %+v", all[1])
	}
	for _, tt := range []struct {
		f    Filter
		want int
	}{
		{Filter{Who: "otto"}, 2},
		{Filter{Action: ActionSignIn}, 1},
		{Filter{Text: "TURBINE"}, 1},
		{Filter{Text: "forbidden"}, 1},
		{Filter{From: day.Add(time.Minute).UnixMilli()}, 1},
		{Filter{To: day.Add(time.Minute).UnixMilli()}, 2},
		{Filter{Limit: 1}, 1},
	} {
		got, err := j.Query(tt.f)
		if err != nil || len(got) != tt.want {
			t.Errorf("%+v: %d records %v, want %d", tt.f, len(got), err, tt.want)
		}
	}
	// Reopened, the sequence goes on.
	j.Close()
	j2 := open(t, j.Dir(), func() time.Time { return now })
	j2.Append(Record{Action: ActionReload})
	got, _ := j2.Query(Filter{Limit: 1})
	if got[0].Seq != 4 {
		t.Errorf("after reopen seq %d, want 4", got[0].Seq)
	}
}

func TestTornTailAndCorruption(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 25, 8, 0, 0, 0, time.UTC)
	j := open(t, dir, func() time.Time { return now })
	for i := 0; i < 3; i++ {
		j.Append(Record{Who: "ada", Action: ActionBackup})
	}
	j.Close()
	path := filepath.Join(dir, "2026-11-25.log")
	buf, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(buf), "\n")
	// Corrupt the middle record and tear a fourth one.
	mid := []byte(lines[1])
	mid[20] ^= 0x20
	torn := string(buf[:len(lines[0])]) + string(mid) + lines[2] + `0badc0de {"seq":4,"t":1`
	os.WriteFile(path, []byte(torn), 0o600)
	j2 := open(t, dir, func() time.Time { return now })
	recs, err := j2.Query(Filter{})
	if err != nil || len(recs) != 2 || recs[0].Seq != 3 || recs[1].Seq != 1 {
		t.Fatalf("after corruption: %+v %v, want records 3 and 1", recs, err)
	}
	if j2.Corrupt() != 1 {
		t.Errorf("corrupt count %d, want 1", j2.Corrupt())
	}
	if err := j2.Append(Record{Action: ActionReload}); err != nil {
		t.Fatal(err)
	}
	recs, _ = j2.Query(Filter{Limit: 1})
	if recs[0].Seq != 4 || recs[0].Action != ActionReload {
		t.Errorf("append after the torn tail: %+v", recs[0])
	}
}

func TestRetention(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	o := Options{Retention: 48 * time.Hour, Now: func() time.Time { return now }}
	j, _ := Open(dir, o)
	for i := 0; i < 5; i++ {
		j.Append(Record{Action: ActionReload})
		now = now.Add(24 * time.Hour)
	}
	j.Append(Record{Action: ActionReload})
	j.Close()
	ents, _ := os.ReadDir(dir)
	if len(ents) > 4 {
		t.Errorf("%d day files kept with a 48 h retention, want at most 4", len(ents))
	}
}

func TestHandlerCSV(t *testing.T) {
	j := open(t, t.TempDir(), nil)
	j.Append(Record{Who: "=cmd|' /C calc'!A0", Action: ActionSignInFailed, Target: "+x"})
	srv := httptest.NewServer(j.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "?format=csv")
	if err != nil {
		t.Fatal(err)
	}
	b := new(strings.Builder)
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	resp.Body.Close()
	if !strings.HasPrefix(b.String(), "seq,time,who") || !strings.Contains(b.String(), `'=cmd`) || !strings.Contains(b.String(), ",'+x,") {
		t.Errorf("CSV: %q", b.String())
	}
	for _, q := range []string{"?limit=0", "?from=x", "?format=xml"} {
		resp, _ := http.Get(srv.URL + q)
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("%s: %s, want 400", q, resp.Status)
		}
	}
}

// FuzzDecodeLine: decoding never panics, and a line that decodes encodes
// back to a line that decodes to the same record.
func FuzzDecodeLine(f *testing.F) {
	v := 1.5
	for _, r := range []Record{{Seq: 1, T: 5, Who: "ada", Action: "control", New: &v}, {}} {
		line, _ := encodeLine(r)
		f.Add(line[:len(line)-1])
	}
	f.Add([]byte("00000000 {}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeLine(b)
		if err != nil {
			return
		}
		line, err := encodeLine(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeLine(line[:len(line)-1]); err != nil {
			t.Fatalf("re-encoded line does not decode: %v", err)
		}
	})
}
