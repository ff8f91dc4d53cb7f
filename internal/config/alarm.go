package config

import (
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
)

// Alarm types accepted by AlarmDef.Type.
const (
	AlarmHiHi  = "hihi"  // value above limit (urgent)
	AlarmHi    = "hi"    // value above limit
	AlarmLo    = "lo"    // value below limit
	AlarmLoLo  = "lolo"  // value below limit (urgent)
	AlarmState = "state" // digital tag equals value
	AlarmStale = "stale" // no new sample for max_age
	AlarmComm  = "comm"  // a station (Modbus or OPC UA) stopped communicating
)

// Alarm severities accepted by AlarmDef.Severity.
var alarmSeverities = []string{"info", "warning", "major", "critical"}

// Alarms is the [alarms] section: the alarm definitions, their log and
// the notifications sent on every transition.
type Alarms struct {
	// Enabled runs the alarm engine and serves /api/v1/alarms.
	Enabled bool `toml:"enabled"`
	// Scan is how often delays and stale values are checked; a limit
	// crossing is seen at once, its delay expiry at most one scan late.
	Scan Duration `toml:"scan"`
	// StationComm adds a comm alarm for every station (Modbus and OPC UA).
	StationComm bool `toml:"station_comm"`
	// LogMaxBytes rotates the alarm log (DATA/alarms/alarms.log) to
	// alarms.log.1 once it grows past this size.
	LogMaxBytes int64 `toml:"log_max_bytes"`
	// Alarm lists the alarm definitions.
	Alarm []AlarmDef `toml:"alarm"`
	// Webhook lists the HTTP endpoints every alarm event is POSTed to.
	Webhook []AlarmWebhook `toml:"webhook"`
	// MQTT publishes every alarm event to a broker.
	MQTT AlarmMQTT `toml:"mqtt"`
}

// AlarmDef is one alarm.
type AlarmDef struct {
	// Name identifies the alarm in the API, the log and notifications.
	Name string `toml:"name"`
	// Type is hi, hihi, lo, lolo, state, stale or comm.
	Type string `toml:"type"`
	// Tag is the watched tag (all types but comm).
	Tag string `toml:"tag"`
	// Station is the station (Modbus or OPC UA) watched by a comm alarm.
	Station string `toml:"station"`
	// Limit is the threshold of hi, hihi, lo and lolo alarms.
	Limit float64 `toml:"limit"`
	// Deadband is how far back past the limit a value must go to clear.
	Deadband float64 `toml:"deadband"`
	// Value is the value that makes a state alarm active.
	Value float64 `toml:"value"`
	// MaxAge is the age of the newest sample beyond which a stale alarm
	// is active.
	MaxAge Duration `toml:"max_age"`
	// OnDelay is how long the condition must hold before the alarm is
	// raised; OffDelay how long it must be gone before it clears.
	OnDelay  Duration `toml:"on_delay"`
	OffDelay Duration `toml:"off_delay"`
	// Severity is info, warning, major or critical ("" is warning).
	Severity string `toml:"severity"`
	// Message is shown to people with the alarm.
	Message string `toml:"message"`
}

// AlarmWebhook POSTs every alarm event as JSON to URL.
type AlarmWebhook struct {
	URL string `toml:"url"`
	// Timeout bounds one attempt; 0 means 10s.
	Timeout Duration `toml:"timeout"`
	// Attempts is how many times an event is tried; 0 means 5.
	Attempts int `toml:"attempts"`
	// Headers are "Name: value" lines sent with every request, e.g. an
	// Authorization token.
	Headers []string `toml:"headers"`
}

// AlarmMQTT publishes every alarm event (QoS 1) to
// <topic>/<alarm name>, retained so a new subscriber sees current states.
type AlarmMQTT struct {
	Enabled  bool   `toml:"enabled"`
	Broker   string `toml:"broker"`    // mqtt://host:port or tls://host:port
	Topic    string `toml:"topic"`     // topic prefix; "" is pith/<site.name>/alarms
	ClientID string `toml:"client_id"` // "" is pith-alarms-HOSTNAME
	Username string `toml:"username"`
	Password string `toml:"password"`
}

// DefaultAlarmScan is the default of alarms.scan.
const DefaultAlarmScan = Duration(100 * time.Millisecond)

// DefaultAlarmLogMaxBytes is the default of alarms.log_max_bytes.
const DefaultAlarmLogMaxBytes = 64 << 20

// validate checks the [alarms] section.
func (a *Alarms) validate(add func(key, format string, args ...any)) {
	if a.Scan < Duration(10*time.Millisecond) || a.Scan > Duration(time.Minute) {
		add("alarms.scan", "want 10ms to 1m, got %s", a.Scan)
	}
	if a.LogMaxBytes < 4096 {
		add("alarms.log_max_bytes", "at least 4096")
	}
	names := map[string]bool{}
	for i, d := range a.Alarm {
		at := fmt.Sprintf("alarms.alarm[%d]", i)
		if err := checkTagName(d.Name); err != nil {
			add(at+".name", "%v", err)
		} else if names[d.Name] {
			add(at+".name", "duplicate alarm name %q", d.Name)
		}
		names[d.Name] = true
		switch d.Type {
		case AlarmHi, AlarmHiHi, AlarmLo, AlarmLoLo, AlarmState, AlarmStale:
			if err := checkTagName(d.Tag); err != nil {
				add(at+".tag", "%v", err)
			}
			if d.Station != "" {
				add(at+".station", "only for type comm")
			}
		case AlarmComm:
			if err := checkSegment(d.Station); err != nil {
				add(at+".station", "%v", err)
			}
			if d.Tag != "" {
				add(at+".tag", "not used by type comm (the station's comm tag is watched)")
			}
		default:
			add(at+".type", "unknown alarm type %q (want hi, hihi, lo, lolo, state, stale or comm)", d.Type)
		}
		if math.IsNaN(d.Limit) || math.IsInf(d.Limit, 0) || math.IsNaN(d.Value) || math.IsInf(d.Value, 0) {
			add(at+".limit", "limit and value must be finite")
		}
		if !(d.Deadband >= 0) || math.IsInf(d.Deadband, 0) {
			add(at+".deadband", "must be >= 0")
		}
		if d.Type == AlarmStale && d.MaxAge <= 0 {
			add(at+".max_age", "a stale alarm needs max_age > 0")
		}
		if d.OnDelay < 0 || d.OffDelay < 0 {
			add(at+".on_delay", "delays must be >= 0")
		}
		if d.Severity != "" && !contains(alarmSeverities, d.Severity) {
			add(at+".severity", "unknown severity %q (want %s)", d.Severity, strings.Join(alarmSeverities, ", "))
		}
	}
	for i, w := range a.Webhook {
		at := fmt.Sprintf("alarms.webhook[%d]", i)
		u, err := url.Parse(w.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add(at+".url", "want an http:// or https:// URL, got %q", w.URL)
		}
		if w.Timeout < 0 {
			add(at+".timeout", "must be >= 0")
		}
		for j, h := range w.Headers {
			if name, _, ok := strings.Cut(h, ":"); !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(h, "\r\n") {
				add(fmt.Sprintf("%s.headers[%d]", at, j), "want \"Name: value\", got %q", h)
			}
		}
		if w.Attempts < 0 || w.Attempts > 100 {
			add(at+".attempts", "want 0 to 100")
		}
	}
	if a.MQTT.Enabled && !strings.Contains(a.MQTT.Broker, "://") {
		add("alarms.mqtt.broker", "want a URL such as mqtt://127.0.0.1:1883, got %q", a.MQTT.Broker)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
