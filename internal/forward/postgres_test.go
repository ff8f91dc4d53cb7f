package forward

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/pith-historian/pith/internal/testpeer"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/jackc/pgx/v5"
)

// pgURL returns the test database's URL, or skips. Run it with
//
//	PITH_TEST_PG=postgres://postgres@127.0.0.1:5432/test go test -run Postgres ./internal/forward/
func pgURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("PITH_TEST_PG")
	if u == "" {
		testpeer.Missing(tb, "PITH_TEST_PG is not set (e.g. postgres://postgres@127.0.0.1:5432/test)")
	}
	return u
}

// pgConnect opens a connection of the test's own, closed at its end.
func pgConnect(tb testing.TB, url string) *pgx.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatalf("connect to %s: %v", url, err)
	}
	tb.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// pgTable returns a table name of the test's own, dropped at its end.
func pgTable(tb testing.TB, c *pgx.Conn) string {
	tb.Helper()
	name := fmt.Sprintf("pith_test_%d", time.Now().UnixNano())
	tb.Cleanup(func() {
		if _, err := c.Exec(context.Background(), "DROP TABLE IF EXISTS "+name); err != nil {
			tb.Errorf("drop %s: %v", name, err)
		}
	})
	return name
}

func newPostgresSink(tb testing.TB, url, table, site string) *PostgresSink {
	tb.Helper()
	s, err := NewPostgresSink(PostgresOptions{URL: url, Table: table, Site: site}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

// pgRows reads the whole table, ordered by tag and time.
func pgRows(t *testing.T, c *pgx.Conn, table string) []model.Point {
	t.Helper()
	rows, err := c.Query(context.Background(),
		"SELECT tag, (extract(epoch FROM ts) * 1000)::bigint, value, quality FROM "+table+" ORDER BY tag, ts")
	if err != nil {
		t.Fatal(err)
	}
	var got []model.Point
	for rows.Next() {
		var p model.Point
		var q int16
		if err := rows.Scan(&p.Tag, &p.T, &p.V, &q); err != nil {
			t.Fatal(err)
		}
		p.Q = model.Quality(q)
		got = append(got, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// wantRows returns what the table must hold after pts were sent from
// site: the last point of each tag and time, tags prefixed, sorted.
func wantRows(site string, pts ...[]model.Point) []model.Point {
	var all []model.Point
	for _, b := range pts {
		all = append(all, b...)
	}
	all = lastWins(nil, all)
	for i := range all {
		all[i].Tag = siteTag(site, all[i].Tag)
	}
	return all
}

func checkRows(t *testing.T, got, want []model.Point) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("table holds %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Tag != w.Tag || g.T != w.T || g.Q != w.Q || !(g.V == w.V || math.IsNaN(g.V) && math.IsNaN(w.V)) {
			t.Fatalf("row %d = %+v, want %+v", i, g, w)
		}
	}
}

func send(t *testing.T, s Sink, id string, pts []model.Point) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Send(ctx, pointsBatch(id, pts))
}

func TestPostgresSinkRoundTrip(t *testing.T) {
	url := pgURL(t)
	c := pgConnect(t, url)
	table := pgTable(t, c)
	s := newPostgresSink(t, url, table, "edge1")

	b1 := []model.Point{
		{Tag: "hx.t_out", T: 1_700_000_000_000, V: 61.5},
		{Tag: "hx.t_out", T: 1_700_000_001_000, V: 62, Q: model.QualityUncertain},
		{Tag: "pump.run", T: 1_700_000_000_500, V: 1, Q: model.QualityBad},
		{Tag: "hx.t_out", T: 1_700_000_000_000, V: 61.7}, // same time again: the last wins
		{Tag: "odd.values", T: -1000, V: math.Inf(-1)},
		{Tag: "odd.values", T: 0, V: math.NaN()},
		{Tag: "odd.values", T: 1, V: -0.0},
	}
	if err := send(t, s, "edge1-1-0", b1); err != nil {
		t.Fatal(err)
	}
	checkRows(t, pgRows(t, c, table), wantRows("edge1", b1))

	// A replay (lost ack, restart) changes nothing and adds no row.
	if err := send(t, s, "edge1-1-0", b1); err != nil {
		t.Fatal(err)
	}
	checkRows(t, pgRows(t, c, table), wantRows("edge1", b1))

	// A later batch overwrites a value: the last write wins.
	b2 := []model.Point{
		{Tag: "hx.t_out", T: 1_700_000_001_000, V: 63},
		{Tag: "hx.t_out", T: 1_700_000_002_000, V: 64},
	}
	if err := send(t, s, "edge1-1-100", b2); err != nil {
		t.Fatal(err)
	}
	checkRows(t, pgRows(t, c, table), wantRows("edge1", b1, b2))
	if got := s.Upserts(); got != 2 {
		t.Errorf("upserts = %d, want 2 (the replay and the overwrite)", got)
	}

	// A second sink (a restart) uses the existing table.
	s2 := newPostgresSink(t, url, table, "edge1")
	if err := send(t, s2, "edge1-1-100", b2); err != nil {
		t.Fatal(err)
	}
	checkRows(t, pgRows(t, c, table), wantRows("edge1", b1, b2))
}

// TestPostgresSinkGrafanaQuery runs the queries a Grafana PostgreSQL
// panel sends ($__timeGroupAlias and $__timeFilter expanded) on a
// forwarded table.
func TestPostgresSinkGrafanaQuery(t *testing.T) {
	url := pgURL(t)
	c := pgConnect(t, url)
	table := pgTable(t, c)
	s := newPostgresSink(t, url, table, "edge2")

	const t0 = 1_700_000_040_000 // a whole minute
	var pts []model.Point
	for i := range 180 { // three minutes of one value per second
		pts = append(pts, model.Point{Tag: "boiler.temp", T: t0 + int64(i)*1000, V: float64(i / 60)})
	}
	if err := send(t, s, "edge2-1-0", pts); err != nil {
		t.Fatal(err)
	}
	q := `SELECT floor(extract(epoch from ts)/60)*60 AS "time", avg(value) AS "edge2.boiler.temp"
FROM ` + table + `
WHERE ts BETWEEN '2023-11-14T22:14:00Z' AND '2023-11-14T22:17:00Z' AND tag = 'edge2.boiler.temp'
GROUP BY 1 ORDER BY 1`
	rows, err := c.Query(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var ts, v float64
		if err := rows.Scan(&ts, &v); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d=%g", int64(ts), v))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"1700000040=0", "1700000100=1", "1700000160=2"}
	if !slices.Equal(got, want) {
		t.Errorf("grafana query = %v, want %v", got, want)
	}

	// The table-format panel: the latest value of each tag.
	var tag string
	var v float64
	err = c.QueryRow(context.Background(),
		"SELECT DISTINCT ON (tag) tag, value FROM "+table+" ORDER BY tag, ts DESC").Scan(&tag, &v)
	if err != nil || tag != "edge2.boiler.temp" || v != 2 {
		t.Errorf("latest = %q %g (%v), want edge2.boiler.temp 2", tag, v, err)
	}
}

func TestPostgresSinkRefusals(t *testing.T) {
	url := pgURL(t)
	c := pgConnect(t, url)
	table := pgTable(t, c)
	s := newPostgresSink(t, url, table, "")

	ok := []model.Point{{Tag: "a", T: 1000, V: 1}}
	if err := send(t, s, "x-1-0", ok); err != nil {
		t.Fatal(err)
	}
	// A constraint the operator added refuses the batch itself.
	if _, err := c.Exec(context.Background(), "ALTER TABLE "+table+" ADD CHECK (value < 1000)"); err != nil {
		t.Fatal(err)
	}
	err := send(t, s, "x-1-10", []model.Point{{Tag: "a", T: 2000, V: 5000}})
	if !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "23514") {
		t.Errorf("send past a check constraint: %v, want ErrPermanent with SQLSTATE 23514", err)
	}
	err = send(t, s, "x-1-20", []model.Point{{Tag: "a", T: math.MaxInt64, V: 1}})
	if !errors.Is(err, ErrPermanent) {
		t.Errorf("send of a time past timestamptz: %v, want ErrPermanent", err)
	}
	// Nothing of the refused batches was written; the sink still works.
	if err := send(t, s, "x-1-40", []model.Point{{Tag: "b", T: 1000, V: 2}}); err != nil {
		t.Fatal(err)
	}
	checkRows(t, pgRows(t, c, table), []model.Point{{Tag: "a", T: 1000, V: 1}, {Tag: "b", T: 1000, V: 2}})

	// An existing table without a unique index on (tag, ts) gets one, so
	// that a resent batch adds no row.
	bare := pgTable(t, c)
	if _, err := c.Exec(context.Background(), "CREATE TABLE "+bare+" (tag text, ts timestamptz, value float8, quality int2)"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := send(t, newPostgresSink(t, url, bare, ""), "x-1-45", ok); err != nil {
			t.Fatalf("send to a table without key: %v", err)
		}
	}
	checkRows(t, pgRows(t, c, bare), ok)
	// One holding duplicates cannot get the index: a retryable error
	// naming it.
	dups := pgTable(t, c)
	if _, err := c.Exec(context.Background(), "CREATE TABLE "+dups+" (tag text, ts timestamptz, value float8, quality int2)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(context.Background(), "INSERT INTO "+dups+" VALUES ('a', now(), 1, 0), ('a', now(), 1, 0)"); err != nil {
		t.Fatal(err)
	}
	err = send(t, newPostgresSink(t, url, dups, ""), "x-1-46", ok)
	if err == nil || errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "unique index") {
		t.Errorf("send to a table with duplicate rows: %v, want a retryable error naming the unique index", err)
	}

	// A server that cannot be reached is a retried error.
	down, err := NewPostgresSink(PostgresOptions{URL: "postgres://postgres@127.0.0.1:1/test?connect_timeout=2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if err := send(t, down, "x-1-50", ok); err == nil || errors.Is(err, ErrPermanent) {
		t.Errorf("send to a closed port: %v, want a retryable error", err)
	}
}

// TestPostgresSinkReconnect kills the sink's server session, then drops
// its table: the next send may fail, and the one after it dials again
// (creates the table again) and succeeds.
func TestPostgresSinkReconnect(t *testing.T) {
	url := pgURL(t)
	c := pgConnect(t, url)
	table := pgTable(t, c)
	s := newPostgresSink(t, url, table, "edge3")

	b1 := []model.Point{{Tag: "a", T: 1000, V: 1}}
	if err := send(t, s, "edge3-1-0", b1); err != nil {
		t.Fatal(err)
	}
	pid := s.conn.PID()
	var killed bool
	if err := c.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", pid).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate backend %d: %v %v", pid, killed, err)
	}
	b2 := []model.Point{{Tag: "a", T: 2000, V: 2}}
	if err := send(t, s, "edge3-1-10", b2); err != nil {
		if errors.Is(err, ErrPermanent) {
			t.Fatalf("send on a killed session: %v, want a retryable error", err)
		}
		if err := send(t, s, "edge3-1-10", b2); err != nil {
			t.Fatalf("send after reconnect: %v", err)
		}
	}
	checkRows(t, pgRows(t, c, table), wantRows("edge3", b1, b2))

	// A table dropped under the sink is created again.
	if _, err := c.Exec(context.Background(), "DROP TABLE "+table); err != nil {
		t.Fatal(err)
	}
	if err := send(t, s, "edge3-1-20", b1); err == nil || errors.Is(err, ErrPermanent) {
		t.Fatalf("send to a dropped table: %v, want a retryable error", err)
	}
	if err := send(t, s, "edge3-1-20", b1); err != nil {
		t.Fatalf("send after the table was dropped: %v", err)
	}
	checkRows(t, pgRows(t, c, table), wantRows("edge3", b1))
}

// TestPostgresSinkForwarder forwards from a store, as pith serve does:
// points, then a delete, each applied in order, every batch sent twice
// (a replay after a crash) without adding a row.
func TestPostgresSinkForwarder(t *testing.T) {
	url := pgURL(t)
	c := pgConnect(t, url)
	table := pgTable(t, c)
	s := newPostgresSink(t, url, table, "edge4")
	h := openForwarder(t, t.TempDir(), testOptions("edge4"), twiceSink{s})
	var all []model.Point
	for i := range 5 {
		pts := []model.Point{{Tag: "x.y", T: int64(i) * 1000, V: float64(i)}, {Tag: "x.z", T: int64(i) * 1000, V: -float64(i)}}
		all = append(all, pts...)
		if err := h.db.Write(context.Background(), pts); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.db.Delete(context.Background(), "x.z", 1000, 3000); err != nil {
		t.Fatal(err)
	}
	all = slices.DeleteFunc(all, func(p model.Point) bool { return p.Tag == "x.z" && p.T >= 1000 && p.T < 3000 })
	h.drained()
	h.close()
	checkRows(t, pgRows(t, c, table), wantRows("edge4", all))
	if s.Upserts() == 0 {
		t.Error("no batch took the upsert path, yet each was sent twice")
	}
}

// BenchmarkPostgresSink measures rows written per second by Send with
// batches of 10,000 points (100 tags, new times each batch; "replay"
// resends one batch, the upsert path), against the anchors of a raw
// binary COPY of the same rows into a table without index and into one
// with the same primary key. Run it with
//
//	PITH_TEST_PG=postgres://postgres@127.0.0.1:5432/test go test -run '^$' -bench PostgresSink -benchtime 100x ./internal/forward/
func BenchmarkPostgresSink(b *testing.B) {
	url := pgURL(b)
	pts := benchPoints()
	batch := func(n int) []model.Point {
		out := slices.Clone(pts)
		for i := range out {
			out[i].T += int64(n) * 100_000
		}
		return out
	}
	b.Run("sink", func(b *testing.B) {
		c := pgConnect(b, url)
		table := pgTable(b, c)
		s := newPostgresSink(b, url, table, "bench")
		batches := make([]Batch, b.N)
		for n := range batches {
			batches[n] = pointsBatch(fmt.Sprint(n), batch(n))
		}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for n := range b.N {
			if err := s.Send(ctx, batches[n]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*len(pts))/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("replay", func(b *testing.B) {
		c := pgConnect(b, url)
		table := pgTable(b, c)
		s := newPostgresSink(b, url, table, "bench")
		replay := pointsBatch("0", batch(0))
		ctx := context.Background()
		if err := s.Send(ctx, replay); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := s.Send(ctx, replay); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*len(pts))/b.Elapsed().Seconds(), "rows/s")
	})
	// The anchors: a plain binary COPY of the same sorted rows, in a
	// transaction, into a table without index and into one with the
	// sink's primary key; the sink cannot beat the second.
	for _, anchor := range []struct{ name, ddl string }{
		{"copy_noindex", ""},
		{"copy_pk", ", PRIMARY KEY (tag, ts)"},
	} {
		b.Run(anchor.name, func(b *testing.B) {
			c := pgConnect(b, url)
			table := pgTable(b, c)
			ctx := context.Background()
			if _, err := c.Exec(ctx, "CREATE TABLE "+table+
				` (tag text COLLATE "C" NOT NULL, ts timestamptz NOT NULL, value double precision, quality smallint NOT NULL`+anchor.ddl+")"); err != nil {
				b.Fatal(err)
			}
			batches := make([][]model.Point, b.N)
			for n := range batches {
				batches[n] = lastWins(nil, batch(n))
			}
			var rows pgStageRows
			var body []byte
			b.ReportAllocs()
			b.ResetTimer()
			for n := range b.N {
				err := pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
					rows.reset("bench", batches[n])
					body = rows.appendCopy(body[:0])
					_, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(body),
						"COPY "+pgx.Identifier{table}.Sanitize()+" (tag, ts, value, quality) FROM STDIN (FORMAT binary)")
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*len(pts))/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
