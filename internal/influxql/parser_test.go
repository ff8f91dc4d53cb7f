package influxql

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTimeRange checks the time conditions Grafana and users send: the
// range each gives, in ns, inclusive.
func TestTimeRange(t *testing.T) {
	now := time.Unix(1700000000, 0)
	const s = int64(1e9)
	n := now.UnixNano()
	for _, c := range []struct {
		where      string
		start, end int64
		hasEnd     bool
	}{
		{"time >= 1700000000000ms and time <= 1700003600000ms", n, n + 3600*s, true},
		{"time > 1700000000000ms and time < 1700003600000ms", n + 1, n + 3600*s - 1, true},
		{"time >= now() - 6h", n - 6*3600*s, MaxTime, false},
		{"time > now() - 1h and time < now() - 5m", n - 3600*s + 1, n - 300*s - 1, true},
		{"now() - 1d <= time", n - 86400*s, MaxTime, false},
		{"time >= '2023-11-14T22:13:20Z' AND time < '2023-11-14T22:13:21.5Z'", n, n + 1500*1e6 - 1, true},
		{"time >= '2023-11-14 22:13:20' AND time <= '2023-11-14'", n, 1699920000 * s, true},
		{"time = 1700000000000000000", n, n, true},
		{"time >= 1700000000s + 30m - 1800s", n, MaxTime, false},
		{"(host = 'a' OR host = 'b') AND time >= 1700000000000ms", n, MaxTime, false},
		{"time >= 1w", 7 * 86400 * s, MaxTime, false},
		{"time >= 5000u AND time < 6µs", 5000 * 1e3, 6*1e3 - 1, true},
	} {
		st, err := Parse("SELECT mean(x) FROM m WHERE "+c.where, now)
		if err != nil {
			t.Errorf("%s: %v", c.where, err)
			continue
		}
		sel := st[0].(*SelectStatement)
		if sel.Start != c.start || sel.End != c.end || sel.HasEnd != c.hasEnd {
			t.Errorf("%s: [%d, %d] end %v, want [%d, %d] end %v", c.where, sel.Start, sel.End, sel.HasEnd, c.start, c.end, c.hasEnd)
		}
	}
}

// TestParseRefusals checks what is refused whole (ParseError: 400) and
// what only in its statement (UnsupportedError), and the messages.
func TestParseRefusals(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for _, c := range []struct {
		q, want     string
		unsupported bool
	}{
		{"SELECT x FROM m WHERE time > now() - 99999999999h", "overflowed duration", false},
		{"SELECT x FROM m WHERE time > 'yesterday'", `invalid time string "yesterday"`, true},
		{"SELECT x FROM m WHERE time > 1 OR host = 'a'", "OR", true},
		{"SELECT x FROM m WHERE time != 1", "invalid time comparison", true},
		{"SELECT x FROM m WHERE host =~ /(/", "invalid regular expression", false},
		{"SELECT x FROM m WHERE host =~ 'a'", "expected regex", false},
		{`SELECT x FROM m WHERE host = 'unterminated`, "unterminated string", false},
		{"SELECT x FROM /m.*/, n", "a regular expression beside other sources", true},
		{"SELECT x FROM /m(/", "invalid regular expression", false},
		{"SELECT x FROM (SELECT y FROM m)", "subqueries", true},
		{"SELECT x INTO y FROM m", "INTO", true},
		{"SELECT mean(x) FROM m GROUP BY time(1m) tz('Europe/Paris')", "tz()", true},
		{"SELECT mean(x) FROM m GROUP BY time(0s)", "positive duration", false},
		{"SELECT mean(*) FROM m", "mean(*)", true},
		{"SELECT x FROM m GROUP BY time(1m)", "GROUP BY requires at least one aggregate", true},
		{"SELECT percentile(x, 95) FROM m", "percentile() is not supported", true},
		{"SHOW USERS", "SHOW USERS is not supported", true},
		{"CREATE USER u WITH PASSWORD 'p'", "only CREATE DATABASE", true},
		{"SELECT x FROM m LIMIT -1", "expected integer", false},
		{"SELECT x FROM m WHERE " + strings.Repeat("(", 300) + "a = 'b'" + strings.Repeat(")", 300), "nested too deeply", false},
	} {
		st, err := Parse(c.q, now)
		if err == nil {
			if u, ok := st[0].(*unsupportedStatement); ok {
				err = &UnsupportedError{u.what}
			}
		}
		if err == nil {
			t.Errorf("%s: accepted", c.q)
			continue
		}
		var ue *UnsupportedError
		if errors.As(err, &ue) != c.unsupported || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %T %v, want unsupported=%v containing %q", c.q, err, err, c.unsupported, c.want)
		}
	}
}

// TestParseIdentifiers checks quoting, escapes, comments and the
// retention-policy prefixes of measurement names.
func TestParseIdentifiers(t *testing.T) {
	st, err := Parse(`-- a comment
SELECT "te\"mp" AS "t 1", mean FROM "telegraf"."autogen"."cpu load" WHERE "host" = 'it''s' /* inline */ ; select x from "db"..m`, time.Unix(0, 0))
	if err == nil {
		t.Fatalf("'' is not an escape in InfluxQL: accepted %v", st)
	}
	st, err = Parse(`-- a comment
SELECT "te\"mp" AS "t 1", "mean" FROM "telegraf"."autogen"."cpu load" WHERE "host" = 'it\'s' /* inline */ ; select x from "db"..m`, time.Unix(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	a, b := st[0].(*SelectStatement), st[1].(*SelectStatement)
	if a.Measurement != "cpu load" || a.Fields[0].Arg != `te"mp` || a.Fields[0].Name() != "t 1" || a.Fields[1].Arg != "mean" || b.Measurement != "m" {
		t.Errorf("got %+v and %+v", a, b)
	}
	ok, err := matchCond(a.Cond, &Series{Keys: []string{"host"}, Values: []string{"it's"}})
	if !ok || err != nil {
		t.Errorf("condition on it's: %v %v", ok, err)
	}
}
