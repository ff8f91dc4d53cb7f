package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Forward lists the upstreams values are forwarded to. Each forwarder is a
// follower of the store's write-ahead log ("forward.<name>"): it sends what
// the store committed (acquired, pushed and imported values, deletes) and
// moves its durable cursor once the upstream confirmed it. Forwarder names
// are unique across all kinds.
type Forward struct {
	NATS     []ForwardNATS     `toml:"nats"`
	Postgres []ForwardPostgres `toml:"postgres"`
	MQTT     []ForwardMQTT     `toml:"mqtt"`
	HTTP     []ForwardHTTP     `toml:"http"`
}

// ForwardQueue holds the backlog keys every forwarder kind has; each kind
// embeds it, so its keys sit in the forwarder's own table. The backlog is
// the store's write-ahead log, held for the forwarder within
// store.forward_max_bytes; these keys release it earlier while the
// upstream fails. Zero values release nothing.
type ForwardQueue struct {
	// MaxBytes releases unsent values, oldest first, while the upstream
	// fails and the forwarder's unsent log exceeds it; 0 leaves only
	// store.forward_max_bytes.
	MaxBytes int64 `toml:"max_bytes"`
	// MaxAge releases unsent values older than this (by their time
	// stamps) while the upstream fails; 0 never.
	MaxAge Duration `toml:"max_age"`
	// Overflow is what happens past a limit: "drop_oldest", the only
	// policy a log allows (what the store committed cannot be refused).
	Overflow string `toml:"overflow"`
}

// Overflow policies of the forwarders' overflow key. OverflowRejectNew
// is refused: a forwarder reads the store's log, which cannot refuse a
// value the store committed.
const (
	OverflowDropOldest = "drop_oldest"
	OverflowRejectNew  = "reject_new"
)

// ForwardNATS forwards to NATS JetStream, subject pith.<site>.samples,
// deduplicated upstream by batch id.
type ForwardNATS struct {
	Name string `toml:"name"` // names the queue directory, the logs and the system tags
	URL  string `toml:"url"`  // nats://host:port, several separated by commas
	ForwardQueue
}

// ForwardPostgres forwards into a PostgreSQL table.
type ForwardPostgres struct {
	Name  string `toml:"name"`
	URL   string `toml:"url"`   // postgres://user@host:port/db
	Table string `toml:"table"` // table or schema.table, created when missing
	// Partition creates the table partitioned by time: "day", "week" or
	// "month" partitions (pg_partman manages them when installed); ""
	// creates a plain table.
	Partition string `toml:"partition"`
	ForwardQueue
}

// ForwardMQTT publishes to an MQTT broker under a topic prefix.
type ForwardMQTT struct {
	Name     string `toml:"name"`
	URL      string `toml:"url"`    // tcp://, mqtt://, tls://, ssl://, mqtts://, ws:// or wss://host:port
	Prefix   string `toml:"prefix"` // topic prefix, e.g. pith/site1
	ClientID string `toml:"client_id"`
	Username string `toml:"username"`
	Password string `toml:"password"`
	ForwardQueue
}

// ForwardHTTP forwards to another Pith's import API.
type ForwardHTTP struct {
	Name string `toml:"name"`
	URL  string `toml:"url"` // http(s)://host:port of the other Pith
	Key  string `toml:"key"` // its API key with write scope; "" when it needs none
	ForwardQueue
}

// Central makes this Pith a central one: it consumes the batches edge
// Piths publish to NATS JetStream and archives each site's tags under
// "<site>.". It is on when NATS is set.
type Central struct {
	// NATS is the server to consume from: nats://host:port, several
	// separated by commas; "" turns central mode off.
	NATS string `toml:"nats"`
	// Subjects are the subjects consumed, each pith.<site>.samples with
	// "*" for every site.
	Subjects []string `toml:"subjects"`
	// Durable names the JetStream consumer. Central Piths sharing it
	// share the work; a batch is acknowledged once durable in the store.
	Durable string `toml:"durable"`
	// Workers is the number of batches consumed and stored at once.
	Workers int `toml:"workers"`
	// Partitions splits the sites across that many central Piths by
	// subject: the NATS servers map pith.<site>.samples to
	// pith.<site>.samples.<n> with partition(Partitions, 1), and this Pith
	// consumes pith.*.samples.<Partition> with durable
	// "<Durable>-p<Partition>". 0 leaves the sites unsplit.
	Partitions int `toml:"partitions"`
	// Partition is this Pith's share, 0 to Partitions-1.
	Partition int `toml:"partition"`
	// Directory is the JetStream key-value bucket where this Pith
	// publishes which sites it holds; "" publishes nothing.
	Directory string `toml:"directory"`
	// URL is the address users reach this Pith at (http(s)://host:port),
	// published with its sites so that another central can send a user here.
	URL string `toml:"url"`
}

// EffectiveSubjects returns the subjects this Pith consumes: Subjects, or
// its partition's subject when the sites are split.
func (c Central) EffectiveSubjects() []string {
	if c.Partitions > 0 {
		return []string{"pith.*.samples." + strconv.Itoa(c.Partition)}
	}
	return c.Subjects
}

// EffectiveDurable returns the consumer name: Durable, suffixed with the
// partition when the sites are split (one consumer per filter subject).
func (c Central) EffectiveDurable() string {
	if c.Partitions > 0 {
		return c.Durable + "-p" + strconv.Itoa(c.Partition)
	}
	return c.Durable
}

// Defaults of Central.
const (
	DefaultCentralSubjects = "pith.*.samples"
	DefaultCentralDurable  = "central"
	DefaultCentralWorkers  = 2
	// DefaultCentralDirectory is the key-value bucket of site -> central.
	DefaultCentralDirectory = "pith_sites"
	// MaxCentralPartitions bounds central.partitions.
	MaxCentralPartitions = 1024
)

// DefaultCentral returns central mode off with the default subjects,
// consumer name and workers.
func DefaultCentral() Central {
	return Central{
		Subjects: []string{DefaultCentralSubjects},
		Durable:  DefaultCentralDurable,
		Workers:  DefaultCentralWorkers,

		Directory: DefaultCentralDirectory,
	}
}

// Forwarders returns every forwarder's kind and name in start order:
// NATS, PostgreSQL, MQTT, HTTP, each in file order.
func (f *Forward) Forwarders() (kinds, names []string) {
	for _, x := range f.NATS {
		kinds, names = append(kinds, "nats"), append(names, x.Name)
	}
	for _, x := range f.Postgres {
		kinds, names = append(kinds, "postgres"), append(names, x.Name)
	}
	for _, x := range f.MQTT {
		kinds, names = append(kinds, "mqtt"), append(names, x.Name)
	}
	for _, x := range f.HTTP {
		kinds, names = append(kinds, "http"), append(names, x.Name)
	}
	return kinds, names
}

func (f *Forward) validate(add func(key, format string, args ...any)) {
	names := map[string]string{} // forwarder name -> its key path
	common := func(at, name string, q ForwardQueue) {
		if err := checkSegment(name); err != nil {
			add(at+".name", "%v", err)
		} else if first, dup := names[name]; dup {
			add(at+".name", "forwarder %q already defined at %s", name, first)
		} else {
			names[name] = at
		}
		if q.MaxBytes < 0 {
			add(at+".max_bytes", "must not be negative (0 releases nothing), got %d", q.MaxBytes)
		}
		if q.MaxAge < 0 {
			add(at+".max_age", "must not be negative (0 releases nothing), got %s", q.MaxAge)
		}
		switch q.Overflow {
		case "", OverflowDropOldest:
		case OverflowRejectNew:
			add(at+".overflow", "%q no longer applies: forwarders read the store's log, which cannot refuse a value the store committed; remove the key or use %q", q.Overflow, OverflowDropOldest)
		default:
			add(at+".overflow", "unknown policy %q (want drop_oldest)", q.Overflow)
		}
	}
	for i, x := range f.NATS {
		at := fmt.Sprintf("forward.nats[%d]", i)
		common(at, x.Name, x.ForwardQueue)
		if err := checkNATSURLs(x.URL); err != nil {
			add(at+".url", "%v", err)
		}
	}
	for i, x := range f.Postgres {
		at := fmt.Sprintf("forward.postgres[%d]", i)
		common(at, x.Name, x.ForwardQueue)
		if !hasScheme(x.URL, "postgres://", "postgresql://") && !strings.Contains(x.URL, "=") {
			add(at+".url", "want postgres://user@host:port/db or a key=value DSN, got %q", x.URL)
		}
		if schema, table, ok := strings.Cut(x.Table, "."); !isSQLName(schema) || (ok && !isSQLName(table)) {
			add(at+".table", "want table or schema.table of letters, digits and '_' (not first), got %q", x.Table)
		}
		switch x.Partition {
		case "", "day", "week", "month":
		default:
			add(at+".partition", "want \"day\", \"week\", \"month\" or \"\", got %q", x.Partition)
		}
	}
	for i, x := range f.MQTT {
		at := fmt.Sprintf("forward.mqtt[%d]", i)
		common(at, x.Name, x.ForwardQueue)
		if !hasScheme(x.URL, "tcp://", "mqtt://", "tls://", "ssl://", "mqtts://", "ws://", "wss://") {
			add(at+".url", "want tcp://host:port, mqtt://host:port, tls://host:port or ws(s)://, got %q", x.URL)
		}
		if x.Prefix == "" || strings.ContainsAny(x.Prefix, "+#") {
			add(at+".prefix", "want a topic prefix without wildcards, such as pith/site1, got %q", x.Prefix)
		}
	}
	for i, x := range f.HTTP {
		at := fmt.Sprintf("forward.http[%d]", i)
		common(at, x.Name, x.ForwardQueue)
		if !hasScheme(x.URL, "http://", "https://") {
			add(at+".url", "want http://host:port of the other Pith, got %q", x.URL)
		}
	}
}

func (c *Central) validate(add func(key, format string, args ...any)) {
	if c.NATS == "" {
		return
	}
	if err := checkNATSURLs(c.NATS); err != nil {
		add("central.nats", "%v", err)
	}
	if len(c.Subjects) == 0 {
		add("central.subjects", "no subjects to consume (want pith.*.samples)")
	}
	for i, s := range c.Subjects {
		p := strings.Split(s, ".")
		if len(p) != 3 || p[0] != "pith" || p[2] != "samples" || (p[1] != "*" && checkSegment(p[1]) != nil) {
			add(fmt.Sprintf("central.subjects[%d]", i), "want pith.<site>.samples or pith.*.samples, got %q", s)
		}
	}
	if c.Durable == "" || strings.ContainsAny(c.Durable, ".*> \t") {
		add("central.durable", "want a consumer name without '.', '*', '>' or spaces, got %q", c.Durable)
	}
	if c.Workers < 1 || c.Workers > 64 {
		add("central.workers", "want 1 to 64, got %d", c.Workers)
	}
	if c.Partitions < 0 || c.Partitions > MaxCentralPartitions {
		add("central.partitions", "want 0 to %d, got %d", MaxCentralPartitions, c.Partitions)
	}
	if c.Partition < 0 || (c.Partition > 0 && c.Partition >= c.Partitions) {
		add("central.partition", "want 0 to partitions-1 (%d), got %d", c.Partitions-1, c.Partition)
	}
	if c.Directory != "" && !validBucket(c.Directory) {
		add("central.directory", "want a bucket name of letters, digits, '-' and '_', got %q", c.Directory)
	}
	if c.URL != "" && !hasScheme(c.URL, "http://", "https://") {
		add("central.url", "want http(s)://host:port users reach this Pith at, got %q", c.URL)
	}
}

// validBucket reports whether name is a JetStream key-value bucket name.
func validBucket(name string) bool {
	for _, r := range name {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return name != ""
}

// checkNATSURLs accepts one or more comma-separated nats:// or tls:// URLs.
func checkNATSURLs(s string) error {
	for _, u := range strings.Split(s, ",") {
		if !hasScheme(strings.TrimSpace(u), "nats://", "tls://") {
			return fmt.Errorf("want nats://host:port, got %q", s)
		}
	}
	return nil
}

// hasScheme reports whether u starts with one of schemes and has more.
func hasScheme(u string, schemes ...string) bool {
	for _, s := range schemes {
		if strings.HasPrefix(u, s) && len(u) > len(s) {
			return true
		}
	}
	return false
}

// isSQLName accepts plain SQL identifiers, which need no quoting.
func isSQLName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
