package forward

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Time partitions of the PostgreSQL sink's table (PostgresOptions.Partition).
const (
	PartitionDay   = "day"
	PartitionWeek  = "week"
	PartitionMonth = "month"

	// pgSQLStateNoPartition is check_violation, what an insert gets when
	// no partition holds its row (one dropped after the sink saw it).
	pgSQLStateNoPartition = "23514"
	// pgPartmanPremake is how many intervals ahead pg_partman keeps.
	pgPartmanPremake = 4
)

// pgParts is the partition state of a sink whose table is partitioned by
// time. The sink creates the partition of every interval a batch touches
// before writing it, in its own transactions (creating a partition locks
// the parent, which must not wait inside a data transaction), so a late or
// very old value never lands in a default partition, where it would later
// stop pg_partman from creating that interval's partition.
type pgParts struct {
	interval string         // PartitionDay, PartitionWeek or PartitionMonth; "" for a plain table
	partman  string         // quoted schema of pg_partman when it manages the table, "" when native
	parent   string         // schema.table as pg_partman names it
	have     map[int64]bool // starts (Unix ms) of the intervals known to have a partition
	starts   map[int64]bool // scratch: the intervals of one batch
}

// partitionStart returns the start of the interval holding ms, in UTC:
// the day, the ISO week (from Monday) or the month.
func partitionStart(ms int64, interval string) time.Time {
	t := time.UnixMilli(ms).UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch interval {
	case PartitionWeek:
		return day.AddDate(0, 0, -(int(day.Weekday())+6)%7)
	case PartitionMonth:
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	default:
		return day
	}
}

// partitionEnd returns the end of the interval starting at start.
func partitionEnd(start time.Time, interval string) time.Time {
	switch interval {
	case PartitionWeek:
		return start.AddDate(0, 0, 7)
	case PartitionMonth:
		return start.AddDate(0, 1, 0)
	default:
		return start.AddDate(0, 0, 1)
	}
}

// partitionSuffix names the partition of the interval starting at start
// as pg_partman 4 does: _pYYYY_MM_DD, _pIYYYwIW or _pYYYY_MM.
func partitionSuffix(start time.Time, interval string) string {
	switch interval {
	case PartitionWeek:
		y, w := start.ISOWeek()
		return fmt.Sprintf("_p%04dw%02d", y, w)
	case PartitionMonth:
		return start.Format("_p2006_01")
	default:
		return start.Format("_p2006_01_02")
	}
}

// partmanInterval is pg_partman's name of an interval.
var partmanInterval = map[string]string{PartitionDay: "daily", PartitionWeek: "weekly", PartitionMonth: "monthly"}

// createPartitioned creates the table partitioned by range of ts, handed
// to pg_partman when it is installed or can be (then its maintenance
// keeps partitions ahead and applies the retention an operator sets in
// its part_config), native otherwise: the sink creates each partition.
func (s *PostgresSink) createPartitioned(ctx context.Context) error {
	if err := s.exec(ctx, "CREATE TABLE IF NOT EXISTS "+s.table+` (
	tag text COLLATE "C" NOT NULL,
	ts timestamptz NOT NULL,
	value double precision,
	quality smallint NOT NULL DEFAULT 0,
	PRIMARY KEY (tag, ts)) PARTITION BY RANGE (ts)`); err != nil {
		return fmt.Errorf("create partitioned table %s: %w", s.table, err)
	}
	s.parts = pgParts{interval: s.opts.Partition}
	schema, err := s.partmanSchema(ctx, true)
	if s.noPartman {
		schema = ""
	}
	if err != nil || schema == "" {
		s.log.Info("created postgres table with native partitions (pg_partman not available)", "table", s.table, "partition", s.opts.Partition, "err", err)
		return nil
	}
	parent, err := s.parentName(ctx)
	if err != nil {
		return err
	}
	// pg_partman computes its intervals in the session's time zone.
	if err := s.exec(ctx, "SET TIME ZONE 'UTC'"); err != nil {
		return fmt.Errorf("set time zone: %w", err)
	}
	if err := s.execParams(ctx, "SELECT "+schema+".create_parent($1, 'ts', 'native', $2, p_premake => "+fmt.Sprint(pgPartmanPremake)+")",
		pgText(parent), pgText(partmanInterval[s.opts.Partition])); err != nil {
		return fmt.Errorf("hand table %s to pg_partman: %w", s.table, err)
	}
	s.parts.partman, s.parts.parent = schema, parent
	s.log.Info("created postgres table partitioned by pg_partman", "table", s.table, "partition", s.opts.Partition)
	return nil
}

// partmanSchema returns the quoted schema of pg_partman in the database,
// installing it in schema partman when install is set and it is
// available; "" without it.
func (s *PostgresSink) partmanSchema(ctx context.Context, install bool) (string, error) {
	r := s.conn.ExecParams(ctx, `SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_partman'`, nil, nil, nil, nil).Read()
	if r.Err != nil {
		return "", r.Err
	}
	if len(r.Rows) == 1 {
		return pgIdent{string(r.Rows[0][0])}.Sanitize(), nil
	}
	if !install {
		return "", nil
	}
	avail, err := s.queryBools(ctx, "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_partman')")
	if err != nil || !avail[0] {
		return "", err
	}
	if err := s.exec(ctx, "CREATE SCHEMA IF NOT EXISTS partman"); err != nil {
		return "", fmt.Errorf("create schema partman: %w", err)
	}
	if err := s.exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_partman SCHEMA partman"); err != nil {
		return "", fmt.Errorf("install pg_partman: %w", err)
	}
	return s.partmanSchema(ctx, false)
}

// parentName returns the table as schema.table, unquoted, as pg_partman's
// part_config names it.
func (s *PostgresSink) parentName(ctx context.Context) (string, error) {
	r := s.conn.ExecParams(ctx, "SELECT n.nspname || '.' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = $1::regclass",
		[][]byte{[]byte(s.table)}, nil, nil, nil).Read()
	if r.Err != nil {
		return "", fmt.Errorf("look up table %s: %w", s.table, r.Err)
	}
	if len(r.Rows) != 1 {
		return "", fmt.Errorf("look up table %s: not found", s.table)
	}
	return string(r.Rows[0][0]), nil
}

// detectPartitioned sets s.parts for an existing table: partitioned by
// time and managed by pg_partman (its interval from part_config), or
// natively partitioned with the interval of the options. A partitioned
// table whose interval the sink cannot know is refused: rows outside its
// partitions would be refused for good.
func (s *PostgresSink) detectPartitioned(ctx context.Context) error {
	s.parts = pgParts{}
	part, err := s.queryBools(ctx, "SELECT relkind = 'p' FROM pg_class WHERE oid = $1::regclass", pgText(s.table))
	if err != nil {
		return fmt.Errorf("look up table %s: %w", s.table, err)
	}
	if !part[0] {
		if s.opts.Partition != "" {
			s.log.Warn("table exists and is not partitioned; writing it as it is", "table", s.table, "partition", s.opts.Partition)
		}
		return nil
	}
	interval := s.opts.Partition
	schema, err := s.partmanSchema(ctx, false)
	if err != nil {
		return fmt.Errorf("look up pg_partman: %w", err)
	}
	parent := ""
	if schema != "" {
		if parent, err = s.parentName(ctx); err != nil {
			return err
		}
		r := s.conn.ExecParams(ctx, "SELECT partition_interval FROM "+schema+".part_config WHERE parent_table = $1", [][]byte{[]byte(parent)}, nil, nil, nil).Read()
		if r.Err != nil {
			return fmt.Errorf("look up %s in pg_partman: %w", s.table, r.Err)
		}
		if len(r.Rows) == 1 {
			switch string(r.Rows[0][0]) {
			case "1 day":
				interval = PartitionDay
			case "7 days":
				interval = PartitionWeek
			case "1 mon":
				interval = PartitionMonth
			default:
				return fmt.Errorf("table %s: pg_partman interval %q: want 1 day, 7 days or 1 mon", s.table, r.Rows[0][0])
			}
		} else {
			schema = ""
		}
	}
	if interval == "" {
		return fmt.Errorf("table %s is partitioned: set partition (day, week or month) so that the forwarder can create its partitions", s.table)
	}
	s.parts = pgParts{interval: interval, partman: schema, parent: parent}
	return nil
}

// ensureParts creates the partitions the points of entries need, each in
// its own transaction, before the data transaction begins.
func (s *PostgresSink) ensureParts(ctx context.Context, entries []Entry) error {
	p := &s.parts
	if p.have == nil {
		p.have, p.starts = map[int64]bool{}, map[int64]bool{}
	}
	clear(p.starts)
	var last int64 = -1 << 63
	for i := range entries {
		for _, pt := range entries[i].Points {
			if pt.T == last {
				continue
			}
			last = pt.T
			start := partitionStart(pt.T, p.interval).UnixMilli()
			if !p.have[start] {
				p.starts[start] = true
			}
		}
	}
	for start := range p.starts {
		if err := s.createPart(ctx, time.UnixMilli(start).UTC()); err != nil {
			return err
		}
		p.have[start] = true
	}
	return nil
}

// createPart creates the partition of the interval starting at start,
// through pg_partman when it manages the table.
func (s *PostgresSink) createPart(ctx context.Context, start time.Time) error {
	p := &s.parts
	if p.partman != "" {
		// pg_partman names a partition by its start in the session's zone.
		if err := s.exec(ctx, "SET TIME ZONE 'UTC'"); err != nil {
			return fmt.Errorf("set time zone: %w", err)
		}
		err := s.execParams(ctx, "SELECT "+p.partman+".create_partition_time($1, ARRAY[$2::timestamptz])", pgText(p.parent), pgTime(start.UnixMilli()))
		var pe *pgconn.PgError
		if errors.As(err, &pe) && strings.Contains(pe.Message, "default partition") && strings.Contains(pe.Message, "would be violated") {
			// The default partition holds rows of this interval already
			// (its partition was dropped, or rows came before this sink
			// made partitions): the new rows join them there, and
			// partman.partition_data_proc moves them all when wanted.
			s.log.Warn("rows of this interval are in the default partition; writing there", "table", s.table, "from", start)
			return nil
		}
		if err != nil {
			return fmt.Errorf("create partition of %s from %s with pg_partman: %w", s.table, start.Format(time.DateOnly), err)
		}
		return nil
	}
	child := append(pgIdent(nil), s.ident...)
	child[len(child)-1] += partitionSuffix(start, p.interval)
	end := partitionEnd(start, p.interval)
	err := s.exec(ctx, "CREATE TABLE IF NOT EXISTS "+child.Sanitize()+" PARTITION OF "+s.table+
		" FOR VALUES FROM ('"+start.Format(time.RFC3339)+"') TO ('"+end.Format(time.RFC3339)+"')")
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42P07" || strings.Contains(pe.Message, "would overlap")) {
		// Another forwarder created it meanwhile, or an operator made a
		// partition covering this interval: both serve.
		return nil
	}
	if err != nil {
		return fmt.Errorf("create partition %s: %w", child.Sanitize(), err)
	}
	return nil
}
