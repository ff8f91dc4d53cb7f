package config

import (
	"strings"
	"testing"
)

// TestAlarmScheduleRuleErrors checks that each bad value of [alarms],
// [schedules] and [rules] is refused with its key path.
func TestAlarmScheduleRuleErrors(t *testing.T) {
	tests := []struct{ toml, key string }{
		{"[alarms]\nscan = \"1ms\"", "alarms.scan"},
		{"[[alarms.alarm]]\nname = \"a\"\ntype = \"hi\"\ntag = \"x\"\n[[alarms.alarm]]\nname = \"a\"\ntype = \"hi\"\ntag = \"x\"", "alarms.alarm[1].name"},
		{"[[alarms.alarm]]\nname = \"a\"\ntype = \"high\"\ntag = \"x\"", "alarms.alarm[0].type"},
		{"[[alarms.alarm]]\nname = \"a\"\ntype = \"hi\"", "alarms.alarm[0].tag"},
		{"[[alarms.alarm]]\nname = \"a\"\ntype = \"comm\"", "alarms.alarm[0].station"},
		{"[[alarms.alarm]]\nname = \"a\"\ntype = \"stale\"\ntag = \"x\"", "alarms.alarm[0].max_age"},
		{"[[alarms.alarm]]\nname = \"a\"\ntype = \"hi\"\ntag = \"x\"\nseverity = \"huge\"", "alarms.alarm[0].severity"},
		{"[[alarms.alarm]]\nname = \"a\"\ntype = \"hi\"\ntag = \"x\"\ndeadband = -1.0", "alarms.alarm[0].deadband"},
		{"[[alarms.webhook]]\nurl = \"ftp://x\"", "alarms.webhook[0].url"},
		{"[[alarms.webhook]]\nurl = \"http://127.0.0.1:1\"\nheaders = [\"nocolon\"]", "alarms.webhook[0].headers[0]"},
		{"[alarms.mqtt]\nenabled = true\nbroker = \"localhost\"", "alarms.mqtt.broker"},
		{"[schedules]\ntimezone = \"Mars/Olympus\"", "schedules.timezone"},
		{"[schedules]\nholidays = [\"25/12/2026\"]", "schedules.holidays[0]"},
		{"[[schedules.schedule]]\nname = \"a b\"", "schedules.schedule[0].name"},
		{"[[schedules.schedule]]\nname = \"a\"\nweekly = [\"mon 9-10\"]", "schedules.schedule[0].weekly[0]"},
		{"[[schedules.schedule]]\nname = \"a\"\nlead = \"25h\"", "schedules.schedule[0].lead"},
		{"[[schedules.booking]]\nschedule = \"none\"\nstart = \"2026-12-03T08:00\"\nend = \"2026-12-03T09:00\"", "schedules.booking[0].schedule"},
		{"[[schedules.schedule]]\nname = \"a\"\n[[schedules.booking]]\nschedule = \"a\"\nstart = \"2026-12-03T08:00\"\nend = \"2026-12-03T07:00\"", "schedules.booking[0].end"},
		{"[[rules.rule]]\nname = \"r\"\ntag = \"x\"", "rules.rule[0].when"},
		{"[[rules.rule]]\nname = \"r\"\nwhen = \"true\"", "rules.rule[0].tag"},
		{"[[rules.limit]]\ntag = \"x\"\nmin = 5.0\nmax = 1.0", "rules.limit[0].max"},
		{"[[rules.limit]]\ntag = \"x\"\nmax_rate = -1.0", "rules.limit[0].max_rate"},
		{"[[rules.limit]]\ntag = \"x\"\n[[rules.limit]]\ntag = \"x\"", "rules.limit[1].tag"},
	}
	for _, tc := range tests {
		_, err := Parse([]byte(tc.toml))
		if err == nil || !strings.Contains(err.Error(), tc.key+":") {
			t.Errorf("%q: error %v, want one naming %s", tc.toml, err, tc.key)
		}
	}
	good := `
[alarms]
enabled = true
[[alarms.alarm]]
name = "plc.comm"
type = "comm"
station = "plc"
[[alarms.alarm]]
name = "t.stale"
type = "stale"
tag = "t"
max_age = "1m"
[schedules]
enabled = true
timezone = "America/New_York"
[[schedules.schedule]]
name = "a"
weekly = ["mon-fri 08:00-18:00", "daily 22:00-06:00"]
[rules]
[[rules.limit]]
tag = "x"
max = 3.0
`
	cfg, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.Rules.Limit[0]; l.Min != nil || l.Max == nil || *l.Max != 3 {
		t.Errorf("limit = %+v", l)
	}
	if cfg.Alarms.Scan != DefaultAlarmScan || !cfg.Alarms.StationComm {
		t.Errorf("alarm defaults: %+v", cfg.Alarms)
	}
}

// FuzzParseWeekly: whatever ParseWeekly accepts is a valid period whose
// String form parses back to the same period.
func FuzzParseWeekly(f *testing.F) {
	for _, s := range []string{"mon-fri 08:00-18:00", "sat,sun 9:00-12:30", "daily 22:00-06:00", "sun 00:00-24:00", "fri-mon 1:5-2:00", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseWeekly(s)
		if err != nil {
			return
		}
		if p.Days == 0 || p.Days > 0x7f || p.Start < 0 || p.Start >= 1440 || p.End <= p.Start || p.End > p.Start+1440 {
			t.Fatalf("ParseWeekly(%q) = %+v", s, p)
		}
		q, err := ParseWeekly(p.String())
		if err != nil || q != p {
			t.Fatalf("round trip of %q: %q -> %+v, %v; want %+v", s, p.String(), q, err, p)
		}
	})
}
