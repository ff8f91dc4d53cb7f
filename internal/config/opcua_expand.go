package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
)

// OPCUAType is the data type of an OPC UA variable Pith reads. The values
// are the built-in type ids of the OPC UA specification (Part 6, 5.1.2).
type OPCUAType uint8

// The OPC UA types a tag can have.
const (
	OPCUABoolean OPCUAType = 1
	OPCUASByte   OPCUAType = 2
	OPCUAByte    OPCUAType = 3
	OPCUAInt16   OPCUAType = 4
	OPCUAUInt16  OPCUAType = 5
	OPCUAInt32   OPCUAType = 6
	OPCUAUInt32  OPCUAType = 7
	OPCUAInt64   OPCUAType = 8
	OPCUAUInt64  OPCUAType = 9
	OPCUAFloat   OPCUAType = 10
	OPCUADouble  OPCUAType = 11
	// OPCUAString is read into a text tag (one line of UTF-8, see
	// model.FitText for longer or multi-line strings).
	OPCUAString OPCUAType = 12
)

var opcuaTypeNames = map[OPCUAType]string{
	OPCUABoolean: "Boolean", OPCUASByte: "SByte", OPCUAByte: "Byte", OPCUAInt16: "Int16",
	OPCUAUInt16: "UInt16", OPCUAInt32: "Int32", OPCUAUInt32: "UInt32", OPCUAInt64: "Int64",
	OPCUAUInt64: "UInt64", OPCUAFloat: "Float", OPCUADouble: "Double", OPCUAString: "String",
}

// String returns the type's name in the specification's spelling.
func (t OPCUAType) String() string {
	if s, ok := opcuaTypeNames[t]; ok {
		return s
	}
	return "OPCUAType(" + strconv.Itoa(int(t)) + ")"
}

// ParseOPCUAType parses a type name, in any case. The other text types
// and the non-numeric ones are refused with a message saying why.
func ParseOPCUAType(s string) (OPCUAType, error) {
	for t, name := range opcuaTypeNames {
		if strings.EqualFold(s, name) {
			return t, nil
		}
	}
	switch strings.ToLower(s) {
	case "":
		return 0, errors.New("type is empty (want Boolean, SByte, Byte, Int16, UInt16, Int32, UInt32, Int64, UInt64, Float, Double or String)")
	case "localizedtext", "bytestring", "xmlelement":
		return 0, fmt.Errorf("type %s is not read: only String variables become text tags; leave this node out", s)
	}
	return 0, fmt.Errorf("unsupported type %q (want Boolean, SByte, Byte, Int16, UInt16, Int32, UInt32, Int64, UInt64, Float, Double or String)", s)
}

// OPCUATag is one value a station reads, defaults applied and arrays
// expanded.
type OPCUATag struct {
	// Name is the tag name, "{i}" replaced.
	Name string
	// Node is the variable's node id as written in the file.
	Node string
	// Type is the variable's data type.
	Type OPCUAType
	// Element is the array index of this tag's value, -1 for a scalar.
	Element int
	// Read is true for a cyclically read tag, false for a monitored one.
	Read bool
	// SamplingInterval, QueueSize, ServerDeadband and
	// ServerDeadbandValue set up the monitored item.
	SamplingInterval    Duration
	QueueSize           int
	ServerDeadband      string
	ServerDeadbandValue float64
	// Scale and Offset convert the raw value: value = raw*Scale + Offset.
	Scale  float64
	Offset float64
	// Unit, Description, Archive and Deadband are the tag's metadata and
	// archive policy.
	Unit        string
	Description string
	Archive     Archive
	Deadband    float64
	// Writable lets control writes reach the variable.
	Writable bool
	// Entry is the index in OPCUAClient.Tags of the entry this value came
	// from.
	Entry int
}

// ExpandedTags returns the station's tags with each count = N entry
// expanded into N array elements. A Config that validated has no errors.
func (c *OPCUAClient) ExpandedTags() ([]OPCUATag, error) {
	tags, errs := c.expandTags("tags")
	return tags, errors.Join(errs...)
}

func (c *OPCUAClient) expandTags(prefix string) ([]OPCUATag, []error) {
	var errs []error
	fail := func(key, format string, args ...any) {
		errs = append(errs, keyErrorf(key, format, args...))
	}
	var out []OPCUATag
	for j, spec := range c.Tags {
		path := prefix + "[" + strconv.Itoa(j) + "]"
		n := len(errs)
		if err := CheckOPCUANodeID(spec.Node); err != nil {
			fail(path+".node", "%v", err)
		}
		typ, err := ParseOPCUAType(spec.Type)
		if err != nil {
			fail(path+".type", "%v", err)
		}
		switch spec.Mode {
		case OPCUAModeSubscribe, OPCUAModeRead:
		default:
			fail(path+".mode", "unknown mode %q (want subscribe or read)", spec.Mode)
		}
		if spec.SamplingInterval < 0 {
			fail(path+".sampling_interval", "must not be negative (0s samples every change), got %s", spec.SamplingInterval)
		}
		if spec.QueueSize < 1 || spec.QueueSize > 1<<16 {
			fail(path+".queue_size", "must be 1..65536, got %d", spec.QueueSize)
		}
		switch spec.ServerDeadband {
		case OPCUADeadbandNone:
			if spec.ServerDeadbandValue != 0 {
				fail(path+".server_deadband_value", "needs server_deadband = \"absolute\" or \"percent\"")
			}
		case OPCUADeadbandAbsolute, OPCUADeadbandPercent:
			v := spec.ServerDeadbandValue
			if !(v > 0) || math.IsInf(v, 0) || (spec.ServerDeadband == OPCUADeadbandPercent && v > 100) {
				fail(path+".server_deadband_value", "must be > 0 (and at most 100 for percent), got %v", v)
			}
			if typ == OPCUABoolean || typ == OPCUAString {
				fail(path+".server_deadband", "does not apply to %s", typ)
			}
			if spec.Mode == OPCUAModeRead {
				fail(path+".server_deadband", "applies to monitored items, not to mode = \"read\"")
			}
		default:
			fail(path+".server_deadband", "unknown deadband %q (want none, absolute or percent)", spec.ServerDeadband)
		}
		if typ == OPCUAString {
			// A text tag: no arithmetic, no numeric filter, and no write
			// (the control path carries numbers).
			if spec.ServerDeadband != OPCUADeadbandNone {
				fail(path+".server_deadband", "does not apply to String")
			}
			if spec.Writable {
				fail(path+".writable", "does not apply to String: the control path (POST /api/v1/control, rules, schedules) writes numbers")
			}
		}
		if typ == OPCUABoolean || typ == OPCUAString {
			if spec.Scale != 1 {
				fail(path+".scale", "does not apply to %s", typ)
			}
			if spec.Offset != 0 {
				fail(path+".offset", "does not apply to %s", typ)
			}
		} else {
			if spec.Scale == 0 || math.IsNaN(spec.Scale) || math.IsInf(spec.Scale, 0) {
				fail(path+".scale", "must be a finite number other than 0")
			}
			if math.IsNaN(spec.Offset) || math.IsInf(spec.Offset, 0) {
				fail(path+".offset", "must be a finite number")
			}
		}
		if spec.Count < 1 || spec.Count > maxOPCUAArray {
			fail(path+".count", "must be 1..%d, got %d", maxOPCUAArray, spec.Count)
		}
		archive, err := parseArchive(spec.Archive)
		if err != nil {
			fail(path+".archive", "%v", err)
		}
		switch {
		case archive == ArchiveDeadband && (typ == OPCUABoolean || typ == OPCUAString):
			fail(path+".archive", "deadband does not apply to %s", typ)
		case archive == ArchiveDeadband && !(spec.Deadband > 0 && !math.IsInf(spec.Deadband, 0)):
			fail(path+".deadband", "must be a finite number > 0 with archive = \"deadband\"")
		case archive != ArchiveDeadband && spec.Deadband != 0:
			fail(path+".deadband", "needs archive = \"deadband\"")
		}
		names, namesOK := expandName(&errs, path+".name", spec.Name, spec.Count)
		if len(errs) > n || !namesOK {
			continue
		}
		for i, name := range names {
			el := i
			if spec.Count == 1 {
				el = -1
			}
			out = append(out, OPCUATag{
				Name: name, Node: spec.Node, Type: typ, Element: el, Read: spec.Mode == OPCUAModeRead,
				SamplingInterval: spec.SamplingInterval, QueueSize: spec.QueueSize,
				ServerDeadband: spec.ServerDeadband, ServerDeadbandValue: spec.ServerDeadbandValue,
				Scale: spec.Scale, Offset: spec.Offset, Unit: spec.Unit, Description: spec.Description,
				Archive: archive, Deadband: spec.Deadband, Writable: spec.Writable, Entry: j,
			})
		}
	}
	return out, errs
}

// CheckOPCUANodeID checks a node id in the string form of the OPC UA
// specification (Part 6, 5.3.1.10): an optional "ns=INDEX;" or
// "nsu=URI;" followed by "i=NUMBER", "s=STRING", "g=GUID" or
// "b=BASE64".
func CheckOPCUANodeID(s string) error {
	if s == "" {
		return errors.New("node id is empty (want a form such as ns=2;s=Line1.Speed or ns=1;i=1001)")
	}
	rest := s
	if strings.HasPrefix(rest, "ns=") || strings.HasPrefix(rest, "nsu=") {
		ns, id, ok := strings.Cut(rest, ";")
		if !ok {
			return fmt.Errorf("node id %q: want ';' after the namespace", s)
		}
		if v, isIndex := strings.CutPrefix(ns, "ns="); isIndex {
			if _, err := strconv.ParseUint(v, 10, 16); err != nil {
				return fmt.Errorf("node id %q: namespace index %q is not 0..65535", s, v)
			}
		} else if u := strings.TrimPrefix(ns, "nsu="); u == "" {
			return fmt.Errorf("node id %q: empty namespace URI", s)
		} else if _, err := url.Parse(u); err != nil {
			return fmt.Errorf("node id %q: namespace URI: %v", s, err)
		}
		rest = id
	}
	kind, v, ok := strings.Cut(rest, "=")
	if !ok {
		return fmt.Errorf("node id %q: want i=, s=, g= or b= after the namespace", s)
	}
	switch kind {
	case "i":
		if _, err := strconv.ParseUint(v, 10, 32); err != nil {
			return fmt.Errorf("node id %q: numeric identifier %q is not 0..4294967295", s, v)
		}
	case "s":
		if v == "" {
			return fmt.Errorf("node id %q: empty string identifier", s)
		}
	case "g":
		if !isGUID(v) {
			return fmt.Errorf("node id %q: %q is not a GUID (want 8-4-4-4-12 hex digits)", s, v)
		}
	case "b":
		if _, err := base64.StdEncoding.DecodeString(v); err != nil || v == "" {
			return fmt.Errorf("node id %q: %q is not base64", s, v)
		}
	default:
		return fmt.Errorf("node id %q: unknown identifier type %q (want i, s, g or b)", s, kind)
	}
	return nil
}

func isGUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
	}
	return true
}

// validate checks the OPC UA stations; stations and tagNames carry the
// names the Modbus stations already took, so that names are unique across
// protocols.
func (o *OPCUA) validate(stations, tagNames map[string]string) []error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, keyErrorf(key, format, args...))
	}
	for i := range o.Clients {
		c := &o.Clients[i]
		path := "opcua.client[" + strconv.Itoa(i) + "]"
		if err := checkSegment(c.Name); err != nil {
			add(path+".name", "%v", err)
		} else if first, dup := stations[c.Name]; dup {
			add(path+".name", "station %q already defined at %s", c.Name, first)
		} else {
			stations[c.Name] = path
		}
		if u, err := url.Parse(c.Endpoint); err != nil || u.Scheme != "opc.tcp" || u.Host == "" {
			add(path+".endpoint", "want an endpoint URL such as opc.tcp://192.168.1.10:4840, got %q", c.Endpoint)
		}
		secure := false
		switch c.SecurityPolicy {
		case OPCUAPolicyNone:
			if c.SecurityMode != OPCUAModeNone {
				add(path+".security_mode", "security policy None has mode None, not %q", c.SecurityMode)
			}
		case OPCUAPolicyBasic256Sha256:
			secure = true
			if c.SecurityMode != OPCUAModeSign && c.SecurityMode != OPCUAModeSignAndEncrypt {
				add(path+".security_mode", "security policy Basic256Sha256 needs mode Sign or SignAndEncrypt, got %q", c.SecurityMode)
			}
		default:
			add(path+".security_policy", "unknown policy %q (want None or Basic256Sha256)", c.SecurityPolicy)
		}
		switch c.Auth {
		case OPCUAAuthAnonymous:
			if c.Username != "" || c.Password != "" {
				add(path+".username", "needs auth = \"username\"")
			}
		case OPCUAAuthUsername:
			if c.Username == "" {
				add(path+".username", "required with auth = \"username\"")
			}
			if !secure {
				// The password would cross the network as plain text
				// unless the server encrypts it with its own policy; say
				// so rather than guess.
				add(path+".security_policy", "auth = \"username\" sends a password: use Basic256Sha256")
			}
		case OPCUAAuthCertificate:
		default:
			add(path+".auth", "unknown identity %q (want anonymous, username or certificate)", c.Auth)
		}
		needCert := secure || c.Auth == OPCUAAuthCertificate
		if needCert && (c.Certificate == "" || c.PrivateKey == "") {
			add(path+".certificate", "security policy %s and auth %s need Pith's application certificate and key (certificate and private_key; `pith cert` makes them)", c.SecurityPolicy, c.Auth)
		}
		if !needCert && (c.Certificate != "" || c.PrivateKey != "") {
			add(path+".certificate", "only used with security policy Basic256Sha256 or auth = \"certificate\"")
		}
		if secure && c.TrustDir == "" && !c.InsecureTrustAnyServer {
			add(path+".trust_dir", "security policy %s needs the server's certificate in a trust directory (or insecure_trust_any_server = true)", c.SecurityPolicy)
		}
		if c.Timestamps != OPCUATimestampSource && c.Timestamps != OPCUATimestampServer {
			add(path+".timestamps", "unknown choice %q (want source or server)", c.Timestamps)
		}
		if c.PublishInterval < Duration(10*1e6) {
			add(path+".publish_interval", "must be at least 10ms, got %s", c.PublishInterval)
		}
		if c.ReadPeriod < Duration(10*1e6) {
			add(path+".read_period", "must be at least 10ms, got %s", c.ReadPeriod)
		}
		if c.Timeout <= 0 {
			add(path+".timeout", "must be > 0, got %s", c.Timeout)
		}
		if c.RetryPause <= 0 {
			add(path+".retry_pause", "must be > 0, got %s", c.RetryPause)
		}
		if len(c.Tags) == 0 {
			add(path+".tags", "a station needs at least one tag")
		}
		tags, tagErrs := c.expandTags(path + ".tags")
		errs = append(errs, tagErrs...)
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
	return errs
}
