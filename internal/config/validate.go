package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/pith-historian/pith/internal/netaddr"
)

// Validate checks every value and the relations between them (unique
// names, consistent serial links). It reports all problems at once, each a
// *KeyError naming its key path, joined with errors.Join.
func (c *Config) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, keyErrorf(key, format, args...))
	}
	if err := checkSegment(c.Site.Name); err != nil {
		add("site.name", "%v", err)
	}
	switch c.Log.Level {
	case LevelDebug, LevelInfo, LevelWarn, LevelError:
	default:
		add("log.level", "unknown level %q (want debug, info, warn or error)", c.Log.Level)
	}
	if err := checkListen(c.HTTP.Listen); err != nil {
		add("http.listen", "%v", err)
	}
	c.HTTP.validate(add)
	validatePromQL(c.PromQL, add)
	c.Forward.validate(add)
	c.Central.validate(add)
	c.Redundancy.validate(add)
	c.Sparkplug.validate(add)
	c.validateProcess(add)
	if c.Ingest.NewTagsPerMinute < 1 {
		add("ingest.new_tags_per_minute", "must be at least 1")
	}
	if c.MQTT.Enabled {
		if !strings.Contains(c.MQTT.Broker, "://") {
			add("mqtt.broker", "want a URL such as mqtt://127.0.0.1:1883, got %q", c.MQTT.Broker)
		}
		if len(c.MQTT.Topics) == 0 {
			add("mqtt.topics", "no topics to subscribe to")
		}
	}
	if c.Display.Enabled {
		if len(c.Display.Tiles) == 0 || len(c.Display.Tiles) > 64 {
			add("display.tile", "want 1 to 64 tiles, have %d", len(c.Display.Tiles))
		}
		if c.Display.Refresh < Duration(time.Second) {
			add("display.refresh", "at least 1s")
		}
		for i, t := range c.Display.Tiles {
			if t.Tag == "" {
				add(fmt.Sprintf("display.tile[%d].tag", i), "empty tag")
			}
			if t.Decimals < 0 || t.Decimals > 10 {
				add(fmt.Sprintf("display.tile[%d].decimals", i), "want 0 to 10")
			}
		}
	}
	c.Events.validate(add)
	c.Store.validate(add)
	c.Alarms.validate(add)
	c.Schedules.validate(add)
	c.Rules.validate(add)
	c.Users.validate(add)
	c.Audit.validate(add)
	c.Energy.validate(add)
	stations := make(map[string]string) // station name -> its key path
	tagNames := make(map[string]string) // tag name -> its key path
	errs = append(errs, c.Modbus.validate(stations, tagNames)...)
	errs = append(errs, c.OPCUA.validate(stations, tagNames)...)
	return errors.Join(errs...)
}

func (s *Store) validate(add func(key, format string, args ...any)) {
	if s.Dir == "" {
		add("store.dir", "data directory is empty")
	}
	switch s.Durability {
	case DurabilityFsync:
		if s.CommitInterval < 0 {
			add("store.commit_interval", "must not be negative, got %s", s.CommitInterval)
		}
	case DurabilityRelaxed:
		if s.CommitInterval <= 0 {
			add("store.commit_interval", "must be > 0 with durability = \"relaxed\", got %s", s.CommitInterval)
		}
	default:
		add("store.durability", "unknown durability %q (want fsync or relaxed)", s.Durability)
	}
	if s.HeadMaxSamples < 1 {
		add("store.head_max_samples", "must be at least 1, got %d", s.HeadMaxSamples)
	}
	if s.HeadMaxAge <= 0 {
		add("store.head_max_age", "must be > 0, got %s", s.HeadMaxAge)
	}
	if s.RetentionRaw < 0 {
		add("store.retention_raw", "must not be negative (0 keeps data forever), got %s", s.RetentionRaw)
	}
	if s.RetentionRollups < 0 {
		add("store.retention_rollups", "must not be negative (0 keeps data forever), got %s", s.RetentionRollups)
	}
	if s.QueryCacheBytes < 0 {
		add("store.query_cache_bytes", "must not be negative (0 is the default), got %d", s.QueryCacheBytes)
	}
	if s.ForwardMaxBytes < 0 {
		add("store.forward_max_bytes", "must not be negative (0 is 1 GiB), got %d", s.ForwardMaxBytes)
	}
}

// serialLink remembers the first station on a serial device, since every
// station sharing an RS-485 bus must use the same line settings.
type serialLink struct {
	ep   Endpoint
	path string
}

// validate checks the Modbus stations and servers, recording station and
// tag names (with their key paths) in stations and tagNames.
func (m *Modbus) validate(stations, tagNames map[string]string) []error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, keyErrorf(key, format, args...))
	}
	serial := make(map[string]serialLink) // device -> first station on it
	for i := range m.Clients {
		c := &m.Clients[i]
		path := "modbus.client[" + strconv.Itoa(i) + "]"
		if err := checkSegment(c.Name); err != nil {
			add(path+".name", "%v", err)
		} else if first, dup := stations[c.Name]; dup {
			add(path+".name", "station %q already defined at %s", c.Name, first)
		} else {
			stations[c.Name] = path
		}
		ep, err := parseModbusURL(c.URL)
		if err != nil {
			add(path+".url", "%v", err)
		}
		switch {
		case c.Unit < 0 || c.Unit > 255:
			add(path+".unit", "must be 0..255, got %d", c.Unit)
		case ep.IsSerial() && (c.Unit < 1 || c.Unit > 247):
			add(path+".unit", "must be 1..247 on a serial link (0 is broadcast), got %d", c.Unit)
		}
		if ep.IsSerial() {
			if first, ok := serial[ep.Device]; !ok {
				serial[ep.Device] = serialLink{ep: ep, path: path}
			} else if first.ep != ep {
				add(path+".url", "serial settings differ from %s on the same device %s", first.path, ep.Device)
			}
		}
		if c.Period < 0 {
			add(path+".period", "must not be negative (0 polls as fast as possible), got %s", c.Period)
		}
		if c.Timeout <= 0 {
			add(path+".timeout", "must be > 0, got %s", c.Timeout)
		}
		if c.Pause < 0 {
			add(path+".pause", "must not be negative, got %s", c.Pause)
		}
		tags, tagErrs := c.expandTags(path + ".tags")
		errs = append(errs, tagErrs...)
		// One duplicate per entry is enough: a count = 100 entry would
		// otherwise bury the file's other problems.
		dupEntry := -1
		for _, t := range tags {
			key := fmt.Sprintf("%s.tags[%d].name", path, t.Entry)
			if first, dup := tagNames[t.Name]; dup {
				if dupEntry != t.Entry {
					add(key, "tag %q already defined at %s", t.Name, first)
					dupEntry = t.Entry
				}
				continue
			}
			tagNames[t.Name] = key
		}
	}
	listens := make(map[string]string) // listen address -> its key path
	for i := range m.Servers {
		s := &m.Servers[i]
		path := "modbus.server[" + strconv.Itoa(i) + "]"
		listenOK := false
		if err := checkListen(s.Listen); err != nil {
			add(path+".listen", "%v", err)
		} else if first, dup := listens[s.Listen]; dup {
			add(path+".listen", "address %q already used by %s", s.Listen, first)
		} else {
			listens[s.Listen] = path
			listenOK = true
		}
		if s.Unit < 0 || s.Unit > 247 {
			add(path+".unit", "must be 0..247 (0 answers every unit id), got %d", s.Unit)
		}
		_, regErrs := s.expandRegisters(path + ".registers")
		errs = append(errs, regErrs...)
		if listenOK && !s.AllowRemoteWrites {
			checkRemoteWrites(add, path, s)
		}
	}
	return errs
}

// checkRemoteWrites refuses a server that other machines can reach with
// writable registers: Modbus has no authentication, so anyone on the
// network could write those tags. The HTTP server refuses the same
// exposure without API keys. path is the server's key path.
func checkRemoteWrites(add func(key, format string, args ...any), path string, s *ModbusServer) {
	host, _, _ := net.SplitHostPort(s.Listen) // checkListen accepted it
	if netaddr.IsLoopback(host) {
		return
	}
	for j, r := range s.Registers {
		if !r.Writable {
			continue
		}
		shown := host
		if shown == "" {
			shown = "all interfaces"
		}
		add(path+".allow_remote_writes", "listen = %q (%s) is reachable from other machines and %s.registers[%d] is writable, "+
			"so any Modbus client there could write tag %q: listen on 127.0.0.1, make the registers read-only, "+
			"or set allow_remote_writes = true to allow it", s.Listen, shown, path, j, r.Tag)
		return
	}
}

// checkSegment accepts names that fit in one segment of a tag path, such as
// the station name in pith.station.<name>.*: letters, digits, '_' and '-'.
func checkSegment(name string) error {
	if name == "" {
		return errors.New("name is empty")
	}
	if !isBareKey(name) {
		return fmt.Errorf("name %q may only hold letters, digits, '_' and '-'", name)
	}
	return nil
}

// checkListen accepts host:port listen addresses; an empty host listens on
// every interface and port 0 picks a free port.
func checkListen(addr string) error {
	if addr == "" {
		return errors.New("address is empty (want host:port, such as 127.0.0.1:8080)")
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q is not host:port", addr)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number 0..65535", port)
	}
	return nil
}

func (h *HTTP) validate(add func(key, format string, args ...any)) {
	if h.Auth != "" && h.Auth != "none" {
		add("http.auth", "unknown value %q (want \"\" or \"none\")", h.Auth)
	}
	if h.Auth == "none" && len(h.Keys) > 0 {
		add("http.auth", "\"none\" with keys configured: remove one or the other")
	}
	names := map[string]bool{}
	for i, k := range h.Keys {
		at := fmt.Sprintf("http.keys[%d]", i)
		if k.Name == "" {
			add(at+".name", "empty name")
		} else if names[k.Name] {
			add(at+".name", "duplicate key name %q", k.Name)
		}
		names[k.Name] = true
		if !validKeyHash(k.Hash) {
			add(at+".hash", "want \"sha256:\" and 64 hex digits (pith key NAME prints one)")
		}
		switch k.Scope {
		case "read", "write", "admin":
		default:
			add(at+".scope", "unknown scope %q (want read, write or admin)", k.Scope)
		}
	}
	switch h.TLS {
	case "":
	case "auto":
		if h.TLSCert != "" {
			add("http.tls", "\"auto\" and tls_cert both set: choose one")
		}
	default:
		add("http.tls", "unknown value %q (want \"\" or \"auto\")", h.TLS)
	}
	if (h.TLSCert == "") != (h.TLSKey == "") {
		add("http.tls_key", "tls_cert and tls_key go together")
	}
	for key, d := range map[string]Duration{"http.read_header_timeout": h.ReadHeaderTimeout, "http.read_timeout": h.ReadTimeout,
		"http.write_timeout": h.WriteTimeout, "http.idle_timeout": h.IdleTimeout} {
		if d < 0 {
			add(key, "negative duration %s", d)
		}
	}
	if h.MaxHeaderBytes < 0 {
		add("http.max_header_bytes", "negative size %d", h.MaxHeaderBytes)
	}
	if h.RateLimit < 0 || h.RateBurst < 0 {
		add("http.rate_limit", "negative rate or burst")
	}
	if h.MaxInflightBytes != 0 && h.MaxInflightBytes < minInflightBytes {
		add("http.max_inflight_bytes", "%d bytes is below the smallest budget, %d (1 MiB)", h.MaxInflightBytes, minInflightBytes)
	}
}

// minInflightBytes is the smallest memory budget accepted: below it the
// ordinary requests of a dashboard would be refused.
const minInflightBytes = 1 << 20

// validatePromQL checks the [promql] limits.
func validatePromQL(p PromQL, add func(key, format string, args ...any)) {
	// Zero takes the default, as with an absent key.
	if p.MaxConcurrentQueries < 0 {
		add("promql.max_concurrent_queries", "negative count %d", p.MaxConcurrentQueries)
	}
	if p.MaxQueuedQueries < 0 {
		add("promql.max_queued_queries", "negative count %d", p.MaxQueuedQueries)
	}
	if p.MaxSamples < 0 {
		add("promql.max_samples", "negative count %d", p.MaxSamples)
	}
}

func validKeyHash(s string) bool {
	const p = "sha256:"
	if len(s) != len(p)+64 || s[:len(p)] != p {
		return false
	}
	for _, c := range s[len(p):] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func (e *Events) validate(add func(key, format string, args ...any)) {
	if e.Format != "ndjson" && e.Format != "csv" {
		add("events.format", "want \"ndjson\" or \"csv\", got %q", e.Format)
	}
	if e.Compression != "gzip" && e.Compression != "zstd" {
		add("events.compression", "want \"gzip\" or \"zstd\", got %q", e.Compression)
	}
	if e.S3.Endpoint != "" {
		if strings.Contains(e.S3.Endpoint, "/") {
			add("events.s3.endpoint", "want host:port without a scheme, got %q", e.S3.Endpoint)
		}
		if e.S3.Bucket == "" {
			add("events.s3.bucket", "is required with an endpoint")
		}
	}
	if e.NATS.URL != "" {
		if e.S3.Endpoint != "" {
			add("events.nats.url", "set either events.s3.endpoint or events.nats.url, not both")
		}
		if err := checkNATSURLs(e.NATS.URL); err != nil {
			add("events.nats.url", "%v", err)
		}
		ok := e.NATS.Bucket != ""
		for _, r := range e.NATS.Bucket {
			ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
		}
		if !ok {
			add("events.nats.bucket", "want letters, digits, '_' and '-', got %q", e.NATS.Bucket)
		}
	}
}
