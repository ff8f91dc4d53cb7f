package forward

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pith-historian/pith/internal/model"

	"github.com/jackc/pgx/v5/pgconn"
)

// Defaults and limits of the PostgreSQL sink. See docs/format/forward.md.
const (
	DefaultPostgresTable      = "pith_samples"       // table created on first use
	pgStageTable              = "pith_forward_stage" // per-connection temporary staging table
	pgConnectTimeout          = 5 * time.Second      // TCP, TLS and startup of one connection
	pgSQLStateDataClass       = "22"                 // data exception: the batch holds a value the server refuses
	pgSQLStateConstraints     = "23"                 // integrity constraint violation: a constraint added by the operator
	pgSQLStateUniqueViolation = "23505"              // a row of the batch is in the table already
	pgSQLStateUndefinedTable  = "42P01"              // the table was dropped after the sink created it

	// The range of timestamptz in Unix ms: 4714-11-24 BC to the end of
	// 294276 AD. Past it the microsecond count overflows.
	pgMinMillis = -210_866_803_200_000
	pgMaxMillis = 9_224_318_015_999_999
)

// PostgresOptions configure a PostgresSink.
type PostgresOptions struct {
	URL   string // postgres://user:pass@host:5432/db?sslmode=disable, or a key=value DSN
	Table string // [schema.]table; DefaultPostgresTable when empty
	Site  string // tags are stored as "<Site>.<tag>"; as they are when empty
	// Partition creates the table partitioned by time, PartitionDay,
	// PartitionWeek or PartitionMonth (see postgres_partition.go); ""
	// creates a plain table.
	Partition string
}

// PostgresSink writes batches to one PostgreSQL table with columns
// (tag text, ts timestamptz, value double precision, quality smallint)
// and primary key (tag, ts); a TimescaleDB hypertable when that extension
// can be had. Each batch is written in one transaction, whose commit is
// the confirmation: copied (COPY, binary) straight into the table, or,
// when some of its rows are there already, copied into a temporary
// staging table and upserted from there (INSERT ... ON CONFLICT DO
// UPDATE). A resent batch thus overwrites its own rows instead of adding
// any, and a later point of the same tag and time wins, as in the store.
// A forwarded delete is a DELETE of the tag's rows in its range, in the
// same transaction and in commit order.
//
// Tags are named "<Site>.<tag>", like the tags a central Pith stores from
// the NATS subject pith.<site>.samples. Qualities are 0 good, 1 bad,
// 2 uncertain.
//
// The sink holds one connection, dialled on first use and again after it
// broke, so an unreachable server is an ordinary, retried send error. A
// batch the server refuses for its data (SQLSTATE classes 22 and 23) is
// refused permanently. Send and Close may be called from any goroutine;
// sends are serialised.
type PostgresSink struct {
	opts   PostgresOptions
	log    *slog.Logger
	cfg    *pgconn.Config
	ident  pgIdent
	table  string // quoted, schema-qualified when given
	upsert string // the staging-to-table statement
	delete string // the statement applying a forwarded delete
	// labels is the quoted name of the labels table (the table's name
	// with "_labels" appended, same schema), created on the first labels
	// entry; labelsReady says it exists.
	labels      string
	labelsReady bool
	text        string // quoted name of the text table: <table>_text
	textUp      string // the text upsert
	textDel     string // a forwarded delete applied to the text table

	mu     sync.Mutex
	conn   *pgconn.PgConn
	ready  bool          // the table is known to exist
	pts    []model.Point // decoded batch
	sorted []model.Point // pts by tag and time, last wins
	stage  pgStageRows
	copy   []byte // the COPY body being built
	closed bool
	// textReady: the text table is known to exist (looked up at the first
	// connection, created by the first text value).
	textReady bool
	textSeen  bool // the text table was looked up
	textMade  bool // the current transaction wrote (and may have created) it

	upserts atomic.Uint64
	parts   pgParts // partitions of a table partitioned by time
	// noPartman makes native partitions even where pg_partman is
	// installed (tests).
	noPartman bool
}

var _ Sink = (*PostgresSink)(nil)

// NewPostgresSink returns a sink; it does not connect yet.
func NewPostgresSink(opts PostgresOptions, log *slog.Logger) (*PostgresSink, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.URL == "" {
		return nil, errors.New("create postgres sink: url is empty")
	}
	if opts.Table == "" {
		opts.Table = DefaultPostgresTable
	}
	ident, err := parseTableName(opts.Table)
	if err != nil {
		return nil, fmt.Errorf("create postgres sink: %w", err)
	}
	cfg, err := pgconn.ParseConfig(opts.URL)
	if err != nil {
		// pgconn's message may quote the URL, password included.
		return nil, errors.New("create postgres sink: cannot parse url")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = pgConnectTimeout
	}
	table := ident.Sanitize()
	lident := append(pgIdent(nil), ident...)
	lident[len(lident)-1] += "_labels"
	textIdent := append(pgIdent(nil), ident...)
	textIdent[len(textIdent)-1] += "_text"
	text := textIdent.Sanitize()
	s := &PostgresSink{
		labels: lident.Sanitize(),
		text:   text,
		textUp: "INSERT INTO " + text + " AS dst (tag, ts, value, quality)" +
			" SELECT u.tag, timestamptz 'epoch' + u.ms * interval '1 millisecond', u.value, u.quality" +
			" FROM unnest($1::text[], $2::bigint[], $3::text[], $4::smallint[]) AS u(tag, ms, value, quality)" +
			" ON CONFLICT (tag, ts) DO UPDATE SET value = EXCLUDED.value, quality = EXCLUDED.quality" +
			" WHERE (dst.value, dst.quality) IS DISTINCT FROM (EXCLUDED.value, EXCLUDED.quality)",
		textDel: "DELETE FROM " + text + " WHERE tag = $1 AND ts >= $2 AND ts < $3",
		opts:    opts,
		log:     log,
		cfg:     cfg,
		ident:   ident,
		table:   table,
		// The WHERE clause skips rows a replay would rewrite with the same
		// values, so a resent batch leaves no dead row versions behind.
		upsert: "INSERT INTO " + table + " AS dst (tag, ts, value, quality)" +
			" SELECT tag, ts, value, quality FROM " + pgStageTable +
			" ON CONFLICT (tag, ts) DO UPDATE SET value = EXCLUDED.value, quality = EXCLUDED.quality" +
			" WHERE (dst.value, dst.quality) IS DISTINCT FROM (EXCLUDED.value, EXCLUDED.quality)",
		delete: "DELETE FROM " + table + " WHERE tag = $1 AND ts >= $2 AND ts < $3",
	}
	return s, nil
}

// parseTableName splits "schema.table" or "table" into an identifier.
func parseTableName(name string) (pgIdent, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("parse table name %q: want table or schema.table", name)
	}
	for _, p := range parts {
		if p == "" || strings.ContainsRune(p, 0) {
			return nil, fmt.Errorf("parse table name %q: empty or invalid part", name)
		}
	}
	return pgIdent(parts), nil
}

// Table returns the quoted name of the table the sink writes.
func (s *PostgresSink) Table() string { return s.table }

// Send writes the entries of b in one transaction and returns nil once
// it committed: points upserted on (tag, ts), deletes applied as DELETE
// over their range, in commit order. A resent batch rewrites its own rows
// instead of adding any.
func (s *PostgresSink) Send(ctx context.Context, b Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("send to postgres: sink closed")
	}
	for i := range b.Entries {
		for _, p := range b.Entries[i].Points {
			if p.T < pgMinMillis || p.T > pgMaxMillis {
				return fmt.Errorf("check batch %s: %w: tag %s: time %d ms outside the range of timestamptz", b.ID, ErrPermanent, p.Tag, p.T)
			}
		}
		for _, p := range b.Entries[i].Texts {
			if p.T < pgMinMillis || p.T > pgMaxMillis {
				return fmt.Errorf("check batch %s: %w: tag %s: time %d ms outside the range of timestamptz", b.ID, ErrPermanent, p.Tag, p.T)
			}
		}
	}
	if err := s.connect(ctx); err != nil {
		return err
	}
	if err := s.write(ctx, b.Entries); err != nil {
		return s.failed(fmt.Errorf("write batch %s: %w", b.ID, err))
	}
	return nil
}

// Connect dials the database and makes sure the target table exists now
// rather than at the first Send, so that a config reload can refuse an
// upstream it cannot reach before anything of the new config runs. The
// connection is kept for the sends.
func (s *PostgresSink) Connect(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("connect to postgres: sink closed")
	}
	return s.connect(ctx)
}

// write stores entries in one transaction: each run of point entries
// between deletes as one upsert (writePoints), each delete as a DELETE.
func (s *PostgresSink) write(ctx context.Context, entries []Entry) (err error) {
	s.textMade = false
	if s.parts.interval != "" {
		if err := s.ensureParts(ctx, entries); err != nil {
			return err
		}
	}
	if err := s.exec(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil && !s.conn.IsClosed() {
			_ = s.exec(context.Background(), "ROLLBACK")
		}
	}()
	for len(entries) > 0 {
		if ls := entries[0].Labels; ls != nil {
			if err := s.writeLabels(ctx, ls); err != nil {
				return err
			}
			entries = entries[1:]
			continue
		}
		if d := entries[0].Delete; d != nil {
			if err := s.execParams(ctx, s.delete, pgText(siteTag(s.opts.Site, d.Tag)), pgTime(d.From), pgTime(d.To)); err != nil {
				return fmt.Errorf("delete %s [%d, %d) from %s: %w", d.Tag, d.From, d.To, s.table, err)
			}
			if s.textReady {
				if err := s.execParams(ctx, s.textDel, pgText(siteTag(s.opts.Site, d.Tag)), pgTime(d.From), pgTime(d.To)); err != nil {
					return fmt.Errorf("delete %s [%d, %d) from %s: %w", d.Tag, d.From, d.To, s.text, err)
				}
			}
			entries = entries[1:]
			continue
		}
		s.pts = s.pts[:0]
		for len(entries) > 0 && entries[0].Delete == nil && entries[0].Labels == nil {
			s.pts = append(s.pts, entries[0].Points...)
			if len(entries[0].Texts) > 0 {
				if err := s.writeTexts(ctx, entries[0].Texts); err != nil {
					return err
				}
			}
			entries = entries[1:]
		}
		if len(s.pts) == 0 {
			continue
		}
		// ON CONFLICT DO UPDATE refuses to touch one row twice in a statement.
		s.sorted = lastWins(s.sorted[:0], s.pts)
		if err := s.writePoints(ctx, s.sorted); err != nil {
			return err
		}
	}
	if err := s.exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if s.textMade {
		s.textReady = true
	}
	return nil
}

// writeLabels upserts each tag's labels into the labels table, a JSON
// object per tag (docs/format/forward.md), creating the table first.
func (s *PostgresSink) writeLabels(ctx context.Context, series []model.Series) error {
	if !s.labelsReady {
		if err := s.exec(ctx, "CREATE TABLE IF NOT EXISTS "+s.labels+` (
	tag text COLLATE "C" PRIMARY KEY,
	labels jsonb NOT NULL)`); err != nil {
			return fmt.Errorf("create table %s: %w", s.labels, err)
		}
	}
	for _, x := range series {
		m := make(map[string]string, len(x.Labels))
		for _, l := range x.Labels {
			m[l.Name] = l.Value
		}
		js, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("encode labels of %s: %w", x.Tag, err)
		}
		if err := s.execParams(ctx, "INSERT INTO "+s.labels+" AS dst (tag, labels) VALUES ($1, $2::jsonb)"+
			" ON CONFLICT (tag) DO UPDATE SET labels = EXCLUDED.labels WHERE dst.labels IS DISTINCT FROM EXCLUDED.labels",
			pgText(siteTag(s.opts.Site, x.Tag)), pgText(string(js))); err != nil {
			return fmt.Errorf("upsert labels of %s into %s: %w", x.Tag, s.labels, err)
		}
	}
	s.labelsReady = true // failed clears it when the transaction does not commit
	return nil
}

// writePoints upserts pts inside the open transaction. The fast path
// copies them straight into the table, which costs about a plain COPY.
// When a row of the batch is there already (a resent batch, a corrected
// value), the server refuses the copy with a unique violation; the points
// are then copied into the staging table and upserted from there (INSERT
// ... ON CONFLICT (tag, ts) DO UPDATE), in the same transaction.
func (s *PostgresSink) writePoints(ctx context.Context, pts []model.Point) error {
	if err := s.exec(ctx, "SAVEPOINT pith_copy"); err != nil {
		return fmt.Errorf("set savepoint: %w", err)
	}
	s.stage.reset(s.opts.Site, pts)
	s.copy = s.stage.appendCopy(s.copy[:0])
	err := s.copyIn(ctx, s.table)
	var pe *pgconn.PgError
	switch {
	case err == nil:
		if err := s.exec(ctx, "RELEASE SAVEPOINT pith_copy"); err != nil {
			return fmt.Errorf("release savepoint: %w", err)
		}
	case errors.As(err, &pe) && pe.Code == pgSQLStateUniqueViolation:
		if err := s.exec(ctx, "ROLLBACK TO SAVEPOINT pith_copy"); err != nil {
			return fmt.Errorf("roll back to savepoint: %w", err)
		}
		s.upserts.Add(1)
		if err := s.copyIn(ctx, pgStageTable); err != nil {
			return fmt.Errorf("copy to staging table: %w", err)
		}
		if err := s.exec(ctx, s.upsert); err != nil {
			return fmt.Errorf("upsert into %s: %w", s.table, err)
		}
		// ON COMMIT DELETE ROWS empties the staging table only at the
		// commit; a later run of the same transaction starts empty too.
		if err := s.exec(ctx, "TRUNCATE "+pgStageTable); err != nil {
			return fmt.Errorf("empty staging table: %w", err)
		}
	default:
		return fmt.Errorf("copy to %s: %w", s.table, err)
	}
	return nil
}

// copyIn sends s.copy (binary COPY data) into table's staging columns.
func (s *PostgresSink) copyIn(ctx context.Context, table string) error {
	_, err := s.conn.CopyFrom(ctx, bytes.NewReader(s.copy),
		"COPY "+table+" (tag, ts, value, quality) FROM STDIN (FORMAT binary)")
	return err
}

// exec runs sql (no parameters, simple protocol) to its end.
func (s *PostgresSink) exec(ctx context.Context, sql string) error {
	_, err := s.conn.Exec(ctx, sql).ReadAll()
	return err
}

// execParams runs sql with parameters to its end.
func (s *PostgresSink) execParams(ctx context.Context, sql string, params ...pgParam) error {
	vals, oids, formats := pgParams(params)
	_, err := s.conn.ExecParams(ctx, sql, vals, oids, formats, nil).Close()
	return err
}

// queryBools runs sql with parameters and returns the booleans of
// its one row.
func (s *PostgresSink) queryBools(ctx context.Context, sql string, params ...pgParam) ([]bool, error) {
	vals, oids, formats := pgParams(params)
	rr := s.conn.ExecParams(ctx, sql, vals, oids, formats, nil)
	var out []bool
	for rr.NextRow() {
		for _, v := range rr.Values() {
			out = append(out, string(v) == "t")
		}
	}
	if _, err := rr.Close(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no row")
	}
	return out, nil
}

// Upserts returns how many batches took the slow path because some of
// their rows were in the table already: resends and corrections.
func (s *PostgresSink) Upserts() uint64 { return s.upserts.Load() }

// failed classifies a send error: a data error of the server refuses the
// batch permanently; an error without a server answer drops the
// connection, which is dialled again on the next send.
func (s *PostgresSink) failed(err error) error {
	// A labels table created in the failed transaction is gone with it.
	s.labelsReady = false
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		if pe.Code == pgSQLStateNoPartition && s.parts.interval != "" && strings.Contains(pe.Message, "no partition") {
			clear(s.parts.have) // a partition dropped meanwhile: create it again
			return err
		}
		if strings.HasPrefix(pe.Code, pgSQLStateDataClass) || strings.HasPrefix(pe.Code, pgSQLStateConstraints) {
			return fmt.Errorf("%w: %w", ErrPermanent, err)
		}
		if pe.Code == pgSQLStateUndefinedTable {
			s.ready = false // dropped meanwhile: create it again on the next send
		}
		return err
	}
	s.dropConn()
	return err
}

// dropConn closes the connection, if any, so the next send dials anew.
func (s *PostgresSink) dropConn() {
	if s.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.conn.Close(ctx)
		cancel()
		s.conn = nil
	}
}

// connect dials when there is no usable connection, creates the staging
// table of the new session, and the target table once.
func (s *PostgresSink) connect(ctx context.Context) error {
	if s.conn != nil && s.conn.IsClosed() {
		s.conn = nil
	}
	if s.conn == nil {
		conn, err := pgconn.ConnectConfig(ctx, s.cfg)
		if err != nil {
			return fmt.Errorf("connect to postgres %s:%d: %w", s.cfg.Host, s.cfg.Port, err)
		}
		s.conn = conn
		// A temporary table is private to the session and not WAL-logged,
		// and ON COMMIT DELETE ROWS empties it at each commit, so every
		// batch starts from an empty staging table.
		if err := s.exec(ctx, "CREATE TEMPORARY TABLE IF NOT EXISTS "+pgStageTable+
			" (tag text COLLATE \"C\", ts timestamptz, value double precision, quality smallint) ON COMMIT DELETE ROWS"); err != nil {
			s.dropConn()
			return fmt.Errorf("create staging table: %w", err)
		}
	}
	if !s.ready {
		if err := s.ensureTable(ctx); err != nil {
			s.dropConn()
			return err
		}
		s.ready = true
	}
	if !s.textSeen {
		// Deletes apply to the text table too, once it exists.
		found, err := s.queryBools(ctx, "SELECT to_regclass($1) IS NOT NULL", pgText(s.text))
		if err != nil {
			s.dropConn()
			return fmt.Errorf("look up table %s: %w", s.text, err)
		}
		s.textReady = found[0]
		s.textSeen = true
	}
	return nil
}

// ensureTable creates the target table when it does not exist, and turns
// a table it created into a hypertable when TimescaleDB can be had.
func (s *PostgresSink) ensureTable(ctx context.Context) error {
	exists, err := s.queryBools(ctx, "SELECT to_regclass($1) IS NOT NULL", pgText(s.table))
	if err != nil {
		return fmt.Errorf("look up table %s: %w", s.table, err)
	}
	if exists[0] {
		unique, err := s.queryBools(ctx, `SELECT EXISTS (SELECT 1 FROM pg_index i
	WHERE i.indrelid = $1::regclass AND i.indisunique AND i.indnatts = 2
	AND (SELECT array_agg(a.attname::text ORDER BY a.attname) FROM pg_attribute a
		WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = ARRAY['tag', 'ts'])`, pgText(s.table))
		if err != nil {
			return fmt.Errorf("look up indexes of %s: %w", s.table, err)
		}
		if unique[0] {
			return s.detectPartitioned(ctx)
		}
		// Without a unique index on (tag, ts) the fast path would add a
		// resent batch's rows twice and the upsert could not run: create
		// one. It fails when the table holds duplicates already.
		idx := pgIdent{s.ident[len(s.ident)-1] + "_tag_ts_key"}.Sanitize()
		if err := s.exec(ctx, "CREATE UNIQUE INDEX IF NOT EXISTS "+idx+" ON "+s.table+" (tag, ts)"); err != nil {
			return fmt.Errorf("create unique index on %s (tag, ts), which idempotent forwarding needs: %w", s.table, err)
		}
		s.log.Info("created unique index on (tag, ts)", "table", s.table, "index", idx)
		return nil
	}
	if s.opts.Partition != "" {
		return s.createPartitioned(ctx)
	}
	// COLLATE "C" compares tag names bytewise: the primary key index then
	// costs a memcmp per comparison instead of a locale-aware one.
	if err := s.exec(ctx, "CREATE TABLE IF NOT EXISTS "+s.table+` (
	tag text COLLATE "C" NOT NULL,
	ts timestamptz NOT NULL,
	value double precision,
	quality smallint NOT NULL DEFAULT 0,
	PRIMARY KEY (tag, ts))`); err != nil {
		return fmt.Errorf("create table %s: %w", s.table, err)
	}
	s.log.Info("created postgres table", "table", s.table)
	s.hypertable(ctx)
	return nil
}

// hypertable makes the new table a TimescaleDB hypertable when the
// extension is installed in the database, or available on the server and
// this user may install it. Without it the table stays a plain one, which
// is logged: both work with the same queries.
func (s *PostgresSink) hypertable(ctx context.Context) {
	got, err := s.queryBools(ctx, `SELECT
	EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'timescaledb'),
	EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'timescaledb')`)
	if err == nil && len(got) != 2 {
		err = fmt.Errorf("%d columns, want 2", len(got))
	}
	if err != nil {
		s.log.Warn("look up timescaledb; keeping a plain table", "table", s.table, "err", err)
		return
	}
	installed, available := got[0], got[1]
	if !installed && !available {
		s.log.Info("timescaledb not available; keeping a plain table", "table", s.table)
		return
	}
	if !installed {
		if err := s.exec(ctx, "CREATE EXTENSION IF NOT EXISTS timescaledb"); err != nil {
			s.log.Warn("install timescaledb; keeping a plain table", "table", s.table, "err", err)
			return
		}
	}
	if err := s.execParams(ctx, "SELECT create_hypertable($1::regclass, 'ts', if_not_exists => TRUE, migrate_data => TRUE)", pgText(s.table)); err != nil {
		s.log.Warn("create hypertable; keeping a plain table", "table", s.table, "err", err)
		return
	}
	s.log.Info("made postgres table a timescaledb hypertable", "table", s.table)
}

// Close closes the connection; later sends fail.
func (s *PostgresSink) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.dropConn()
}

// pgStageRows encodes points as PostgreSQL's binary COPY format for the
// columns (tag text, ts timestamptz, value double precision, quality
// smallint). It names each tag once per batch rather than once per point.
type pgStageRows struct {
	site string
	pts  []model.Point
	tags map[string]string
}

func (r *pgStageRows) reset(site string, pts []model.Point) {
	if r.tags == nil || r.site != site {
		r.tags = make(map[string]string)
	}
	if len(r.tags) > 1<<16 {
		clear(r.tags) // bound memory when tag names keep changing
	}
	r.site, r.pts = site, pts
}

// pgCopySignature starts binary COPY data: the signature, no flags, no
// header extension.
const pgCopySignature = "PGCOPY\n\xff\r\n\x00\x00\x00\x00\x00\x00\x00\x00\x00"

// appendCopy appends the binary COPY data of the points to b.
func (r *pgStageRows) appendCopy(b []byte) []byte {
	b = append(b, pgCopySignature...)
	for i := range r.pts {
		p := &r.pts[i]
		tag, ok := r.tags[p.Tag]
		if !ok {
			tag = siteTag(r.site, p.Tag)
			r.tags[p.Tag] = tag
		}
		b = binary.BigEndian.AppendUint16(b, 4) // fields
		b = binary.BigEndian.AppendUint32(b, uint32(len(tag)))
		b = append(b, tag...)
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, uint64(pgMicros(p.T)))
		b = binary.BigEndian.AppendUint32(b, 8)
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(p.V))
		b = binary.BigEndian.AppendUint32(b, 2)
		b = binary.BigEndian.AppendUint16(b, uint16(int16(p.Q)))
	}
	return binary.BigEndian.AppendUint16(b, 0xffff) // trailer: -1
}

// pgEpochMillis is 2000-01-01 UTC, PostgreSQL's epoch, in Unix ms.
const pgEpochMillis = 946_684_800_000

// pgTimestamp is Unix ms as a binary timestamptz (microseconds since
// 2000-01-01); beyond what a microsecond count holds, -infinity or
// infinity, which is what such a bound of a delete range means.
func pgTimestamp(ms int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(pgMicros(ms)))
}

// pgMicros is pgTimestamp's microsecond count.
func pgMicros(ms int64) int64 {
	switch d := ms - pgEpochMillis; {
	case ms < math.MinInt64+pgEpochMillis || d < math.MinInt64/1000:
		return math.MinInt64 // -infinity
	case d > math.MaxInt64/1000:
		return math.MaxInt64 // infinity
	default:
		return d * 1000
	}
}

// pgParam is one statement parameter: text, or a binary timestamptz.
type pgParam struct {
	b  []byte
	ts bool
}

func pgText(s string) pgParam { return pgParam{b: []byte(s)} }
func pgTime(ms int64) pgParam { return pgParam{b: pgTimestamp(ms), ts: true} }

// pgParams splits params into the values, types and formats ExecParams takes.
func pgParams(params []pgParam) ([][]byte, []uint32, []int16) {
	vals := make([][]byte, len(params))
	oids := make([]uint32, len(params))
	formats := make([]int16, len(params))
	for i, p := range params {
		vals[i] = p.b
		if p.ts {
			oids[i], formats[i] = pgOIDTimestamptz, 1
		} else {
			oids[i] = pgOIDText
		}
	}
	return vals, oids, formats
}

// PostgreSQL type OIDs of the parameters the sink sends.
const (
	pgOIDText        = 25
	pgOIDTimestamptz = 1184
)

// pgIdent is a possibly schema-qualified SQL identifier.
type pgIdent []string

// Sanitize quotes each part, doubling quotes and dropping NUL bytes.
func (id pgIdent) Sanitize() string {
	parts := make([]string, len(id))
	for i, p := range id {
		p = strings.ReplaceAll(p, "\x00", "")
		parts[i] = `"` + strings.ReplaceAll(p, `"`, `""`) + `"`
	}
	return strings.Join(parts, ".")
}

// TextTable returns the quoted name of the table text values go to.
func (s *PostgresSink) TextTable() string { return s.text }

// writeTexts upserts text values into the text table (<table>_text,
// created by the first one) inside tx; of several values of one tag and
// time the last wins.
func (s *PostgresSink) writeTexts(ctx context.Context, texts []model.TextPoint) error {
	if !s.textReady {
		// COLLATE "C" as for the numbers' table; value is the UTF-8 text.
		if err := s.exec(ctx, "CREATE TABLE IF NOT EXISTS "+s.text+` (
	tag text COLLATE "C" NOT NULL,
	ts timestamptz NOT NULL,
	value text NOT NULL,
	quality smallint NOT NULL DEFAULT 0,
	PRIMARY KEY (tag, ts))`); err != nil {
			return fmt.Errorf("create table %s: %w", s.text, err)
		}
	}
	type key struct {
		tag string
		t   int64
	}
	at := make(map[key]int, len(texts))
	var tags, vals []string
	var ms, qs []int64
	for _, p := range texts {
		k := key{p.Tag, p.T}
		if i, ok := at[k]; ok {
			vals[i], qs[i] = p.Text, int64(p.Q)
			continue
		}
		at[k] = len(tags)
		tags = append(tags, siteTag(s.opts.Site, p.Tag))
		ms = append(ms, p.T)
		vals = append(vals, p.Text)
		qs = append(qs, int64(p.Q))
	}
	if err := s.execParams(ctx, s.textUp, pgText(pgTextArray(tags)), pgText(pgIntArray(ms)),
		pgText(pgTextArray(vals)), pgText(pgIntArray(qs))); err != nil {
		return fmt.Errorf("upsert into %s: %w", s.text, err)
	}
	s.textMade = true // known to exist once the transaction commits
	return nil
}

// pgTextArray writes vals as a PostgreSQL array literal of quoted
// elements ('{"a","b\"c"}'), for a text parameter cast to text[].
func pgTextArray(vals []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, v := range vals {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		for j := 0; j < len(v); j++ {
			if v[j] == '"' || v[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(v[j])
		}
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// pgIntArray writes vals as a PostgreSQL array literal ('{1,2}').
func pgIntArray(vals []int64) string {
	b := []byte{'{'}
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, v, 10)
	}
	return string(append(b, '}'))
}
