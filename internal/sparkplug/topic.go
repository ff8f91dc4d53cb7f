package sparkplug

import (
	"fmt"
	"strings"
)

// Namespace is the first level of every Sparkplug B topic.
const Namespace = "spBv1.0"

// MsgType is a Sparkplug message type, the third topic level.
type MsgType uint8

// The message types.
const (
	MsgUnknown MsgType = iota
	NBIRTH
	NDEATH
	DBIRTH
	DDEATH
	NDATA
	DDATA
	NCMD
	DCMD
	STATE
)

var msgNames = [...]string{"?", "NBIRTH", "NDEATH", "DBIRTH", "DDEATH", "NDATA", "DDATA", "NCMD", "DCMD", "STATE"}

func (t MsgType) String() string {
	if int(t) < len(msgNames) {
		return msgNames[t]
	}
	return "?"
}

func parseMsgType(s string) MsgType {
	for i, n := range msgNames {
		if i > 0 && n == s {
			return MsgType(i)
		}
	}
	return MsgUnknown
}

// Topic is a parsed Sparkplug B topic:
// spBv1.0/<group>/<type>/<node>[/<device>], or spBv1.0/STATE/<host>.
type Topic struct {
	Group  string
	Type   MsgType
	Node   string
	Device string // "" for node messages
	Host   string // STATE only
}

// ParseTopic splits a Sparkplug B topic. A device message must name a
// device and a node message must not.
func ParseTopic(s string) (Topic, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 3 || parts[0] != Namespace {
		return Topic{}, fmt.Errorf("topic %q is not spBv1.0/<group>/<type>/<node>[/<device>]", s)
	}
	if parts[1] == "STATE" && len(parts) == 3 {
		return Topic{Type: STATE, Host: parts[2]}, nil
	}
	t := Topic{Group: parts[1], Type: parseMsgType(parts[2])}
	switch {
	case t.Type == MsgUnknown || t.Type == STATE:
		return Topic{}, fmt.Errorf("topic %q: unknown message type %q", s, parts[2])
	case t.Type.device() && len(parts) != 5, !t.Type.device() && len(parts) != 4:
		return Topic{}, fmt.Errorf("topic %q: %s wants %d levels", s, t.Type, map[bool]int{true: 5, false: 4}[t.Type.device()])
	}
	t.Node = parts[3]
	if len(parts) == 5 {
		t.Device = parts[4]
	}
	if t.Group == "" || t.Node == "" || (t.Type.device() && t.Device == "") {
		return Topic{}, fmt.Errorf("topic %q: empty group, node or device", s)
	}
	return t, nil
}

func (t MsgType) device() bool { return t == DBIRTH || t == DDEATH || t == DDATA || t == DCMD }

// String returns the topic.
func (t Topic) String() string {
	if t.Type == STATE {
		return Namespace + "/STATE/" + t.Host
	}
	s := Namespace + "/" + t.Group + "/" + t.Type.String() + "/" + t.Node
	if t.Device != "" {
		s += "/" + t.Device
	}
	return s
}

// CheckID checks a group, node, device or host id: not empty, and free of
// the characters MQTT reserves in topics.
func CheckID(s string) error {
	if s == "" {
		return fmt.Errorf("empty id")
	}
	if strings.ContainsAny(s, "/+#") {
		return fmt.Errorf("id %q holds '/', '+' or '#'", s)
	}
	return nil
}
