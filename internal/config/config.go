// Package config is Pith's typed configuration: one TOML file decoded
// strictly into Config, with defaults and validation.
//
// Decoding is strict because a misspelt key in a plant configuration is a
// silent failure waiting to happen (a register never polled, a retention never
// applied): every unknown key, wrong value type or malformed duration is an
// error that names the full key path, array indexes included, for example
// "modbus.client[0].tags[3].regster: unknown key". Validation errors name the
// key path the same way.
//
// The package is a leaf: it imports no other Pith package, so every part of
// the program can depend on it without cycles.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/BurntSushi/toml"
)

// Config is the whole configuration file. Every field has a default (see
// Default) except the Modbus stations, which are absent unless configured.
type Config struct {
	// Site names this installation.
	Site Site `toml:"site"`
	// Log sets up the program's logging.
	Log Log `toml:"log"`
	// HTTP sets up the HTTP API and dashboard server.
	HTTP HTTP `toml:"http"`
	// Store sets up the embedded time-series store.
	Store Store `toml:"store"`
	// Modbus lists the Modbus stations polled and the Modbus servers offered.
	Modbus Modbus `toml:"modbus"`
	// OPCUA lists the OPC UA servers read as a client.
	OPCUA OPCUA `toml:"opcua"`
	// PromQL bounds the Prometheus query API.
	PromQL PromQL `toml:"promql"`
	// Ingest sets up the push inputs (line protocol, emoncms, remote_write, MQTT).
	Ingest Ingest `toml:"ingest"`
	// MQTT subscribes to a broker.
	MQTT MQTT `toml:"mqtt"`
	// Sparkplug speaks MQTT Sparkplug B as host applications and edge
	// nodes (sparkplug.go).
	Sparkplug Sparkplug `toml:"sparkplug"`
	// Display is the public display page.
	Display Display `toml:"display"`
	// Events is the event collector at /api/v1/events.
	Events Events `toml:"events"`
	// Forward lists the upstreams values are forwarded to.
	Forward Forward `toml:"forward"`
	// Input lists the input-processing chains ([[input]], see process.go).
	Input []Input `toml:"input"`
	// Calc lists the calculated tags ([[calc]], see process.go).
	Calc []Calc `toml:"calc"`
	// Alarms watches tags and raises, logs and notifies alarms.
	Alarms Alarms `toml:"alarms"`
	// Schedules are weekly schedules and bookings driving 0/1 tags.
	Schedules Schedules `toml:"schedules"`
	// Rules write tags when conditions hold, within per-tag write limits.
	Rules Rules `toml:"rules"`
	// Central consumes what edge Piths forward to NATS JetStream.
	Central Central `toml:"central"`
	// Redundancy makes this Pith one box of a hot-standby pair.
	Redundancy Redundancy `toml:"redundancy"`
	// Energy sets the zone of local days and the tariffs of energy views.
	Energy Energy `toml:"energy"`
	// Users sets up people's sign-in, sessions and tag permissions.
	Users Users `toml:"users"`
	// Audit sets up the audit journal.
	Audit Audit `toml:"audit"`
}

// Site names this installation.
type Site struct {
	// Name identifies the installation, for example in forwarded data. It
	// is one tag-path segment: letters, digits, '_' and '-'.
	Name string `toml:"name"`
}

// Log levels accepted by Log.Level.
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// Log sets up the program's logging.
type Log struct {
	// Level is the lowest level logged: debug, info, warn or error.
	Level string `toml:"level"`
}

// SlogLevel returns Level as an slog.Level. An unknown level (which Validate
// refuses) maps to slog.LevelInfo.
func (l Log) SlogLevel() slog.Level {
	switch l.Level {
	case LevelDebug:
		return slog.LevelDebug
	case LevelWarn:
		return slog.LevelWarn
	case LevelError:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

// HTTP sets up the HTTP API and dashboard server.
type HTTP struct {
	// Listen is the host:port the server listens on.
	Listen string `toml:"listen"`
	// Auth is "" (keys when any are configured) or "none", which allows
	// serving on a non-loopback address without keys.
	Auth string `toml:"auth"`
	// Keys are the API keys, stored as hashes.
	Keys []APIKey `toml:"keys"`
	// TLS is "" (plain HTTP unless TLSCert is set) or "auto": a
	// self-signed certificate made once and kept in the data directory.
	TLS string `toml:"tls"`
	// TLSCert and TLSKey are PEM files of a certificate and its key.
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	// TLSHosts are extra names and addresses for the automatic certificate.
	TLSHosts []string `toml:"tls_hosts"`
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound
	// slow clients. WriteTimeout runs from the end of the request headers
	// to the end of the answer; the live streams are exempt and an import
	// gets ReadTimeout instead.
	ReadHeaderTimeout Duration `toml:"read_header_timeout"`
	ReadTimeout       Duration `toml:"read_timeout"`
	WriteTimeout      Duration `toml:"write_timeout"`
	IdleTimeout       Duration `toml:"idle_timeout"`
	// MaxInflightBytes is the memory budget shared by every request body
	// and large answer in flight; a request that does not fit gets 503
	// with Retry-After. 0 means DefaultMaxInflightBytes.
	MaxInflightBytes int64 `toml:"max_inflight_bytes"`
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int `toml:"max_header_bytes"`
	// RateLimit is requests per second per key (or client address
	// without keys); 0 turns limiting off. RateBurst is the bucket size.
	RateLimit float64 `toml:"rate_limit"`
	RateBurst int     `toml:"rate_burst"`
}

// APIKey is one API key: its name (for logs), the hash of the key
// ("sha256:" and 64 hex digits; `pith key NAME` makes both) and its scope.
type APIKey struct {
	Name  string `toml:"name"`
	Hash  string `toml:"hash"`
	Scope string `toml:"scope"` // read, write or admin
}

// PromQL bounds the Prometheus query API (/api/v1/query, query_range).
// Zero fields take their default.
type PromQL struct {
	// MaxConcurrentQueries is how many queries run at once.
	MaxConcurrentQueries int `toml:"max_concurrent_queries"`
	// MaxQueuedQueries is how many more wait for a turn; beyond them a
	// query gets 503 with Retry-After.
	MaxQueuedQueries int `toml:"max_queued_queries"`
	// MaxSamples is how many samples one query may hold in memory at
	// once; more is a 422 error.
	MaxSamples int `toml:"max_samples"`
}

// Limits of the HTTP server and PromQL that Default fills in.
const (
	// DefaultHTTPWriteTimeout covers a PromQL query's 2-minute timeout
	// plus the time to send its answer.
	DefaultHTTPWriteTimeout = 3 * time.Minute
	// DefaultMaxInflightBytes is the memory budget of bodies and answers
	// in flight that suits a board with 1 GB of RAM.
	DefaultMaxInflightBytes = 128 << 20
	// DefaultPromQLConcurrent, DefaultPromQLQueued and
	// DefaultPromQLMaxSamples keep PromQL within a few hundred MB: two
	// queries of at most 5 million samples (16 bytes each) run at once.
	DefaultPromQLConcurrent = 2
	DefaultPromQLQueued     = 8
	DefaultPromQLMaxSamples = 5_000_000
)

// Ingest sets up the push inputs.
type Ingest struct {
	// NewTagsPerMinute caps how many tags the push inputs may create per
	// minute, against a cardinality explosion; writes over it get 429.
	NewTagsPerMinute int `toml:"new_tags_per_minute"`
}

// MQTT subscribes to a broker at QoS 1; a value is acknowledged once stored.
type MQTT struct {
	// Enabled turns the subscriber on.
	Enabled bool `toml:"enabled"`
	// Broker is mqtt://host:port or tls://host:port.
	Broker string `toml:"broker"`
	// Topics are the subscriptions; Prefix is cut from topics before naming.
	Topics []string `toml:"topics"`
	Prefix string   `toml:"prefix"`
	// ClientID is fixed so the broker keeps the session; "" is pith-HOSTNAME.
	ClientID string `toml:"client_id"`
	// Username and Password, when the broker wants them.
	Username string `toml:"username"`
	Password string `toml:"password"`
}

// Events is the collector of app and device events.
type Events struct {
	// Enabled serves POST and GET /api/v1/events.
	Enabled bool `toml:"enabled"`
	// Secret, when set, lets clients sign requests (HMAC-SHA256 over
	// timestamp and body) instead of sending an API key.
	Secret string `toml:"secret"`
	// Format of the sink files: "ndjson" or "csv"; Compression: "gzip"
	// or "zstd".
	Format      string `toml:"format"`
	Compression string `toml:"compression"`
	// S3, when its endpoint is set, receives the complete files.
	S3 EventsS3 `toml:"s3"`
	// NATS, when its URL is set, receives them in a JetStream object store.
	NATS EventsNATS `toml:"nats"`
}

// EventsNATS is the JetStream object store event files are uploaded to.
type EventsNATS struct {
	URL    string `toml:"url"`    // "" keeps the files on disk
	Bucket string `toml:"bucket"` // object store bucket, created when missing
}

// EventsS3 is the object store event files are uploaded to.
type EventsS3 struct {
	Endpoint  string `toml:"endpoint"` // host:port; "" keeps the files on disk
	Secure    bool   `toml:"secure"`   // HTTPS
	Region    string `toml:"region"`
	Bucket    string `toml:"bucket"`
	Prefix    string `toml:"prefix"`
	AccessKey string `toml:"access_key"`
	SecretKey string `toml:"secret_key"`
}

// Display is the public display page at /display.
type Display struct {
	// Enabled serves the page; Public serves it without an API key.
	Enabled bool `toml:"enabled"`
	Public  bool `toml:"public"`
	// Title is the page's heading; Refresh how often it reloads values.
	Title   string   `toml:"title"`
	Refresh Duration `toml:"refresh"`
	// Tiles are the big numbers shown.
	Tiles []DisplayTile `toml:"tile"`
}

// DisplayTile is one big number with an optional sparkline.
type DisplayTile struct {
	Tag      string   `toml:"tag"`
	Label    string   `toml:"label"`
	Unit     string   `toml:"unit"`
	Decimals int      `toml:"decimals"`
	Spark    Duration `toml:"spark"` // sparkline window ending now; "0s" draws none
}

// Durability modes accepted by Store.Durability.
const (
	// DurabilityFsync acknowledges a write once it is fsynced.
	DurabilityFsync = "fsync"
	// DurabilityRelaxed acknowledges a write once it is in the WAL's
	// buffer and fsyncs every CommitInterval, trading a bounded loss
	// window on power cut for far fewer flash writes.
	DurabilityRelaxed = "relaxed"
)

// Store sets up the embedded time-series store.
type Store struct {
	// Dir is the data directory, relative to the working directory unless
	// absolute.
	Dir string `toml:"dir"`
	// Durability is DurabilityFsync or DurabilityRelaxed.
	Durability string `toml:"durability"`
	// CommitInterval is the fsync period in relaxed mode: the most recent
	// data a power cut may lose.
	CommitInterval Duration `toml:"commit_interval"`
	// HeadMaxSamples is the number of in-memory samples beyond which the
	// head is flushed to chunks (up to 4 times more while it holds many
	// tags: store.Options.HeadMaxSamples).
	HeadMaxSamples int `toml:"head_max_samples"`
	// HeadMaxAge flushes the head when its oldest sample arrived this long
	// ago, so that a quiet plant still reaches the chunks.
	HeadMaxAge Duration `toml:"head_max_age"`
	// RetentionRaw is how long raw samples are kept; 0 keeps them forever.
	RetentionRaw Duration `toml:"retention_raw"`
	// RetentionRollups is how long rollup tiers are kept; 0 keeps them
	// forever.
	RetentionRollups Duration `toml:"retention_rollups"`
	// ForwardMaxBytes bounds the write-ahead log kept for the forwarders
	// (store followers) beyond what the store needs itself; past it the
	// oldest unsent values are released and counted as dropped. 0 is
	// 1 GiB.
	ForwardMaxBytes int64 `toml:"forward_max_bytes"`
	// QueryCacheBytes bounds what queries keep decoded in memory (rollup
	// tiers and raw chunks at bucket edges); 0 is DefaultQueryCacheBytes.
	QueryCacheBytes int64 `toml:"query_cache_bytes"`
}

// Defaults of the values Default and Parse fill in.
const (
	DefaultSiteName         = "site1"
	DefaultLogLevel         = LevelInfo
	DefaultHTTPListen       = "127.0.0.1:8080"
	DefaultStoreDir         = "data"
	DefaultDurability       = DurabilityFsync
	DefaultCommitInterval   = Duration(time.Second)
	DefaultHeadMaxSamples   = 1_000_000
	DefaultHeadMaxAge       = Duration(10 * time.Minute)
	DefaultModbusPeriod     = Duration(time.Second)
	DefaultModbusTimeout    = Duration(time.Second)
	DefaultModbusClientUnit = 1
	DefaultModbusTCPPort    = 502
	DefaultSerialBaud       = 19200
	DefaultSerialParity     = 'E'
	DefaultSerialStopBits   = 1
	DefaultSerialDataBits   = 8
)

// Default returns the configuration used when no file is given. It
// validates.
func Default() *Config {
	return &Config{
		Site: Site{Name: DefaultSiteName},
		Log:  Log{Level: DefaultLogLevel},
		HTTP: HTTP{
			Listen:            DefaultHTTPListen,
			ReadHeaderTimeout: Duration(10 * time.Second),
			ReadTimeout:       Duration(15 * time.Minute),
			WriteTimeout:      Duration(DefaultHTTPWriteTimeout),
			IdleTimeout:       Duration(2 * time.Minute),
			MaxHeaderBytes:    64 << 10,
			MaxInflightBytes:  DefaultMaxInflightBytes,
			RateLimit:         200,
			RateBurst:         400,
		},
		PromQL: PromQL{
			MaxConcurrentQueries: DefaultPromQLConcurrent,
			MaxQueuedQueries:     DefaultPromQLQueued,
			MaxSamples:           DefaultPromQLMaxSamples,
		},
		Ingest: Ingest{NewTagsPerMinute: 1000},
		MQTT: MQTT{
			Broker: "mqtt://127.0.0.1:1883",
			Topics: []string{"emon/#"},
			Prefix: "emon/",
		},
		Display:   Display{Refresh: Duration(5 * time.Second)},
		Events:    Events{Enabled: true, Format: "ndjson", Compression: "gzip", NATS: EventsNATS{Bucket: "pith-events"}},
		Alarms:    Alarms{Scan: DefaultAlarmScan, StationComm: true, LogMaxBytes: DefaultAlarmLogMaxBytes},
		Schedules: Schedules{Scan: DefaultScheduleScan},
		Rules:     Rules{Scan: DefaultRuleScan},
		Central:   DefaultCentral(),
		Users:     DefaultUsers(),
		Audit:     DefaultAudit(),
		Store: Store{
			Dir:            DefaultStoreDir,
			Durability:     DefaultDurability,
			CommitInterval: DefaultCommitInterval,
			HeadMaxSamples: DefaultHeadMaxSamples,
			HeadMaxAge:     DefaultHeadMaxAge,
		},
	}
}

// LoadFor is the config `pith serve` runs: the file at path (the defaults
// when path is empty), with the data directory and listen address
// replaced when set, validated again after the replacement.
func LoadFor(path, dataDir, listen string) (*Config, error) {
	cfg := Default()
	if path != "" {
		var err error
		if cfg, err = Load(path); err != nil {
			return nil, err
		}
	}
	if dataDir != "" {
		cfg.Store.Dir = dataDir
	}
	if listen != "" {
		cfg.HTTP.Listen = listen
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Load reads, decodes and validates the configuration file at path. Its
// errors start with the path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes a configuration file strictly, fills in defaults and
// validates the result. Callers that change the Config afterwards (command
// line flags) call Validate again.
func Parse(data []byte) (*Config, error) {
	// The generic tree comes first: checking it against the Config type
	// yields unknown keys and type mismatches with their indexed key paths,
	// which the decoder's own errors lack.
	var tree map[string]any
	if _, err := toml.Decode(string(data), &tree); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if err := checkTree(tree); err != nil {
		return nil, err
	}
	cfg := Default()
	md, err := toml.Decode(string(data), cfg)
	if err != nil {
		return nil, fmt.Errorf("decode config: %w", err)
	}
	// checkTree should have caught every unknown key; this is the safety net
	// should the two ever disagree.
	if undecoded := md.Undecoded(); len(undecoded) > 0 {
		errs := make([]error, len(undecoded))
		for i, k := range undecoded {
			errs[i] = &KeyError{Key: k.String(), Msg: "unknown key"}
		}
		return nil, errors.Join(errs...)
	}
	applyElementDefaults(cfg, tree)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// KeyError is a problem with one key of the configuration.
type KeyError struct {
	// Key is the full key path, array elements indexed from 0, for
	// example "modbus.client[0].tags[3].register".
	Key string
	// Msg says what is wrong with it.
	Msg string
}

// Error returns "key: msg".
func (e *KeyError) Error() string { return e.Key + ": " + e.Msg }

// keyErrorf returns a *KeyError for key with a formatted message.
func keyErrorf(key, format string, args ...any) error {
	return &KeyError{Key: key, Msg: fmt.Sprintf(format, args...)}
}
