package config

import (
	"time"
)

// OPCUA lists the OPC UA servers Pith reads as a client ([[opcua.client]]).
type OPCUA struct {
	// Clients are the stations, one per server endpoint.
	Clients []OPCUAClient `toml:"client"`
}

// OPC UA security policies accepted by OPCUAClient.SecurityPolicy.
const (
	OPCUAPolicyNone           = "None"
	OPCUAPolicyBasic256Sha256 = "Basic256Sha256"
)

// OPC UA message security modes accepted by OPCUAClient.SecurityMode.
const (
	OPCUAModeNone           = "None"
	OPCUAModeSign           = "Sign"
	OPCUAModeSignAndEncrypt = "SignAndEncrypt"
)

// OPC UA user identities accepted by OPCUAClient.Auth.
const (
	OPCUAAuthAnonymous   = "anonymous"
	OPCUAAuthUsername    = "username"
	OPCUAAuthCertificate = "certificate"
)

// OPC UA timestamp choices accepted by OPCUAClient.Timestamps.
const (
	OPCUATimestampSource = "source"
	OPCUATimestampServer = "server"
)

// OPC UA tag modes accepted by OPCUATagSpec.Mode.
const (
	OPCUAModeSubscribe = "subscribe"
	OPCUAModeRead      = "read"
)

// OPC UA server-side deadbands accepted by OPCUATagSpec.ServerDeadband.
const (
	OPCUADeadbandNone     = "none"
	OPCUADeadbandAbsolute = "absolute"
	OPCUADeadbandPercent  = "percent"
)

// OPCUAClient is one OPC UA server endpoint Pith reads: a session with one
// subscription for its monitored tags, plus cyclic reads for the tags that
// ask for them.
type OPCUAClient struct {
	// Name identifies the station in logs and in its statistics tags
	// (pith.station.<name>.*): letters, digits, '_' and '-', unique
	// among all stations (Modbus ones included).
	Name string `toml:"name"`
	// Endpoint is the server's endpoint URL, "opc.tcp://host:port[/path]".
	Endpoint string `toml:"endpoint"`
	// SecurityPolicy is "None" (default) or "Basic256Sha256".
	SecurityPolicy string `toml:"security_policy"`
	// SecurityMode is "None" (default, with policy None only), "Sign" or
	// "SignAndEncrypt" (with Basic256Sha256 only).
	SecurityMode string `toml:"security_mode"`
	// Auth is the user identity: "anonymous" (default), "username" or
	// "certificate" (the application certificate as the user's).
	Auth string `toml:"auth"`
	// Username and Password are the credentials with Auth "username".
	Username string `toml:"username"`
	Password string `toml:"password"`
	// Certificate and PrivateKey are PEM (or DER) files of Pith's
	// application instance certificate and its RSA key (`pith cert` makes
	// them). Required with a security policy other than None or with Auth
	// "certificate".
	Certificate string `toml:"certificate"`
	PrivateKey  string `toml:"private_key"`
	// TrustDir is a directory of trusted server certificates (PEM or DER
	// files, any name). With a security policy other than None the
	// server's certificate must be one of them, unless
	// InsecureTrustAnyServer is set.
	TrustDir string `toml:"trust_dir"`
	// InsecureTrustAnyServer accepts any server certificate: encryption
	// without knowing who is at the other end. Default false.
	InsecureTrustAnyServer bool `toml:"insecure_trust_any_server"`
	// Timestamps is which time a value is archived with: "source"
	// (default: the device's, the server's when the device gives none) or
	// "server" (the server's always).
	Timestamps string `toml:"timestamps"`
	// PublishInterval is the subscription's publishing interval: how
	// often the server sends the changes it queued. Default 1s.
	PublishInterval Duration `toml:"publish_interval"`
	// ReadPeriod is the period of the cyclic reads of tags with mode
	// "read". Default 1s.
	ReadPeriod Duration `toml:"read_period"`
	// Timeout bounds each request (connect, read, write). Default 10s.
	Timeout Duration `toml:"timeout"`
	// RetryPause is the wait before connecting again after the session
	// could not be recovered. Default 5s.
	RetryPause Duration `toml:"retry_pause"`
	// Tags are the values read, as written in the file; ExpandedTags gives
	// them with defaults and arrays expanded.
	Tags []OPCUATagSpec `toml:"tags"`
}

// OPCUATagSpec is one entry of a station's tags as written in the file.
type OPCUATagSpec struct {
	// Name is the tag name; "{i}" in it becomes the array index when
	// Count > 1.
	Name string `toml:"name"`
	// Node is the variable's node id in the string form of the OPC UA
	// specification: "ns=2;s=Line1.Speed", "ns=1;i=1001",
	// "nsu=urn:vendor:plc;s=Speed", "i=2258".
	Node string `toml:"node"`
	// Type is the variable's data type: Boolean, SByte, Byte, Int16,
	// UInt16, Int32, UInt32, Int64, UInt64, Float or Double (any case).
	Type string `toml:"type"`
	// Count > 1 reads the variable as an array and makes one tag per
	// element 0..Count-1. Default 1 (a scalar).
	Count int `toml:"count"`
	// Mode is "subscribe" (default: a monitored item) or "read" (read
	// every ReadPeriod).
	Mode string `toml:"mode"`
	// SamplingInterval is how often the server samples the variable for
	// a monitored item; "0s" asks for every change. Default: the
	// station's publish interval.
	SamplingInterval Duration `toml:"sampling_interval"`
	// QueueSize is how many changes the server keeps per monitored item
	// between two publishes; more are lost (counted as queue overflows).
	// Default 10.
	QueueSize int `toml:"queue_size"`
	// ServerDeadband is the server-side filter of a monitored item:
	// "none" (default), "absolute" or "percent" (of the EURange).
	ServerDeadband string `toml:"server_deadband"`
	// ServerDeadbandValue is the filter's threshold, > 0 with a deadband.
	ServerDeadbandValue float64 `toml:"server_deadband_value"`
	// Scale and Offset convert the raw value: value = raw*Scale + Offset.
	// Defaults 1 and 0; not for Boolean.
	Scale  float64 `toml:"scale"`
	Offset float64 `toml:"offset"`
	// Unit is the engineering unit shown with the value.
	Unit string `toml:"unit"`
	// Description says what the value is.
	Description string `toml:"description"`
	// Archive and Deadband: as for Modbus tags.
	Archive  string  `toml:"archive"`
	Deadband float64 `toml:"deadband"`
	// Writable lets POST /api/v1/control (and rules and schedules) write
	// the variable. Default false.
	Writable bool `toml:"writable"`
}

// Defaults of OPC UA stations and tags.
const (
	DefaultOPCUAPublishInterval = Duration(time.Second)
	DefaultOPCUAReadPeriod      = Duration(time.Second)
	DefaultOPCUATimeout         = Duration(10 * time.Second)
	DefaultOPCUARetryPause      = Duration(5 * time.Second)
	DefaultOPCUAQueueSize       = 10
	// maxOPCUAArray bounds Count, so that a typo cannot define millions
	// of tags.
	maxOPCUAArray = 65536
)

// DefaultOPCUAClient returns a station with every default filled in.
func DefaultOPCUAClient() OPCUAClient {
	return OPCUAClient{
		SecurityPolicy:  OPCUAPolicyNone,
		SecurityMode:    OPCUAModeNone,
		Auth:            OPCUAAuthAnonymous,
		Timestamps:      OPCUATimestampSource,
		PublishInterval: DefaultOPCUAPublishInterval,
		ReadPeriod:      DefaultOPCUAReadPeriod,
		Timeout:         DefaultOPCUATimeout,
		RetryPause:      DefaultOPCUARetryPause,
	}
}

// DefaultOPCUATagSpec returns a tag entry with every default filled in but
// SamplingInterval, whose default is the station's publish interval.
func DefaultOPCUATagSpec() OPCUATagSpec {
	return OPCUATagSpec{Count: 1, Mode: OPCUAModeSubscribe, QueueSize: DefaultOPCUAQueueSize,
		ServerDeadband: OPCUADeadbandNone, Scale: 1, Archive: "change"}
}

// applyOPCUADefaults fills the defaults of [[opcua.client]] entries whose
// keys are absent from the file (see applyElementDefaults).
func applyOPCUADefaults(cfg *Config, tree map[string]any) {
	dc, dt := DefaultOPCUAClient(), DefaultOPCUATagSpec()
	for i, raw := range tables(subTable(tree, "opcua"), "client") {
		c := &cfg.OPCUA.Clients[i]
		setStr := func(key string, dst *string, def string) {
			if !has(raw, key) {
				*dst = def
			}
		}
		setStr("security_policy", &c.SecurityPolicy, dc.SecurityPolicy)
		setStr("security_mode", &c.SecurityMode, dc.SecurityMode)
		setStr("auth", &c.Auth, dc.Auth)
		setStr("timestamps", &c.Timestamps, dc.Timestamps)
		setDur := func(key string, dst *Duration, def Duration) {
			if !has(raw, key) {
				*dst = def
			}
		}
		setDur("publish_interval", &c.PublishInterval, dc.PublishInterval)
		setDur("read_period", &c.ReadPeriod, dc.ReadPeriod)
		setDur("timeout", &c.Timeout, dc.Timeout)
		setDur("retry_pause", &c.RetryPause, dc.RetryPause)
		for j, rawTag := range tables(raw, "tags") {
			t := &c.Tags[j]
			if !has(rawTag, "count") {
				t.Count = dt.Count
			}
			if !has(rawTag, "mode") {
				t.Mode = dt.Mode
			}
			if !has(rawTag, "sampling_interval") {
				t.SamplingInterval = c.PublishInterval
			}
			if !has(rawTag, "queue_size") {
				t.QueueSize = dt.QueueSize
			}
			if !has(rawTag, "server_deadband") {
				t.ServerDeadband = dt.ServerDeadband
			}
			if !has(rawTag, "scale") {
				t.Scale = dt.Scale
			}
			if !has(rawTag, "archive") {
				t.Archive = dt.Archive
			}
		}
	}
}

// StationNames returns the names of every acquisition station, Modbus
// then OPC UA, in file order: the stations whose pith.station.<name>.comm
// tag exists.
func (c *Config) StationNames() []string {
	out := make([]string, 0, len(c.Modbus.Clients)+len(c.OPCUA.Clients))
	for _, s := range c.Modbus.Clients {
		out = append(out, s.Name)
	}
	for _, s := range c.OPCUA.Clients {
		out = append(out, s.Name)
	}
	return out
}
