package config

import (
	"fmt"
	"strings"
)

// Sparkplug speaks MQTT Sparkplug B: host applications that archive what
// edge nodes publish ([[sparkplug.host]]), and edge nodes that publish
// Pith's tags ([[sparkplug.edge]]).
type Sparkplug struct {
	// Host lists the host applications.
	Host []SparkplugHost `toml:"host"`
	// Edge lists the edge nodes.
	Edge []SparkplugEdge `toml:"edge"`
}

// SparkplugHost subscribes to spBv1.0/<group>/# and archives the metrics
// edge nodes publish.
type SparkplugHost struct {
	// Name names the host in logs; unique among hosts and edge nodes.
	Name string `toml:"name"`
	// Broker is mqtt://host:port or tls://host:port.
	Broker string `toml:"broker"`
	// ClientID is the MQTT client id; "" is pith-sparkplug-<name>.
	ClientID string `toml:"client_id"`
	// Username and Password, when the broker wants them.
	Username string `toml:"username"`
	Password string `toml:"password"`
	// HostID is the id of the host's STATE messages
	// (spBv1.0/STATE/<host_id>); "" publishes none.
	HostID string `toml:"host_id"`
	// Groups are the group ids subscribed; "+" is every group (the default).
	Groups []string `toml:"groups"`
	// TagTemplate names the tags: dot-separated segments, each
	// {group}, {node}, {device}, {metric} or a literal; "" is
	// "{group}.{node}.{device}.{metric}".
	TagTemplate string `toml:"tag_template"`
	// Writable are patterns of the host's tags that the control path
	// (POST /api/v1/control, rules, schedules) may write back to their
	// edge nodes with NCMD or DCMD; none by default.
	Writable []string `toml:"writable"`
	// RebirthWait is the shortest time between two rebirth requests to
	// one edge node; 0 is 5s.
	RebirthWait Duration `toml:"rebirth_wait"`
}

// SparkplugEdge publishes tags as a Sparkplug B edge node.
type SparkplugEdge struct {
	// Name names the edge node in logs; unique among hosts and edge nodes.
	Name string `toml:"name"`
	// Broker is mqtt://host:port or tls://host:port.
	Broker string `toml:"broker"`
	// ClientID is the MQTT client id; "" is pith-sparkplug-<name>.
	ClientID string `toml:"client_id"`
	// Username and Password, when the broker wants them.
	Username string `toml:"username"`
	Password string `toml:"password"`
	// Group and Node are the Sparkplug group id and edge node id.
	Group string `toml:"group"`
	Node  string `toml:"node"`
	// Device, when set, publishes the tags as the metrics of this device
	// of the node (DBIRTH, DDATA, written by DCMD); "" publishes them as
	// node metrics.
	Device string `toml:"device"`
	// PrimaryHost is the host id whose STATE gates the births
	// (Sparkplug 3.0): births wait for its online STATE, and its offline
	// STATE ends the session (NDEATH); "" publishes at once.
	PrimaryHost string `toml:"primary_host"`
	// Tags are patterns of the tags published: '*' any run of
	// characters, '?' one; ["*"] is every tag.
	Tags []string `toml:"tags"`
	// Writable are patterns of the published tags a host may write with
	// an NCMD, through the control path; none by default.
	Writable []string `toml:"writable"`
	// Interval is the NDATA period: the changes within it go in one
	// message; 0 is 250ms.
	Interval Duration `toml:"interval"`
}

// checkSparkplugID checks a group, node or host id.
func checkSparkplugID(s string) error {
	if s == "" {
		return fmt.Errorf("empty id")
	}
	if strings.ContainsAny(s, "/+#") {
		return fmt.Errorf("id %q holds '/', '+' or '#'", s)
	}
	return nil
}

// checkTagTemplate checks a host's tag template.
func checkTagTemplate(tmpl string) error {
	hasMetric := false
	for _, seg := range strings.Split(tmpl, ".") {
		switch seg {
		case "{metric}":
			hasMetric = true
		case "{group}", "{node}", "{device}":
		default:
			if strings.ContainsAny(seg, "{}") {
				return fmt.Errorf("segment %q is not {group}, {node}, {device}, {metric} or a literal", seg)
			}
		}
	}
	if !hasMetric {
		return fmt.Errorf("template %q has no {metric}", tmpl)
	}
	return nil
}

func (s *Sparkplug) validate(add func(key, format string, args ...any)) {
	names := map[string]bool{}
	name := func(at, n string) {
		if err := checkSegment(n); err != nil {
			add(at+".name", "%v", err)
		} else if names[n] {
			add(at+".name", "name %q is used twice", n)
		}
		names[n] = true
	}
	broker := func(at, b string) {
		if !strings.Contains(b, "://") {
			add(at+".broker", "want a URL such as mqtt://127.0.0.1:1883, got %q", b)
		}
	}
	for i, h := range s.Host {
		at := fmt.Sprintf("sparkplug.host[%d]", i)
		name(at, h.Name)
		broker(at, h.Broker)
		for _, g := range h.Groups {
			if g == "+" {
				continue
			}
			if err := checkSparkplugID(g); err != nil {
				add(at+".groups", "group: %v", err)
			}
		}
		if h.HostID != "" {
			if err := checkSparkplugID(h.HostID); err != nil {
				add(at+".host_id", "%v", err)
			}
		}
		if h.TagTemplate != "" {
			if err := checkTagTemplate(h.TagTemplate); err != nil {
				add(at+".tag_template", "%v", err)
			}
		}
		for _, p := range h.Writable {
			if p == "" {
				add(at+".writable", "empty pattern")
			}
		}
		if h.RebirthWait < 0 {
			add(at+".rebirth_wait", "must not be negative")
		}
	}
	for i, e := range s.Edge {
		at := fmt.Sprintf("sparkplug.edge[%d]", i)
		name(at, e.Name)
		broker(at, e.Broker)
		if err := checkSparkplugID(e.Group); err != nil {
			add(at+".group", "%v", err)
		}
		if err := checkSparkplugID(e.Node); err != nil {
			add(at+".node", "%v", err)
		}
		if e.Device != "" {
			if err := checkSparkplugID(e.Device); err != nil {
				add(at+".device", "%v", err)
			}
		}
		if e.PrimaryHost != "" {
			if err := checkSparkplugID(e.PrimaryHost); err != nil {
				add(at+".primary_host", "%v", err)
			}
		}
		if len(e.Tags) == 0 {
			add(at+".tags", `no tag patterns (["*"] publishes every tag)`)
		}
		for _, p := range append(append([]string(nil), e.Tags...), e.Writable...) {
			if p == "" {
				add(at+".tags", "empty pattern")
			}
		}
		if e.Interval < 0 {
			add(at+".interval", "must not be negative")
		}
	}
}
