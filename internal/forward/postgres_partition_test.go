package forward

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pith-historian/pith/internal/model"
	"github.com/pith-historian/pith/internal/testpeer"
)

// fleetPartTable returns a table name of the test's own for a partitioned
// table, dropped at the end with its partitions and pg_partman's records.
func fleetPartTable(tb testing.TB, c *pgx.Conn) string {
	tb.Helper()
	name := fmt.Sprintf("fleet_part_%d", time.Now().UnixNano())
	tb.Cleanup(func() {
		ctx := context.Background()
		if _, err := c.Exec(ctx, "DROP TABLE IF EXISTS "+name+" CASCADE"); err != nil {
			tb.Errorf("drop %s: %v", name, err)
		}
		var schema string
		if c.QueryRow(ctx, "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_partman'").Scan(&schema) == nil {
			c.Exec(ctx, "DELETE FROM "+schema+".part_config WHERE parent_table = 'public."+name+"'")
			c.Exec(ctx, "DROP TABLE IF EXISTS "+schema+".template_public_"+name)
		}
	})
	return name
}

// partitionsOf returns the partitions of table with their row counts.
func partitionsOf(t *testing.T, c *pgx.Conn, table string) map[string]int {
	t.Helper()
	rows, err := c.Query(context.Background(), "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass", table)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, n := range names {
		var k int
		if err := c.QueryRow(context.Background(), "SELECT count(*) FROM "+n).Scan(&k); err != nil {
			t.Fatal(err)
		}
		out[n] = k
	}
	return out
}

// partPoints are points on three days far apart, one of them late by years.
func partPoints() []model.Point {
	var pts []model.Point
	for _, day := range []string{"2001-01-01T23:59:59.999Z", "2026-11-25T00:00:00Z", "2026-11-25T12:00:00Z", "2030-06-30T10:00:00Z"} {
		at, _ := time.Parse(time.RFC3339Nano, day)
		for k := range 3 {
			pts = append(pts, model.Point{Tag: fmt.Sprintf("t%d", k), T: at.UnixMilli(), V: float64(k) + 0.5})
		}
	}
	return pts
}

// TestPostgresSinkPartitioned: with partition = "day" the sink creates the
// table partitioned by day (handed to pg_partman when it is installed, or
// native partitions), puts every row in its day's partition whatever its
// age (none in pg_partman's default partition), and a resent or corrected
// batch still rewrites rows across partitions instead of adding any.
func TestPostgresSinkPartitioned(t *testing.T) {
	url := pgURL(t)
	for _, mode := range []string{"partman", "native"} {
		t.Run(mode, func(t *testing.T) {
			c := pgConnect(t, url)
			if mode == "partman" {
				var avail bool
				if err := c.QueryRow(context.Background(), "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_partman')").Scan(&avail); err != nil {
					t.Fatal(err)
				}
				if !avail {
					testpeer.Missing(t, "pg_partman not installed (Debian postgresql-15-partman): the pg_partman case skipped")
				}
			}
			table := fleetPartTable(t, c)
			s, err := NewPostgresSink(PostgresOptions{URL: url, Table: table, Site: "fleet", Partition: PartitionDay}, nil)
			if err != nil {
				t.Fatal(err)
			}
			s.noPartman = mode == "native"
			t.Cleanup(s.Close)
			pts := partPoints()
			if err := send(t, s, "b1", pts); err != nil {
				t.Fatal(err)
			}
			checkRows(t, pgRows(t, c, table), wantRows("fleet", pts))
			if mode == "partman" && s.parts.partman == "" {
				t.Fatal("pg_partman installed (Debian postgresql-15-partman) but the table is not managed by it")
			}
			parts := partitionsOf(t, c, table)
			for name, want := range map[string]int{table + "_p2001_01_01": 3, table + "_p2026_11_25": 6, table + "_p2030_06_30": 3} {
				if parts[name] != want {
					t.Errorf("partition %s holds %d rows, want %d (partitions %v)", name, parts[name], want, parts)
				}
			}
			if n := parts[table+"_default"]; n != 0 {
				t.Errorf("default partition holds %d rows, want 0", n)
			}
			// A resend, then a correction of the oldest day: rewritten, not added.
			if err := send(t, s, "b1", pts); err != nil {
				t.Fatal(err)
			}
			fix := []model.Point{{Tag: "t1", T: pts[1].T, V: 42}, {Tag: "t0", T: pts[9].T, V: 43}}
			if err := send(t, s, "b2", fix); err != nil {
				t.Fatal(err)
			}
			if s.Upserts() != 2 {
				t.Errorf("upserts %d, want 2 (the resend and the correction)", s.Upserts())
			}
			checkRows(t, pgRows(t, c, table), wantRows("fleet", pts, fix))

			// A partition dropped behind the sink's back is made again: the
			// send fails once, retryably, and the next one stores.
			if _, err := c.Exec(context.Background(), "DROP TABLE "+table+"_p2001_01_01"); err != nil {
				t.Fatal(err)
			}
			if mode == "partman" {
				// pg_partman's default partition takes the row instead.
				if err := send(t, s, "b3", pts[:3]); err != nil {
					t.Fatal(err)
				}
				// A new sink (a restart) cannot create that day's partition
				// over the default's rows: it writes them there still.
				s2, err := NewPostgresSink(PostgresOptions{URL: url, Table: table, Site: "fleet", Partition: PartitionDay}, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer s2.Close()
				if err := send(t, s2, "b4", fix); err != nil {
					t.Fatal(err)
				}
				checkRows(t, pgRows(t, c, table), wantRows("fleet", pts, fix))
				if n := partitionsOf(t, c, table)[table+"_default"]; n != 3 {
					t.Errorf("default partition holds %d rows, want 3", n)
				}
				return
			}
			err = send(t, s, "b3", pts[:3])
			if err == nil || errors.Is(err, ErrPermanent) {
				t.Fatalf("send into a dropped partition: %v, want a retryable error", err)
			}
			if err := send(t, s, "b3", pts[:3]); err != nil {
				t.Fatal(err)
			}
			if parts := partitionsOf(t, c, table); parts[table+"_p2001_01_01"] != 3 {
				t.Errorf("re-created partition holds %d rows, want 3", parts[table+"_p2001_01_01"])
			}
		})
	}
}

// TestPostgresSinkPartitionedExisting: a sink finds the partitions of a
// table partitioned by someone else: native by week (the interval from
// its options), and refuses a partitioned table whose interval it cannot
// know rather than have rows refused for good later.
func TestPostgresSinkPartitionedExisting(t *testing.T) {
	url := pgURL(t)
	c := pgConnect(t, url)
	table := fleetPartTable(t, c)
	if _, err := c.Exec(context.Background(), "CREATE TABLE "+table+" (tag text NOT NULL, ts timestamptz NOT NULL, value double precision, quality smallint NOT NULL DEFAULT 0, PRIMARY KEY (tag, ts)) PARTITION BY RANGE (ts)"); err != nil {
		t.Fatal(err)
	}
	s, err := NewPostgresSink(PostgresOptions{URL: url, Table: table, Site: "fleet"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := send(t, s, "b1", partPoints()); err == nil {
		t.Fatal("a partitioned table without partition set was written")
	}
	w, err := NewPostgresSink(PostgresOptions{URL: url, Table: table, Site: "fleet", Partition: PartitionWeek}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	pts := partPoints()
	if err := send(t, w, "b1", pts); err != nil {
		t.Fatal(err)
	}
	checkRows(t, pgRows(t, c, table), wantRows("fleet", pts))
	parts := partitionsOf(t, c, table)
	// 2001-01-01 is a Monday of ISO week 2001w01; 2026-11-25 is in 2026w48.
	for name, want := range map[string]int{table + "_p2001w01": 3, table + "_p2026w48": 6, table + "_p2030w26": 3} {
		if parts[name] != want {
			t.Errorf("partition %s holds %d rows, want %d (partitions %v)", name, parts[name], want, parts)
		}
	}
}

// TestPartitionStart checks the interval arithmetic against PostgreSQL's
// own date_trunc and to_char (the names pg_partman gives) over four years
// of days, in UTC.
func TestPartitionStart(t *testing.T) {
	url := pgURL(t)
	c := pgConnect(t, url)
	ctx := context.Background()
	if _, err := c.Exec(ctx, "SET TIME ZONE 'UTC'"); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2023, 12, 25, 13, 7, 0, 0, time.UTC)
	for d := 0; d < 4*366; d += 3 {
		at := base.AddDate(0, 0, d)
		for _, iv := range []struct{ name, trunc, format string }{
			{PartitionDay, "day", `"_p"YYYY_MM_DD`},
			{PartitionWeek, "week", `"_p"IYYY"w"IW`},
			{PartitionMonth, "month", `"_p"YYYY_MM`},
		} {
			var start time.Time
			var suffix string
			if err := c.QueryRow(ctx, "SELECT date_trunc($1, $2::timestamptz), to_char(date_trunc($1, $2::timestamptz), $3)", iv.trunc, at, iv.format).Scan(&start, &suffix); err != nil {
				t.Fatal(err)
			}
			got := partitionStart(at.UnixMilli(), iv.name)
			if !got.Equal(start) || partitionSuffix(got, iv.name) != suffix {
				t.Fatalf("%s of %s: %s %s, PostgreSQL says %s %s", iv.name, at, got, partitionSuffix(got, iv.name), start, suffix)
			}
			if end := partitionEnd(got, iv.name); !end.After(at) || partitionStart(end.UnixMilli(), iv.name).Equal(got) {
				t.Fatalf("%s of %s: end %s", iv.name, at, end)
			}
		}
	}
}

// BenchmarkPostgresSinkPartitioned measures rows/s written by Send into a
// table partitioned by day (pg_partman when installed) against a plain
// table in the same run, with a fleet's batches: 10,000 points, 100 sites
// x 100 tags at one time each, one second apart. Run it with
//
//	PITH_TEST_PG=postgres://postgres@127.0.0.1:5432/test go test -run '^$' -bench PostgresSinkPartitioned -benchtime 200x -count 3 ./internal/forward/
func BenchmarkPostgresSinkPartitioned(b *testing.B) {
	url := pgURL(b)
	names := make([]string, 0, 10000)
	for s := range 100 {
		for k := range 100 {
			names = append(names, fmt.Sprintf("site%04d.dev.t%03d", s, k))
		}
	}
	t0 := time.Date(2026, 11, 25, 23, 0, 0, 0, time.UTC).UnixMilli() // crosses midnight at n = 3600
	for _, partition := range []string{"", PartitionDay} {
		name := "plain"
		if partition != "" {
			name = partition
		}
		b.Run(name, func(b *testing.B) {
			c := pgConnect(b, url)
			table := fleetPartTable(b, c)
			s, err := NewPostgresSink(PostgresOptions{URL: url, Table: table, Partition: partition}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			batches := make([]Batch, b.N)
			for n := range batches {
				pts := make([]model.Point, len(names))
				for i, tag := range names {
					pts[i] = model.Point{Tag: tag, T: t0 + int64(n)*1000, V: float64(n + i)}
				}
				batches[n] = pointsBatch(fmt.Sprint(n), pts)
			}
			ctx := context.Background()
			b.ResetTimer()
			for n := range b.N {
				if err := s.Send(ctx, batches[n]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(names))/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
