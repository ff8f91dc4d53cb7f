package config

import (
	"strings"
	"testing"
)

// opcuaStation is a valid station the cases below change one thing of.
const opcuaStation = `
[[opcua.client]]
name = "ua1"
endpoint = "opc.tcp://127.0.0.1:4840"
tags = [ { name = "ua1.speed", node = "ns=1;s=Speed", type = "Double" } ]
`

func TestOPCUADefaults(t *testing.T) {
	cfg, err := Parse([]byte(opcuaStation))
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.OPCUA.Clients[0]
	if c.SecurityPolicy != "None" || c.SecurityMode != "None" || c.Auth != "anonymous" || c.Timestamps != "source" ||
		c.PublishInterval != DefaultOPCUAPublishInterval || c.Timeout != DefaultOPCUATimeout {
		t.Errorf("station defaults: %+v", c)
	}
	tags, err := c.ExpandedTags()
	if err != nil {
		t.Fatal(err)
	}
	got := tags[0]
	if got.Type != OPCUADouble || got.Element != -1 || got.Read || got.QueueSize != 10 || got.Scale != 1 ||
		got.SamplingInterval != c.PublishInterval || got.ServerDeadband != "none" || got.Archive != ArchiveChange {
		t.Errorf("tag defaults: %+v", got)
	}
}

func TestOPCUAArrayExpands(t *testing.T) {
	cfg, err := Parse([]byte(strings.Replace(opcuaStation, `type = "Double" }`, `type = "float", count = 3, name = "ua1.t{i}" }`, 1)))
	if err == nil {
		t.Fatal("duplicate key name accepted")
	}
	cfg, err = Parse([]byte(strings.Replace(opcuaStation, `name = "ua1.speed"`, `name = "ua1.t{i}", count = 3`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	tags, _ := cfg.OPCUA.Clients[0].ExpandedTags()
	if len(tags) != 3 || tags[2].Name != "ua1.t2" || tags[2].Element != 2 {
		t.Errorf("got %+v", tags)
	}
}

func TestOPCUAValidation(t *testing.T) {
	for _, tt := range []struct {
		name, old, new, want string
	}{
		{"localized text", `type = "Double"`, `type = "LocalizedText"`, `opcua.client[0].tags[0].type: type LocalizedText is not read: only String`},
		{"string writable", `type = "Double"`, `type = "String", writable = true`, `tags[0].writable: does not apply to String: the control path`},
		{"string scale", `type = "Double"`, `type = "String", scale = 2.0`, `tags[0].scale: does not apply to String`},
		{"string deadband", `type = "Double"`, `type = "String", server_deadband = "absolute", server_deadband_value = 1.0`, `server_deadband: does not apply to String`},
		{"string archive deadband", `type = "Double"`, `type = "String", archive = "deadband", deadband = 1.0`, `archive: deadband does not apply to String`},
		{"unknown type", `type = "Double"`, `type = "DateTime"`, `unsupported type "DateTime"`},
		{"bad node", `node = "ns=1;s=Speed"`, `node = "ns=x;s=Speed"`, `tags[0].node: node id "ns=x;s=Speed": namespace index`},
		{"node kind", `node = "ns=1;s=Speed"`, `node = "ns=1;q=1"`, `unknown identifier type "q"`},
		{"endpoint", `opc.tcp://127.0.0.1:4840`, `http://x`, `opcua.client[0].endpoint: want an endpoint URL`},
		{"mode without policy", `name = "ua1"`, `name = "ua1"` + "\nsecurity_mode = \"Sign\"", `security_mode: security policy None has mode None`},
		{"policy without mode", `name = "ua1"`, `name = "ua1"` + "\nsecurity_policy = \"Basic256Sha256\"\ncertificate = \"c\"\nprivate_key = \"k\"\ntrust_dir = \"t\"", `needs mode Sign or SignAndEncrypt`},
		{"secure without cert", `name = "ua1"`, `name = "ua1"` + "\nsecurity_policy = \"Basic256Sha256\"\nsecurity_mode = \"Sign\"\ntrust_dir = \"t\"", `opcua.client[0].certificate: security policy Basic256Sha256`},
		{"secure without trust", `name = "ua1"`, `name = "ua1"` + "\nsecurity_policy = \"Basic256Sha256\"\nsecurity_mode = \"Sign\"\ncertificate = \"c\"\nprivate_key = \"k\"", `opcua.client[0].trust_dir: security policy Basic256Sha256 needs`},
		{"password in clear", `name = "ua1"`, `name = "ua1"` + "\nauth = \"username\"\nusername = \"u\"", `sends a password: use Basic256Sha256`},
		{"unknown policy", `name = "ua1"`, `name = "ua1"` + "\nsecurity_policy = \"Basic128Rsa15\"", `unknown policy "Basic128Rsa15"`},
		{"deadband on bool", `type = "Double"`, `type = "Boolean", server_deadband = "absolute", server_deadband_value = 1.0`, `server_deadband: does not apply to Boolean`},
		{"percent over 100", `type = "Double"`, `type = "Double", server_deadband = "percent", server_deadband_value = 150.0`, `at most 100 for percent`},
		{"queue", `type = "Double"`, `type = "Double", queue_size = 0`, `queue_size: must be 1..65536`},
		{"mode", `type = "Double"`, `type = "Double", mode = "poll"`, `unknown mode "poll"`},
		{"count without index", `type = "Double"`, `type = "Double", count = 2`, `needs "{i}" in the name`},
		{"no tags", `tags = [ { name = "ua1.speed", node = "ns=1;s=Speed", type = "Double" } ]`, `tags = []`, `opcua.client[0].tags: a station needs at least one tag`},
		{"unknown key", `type = "Double"`, `type = "Double", sampling = "1s"`, `opcua.client[0].tags[0].sampling: unknown key`},
	} {
		src := strings.Replace(opcuaStation, tt.old, tt.new, 1)
		_, err := Parse([]byte(src))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestOPCUANamesUniqueAcrossProtocols(t *testing.T) {
	src := opcuaStation + `
[[modbus.client]]
name = "ua1"
url = "tcp://127.0.0.1:502"
tags = [ { name = "ua1.speed", register = "holding:0", type = "uint16" } ]
`
	_, err := Parse([]byte(src))
	for _, want := range []string{`opcua.client[0].name: station "ua1" already defined at modbus.client[0]`, `opcua.client[0].tags[0].name: tag "ua1.speed" already defined`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want %q", err, want)
		}
	}
}

func TestCheckOPCUANodeID(t *testing.T) {
	for _, s := range []string{"i=2258", "ns=2;s=Line1.Speed", "ns=65535;i=4294967295", "nsu=urn:x:y;s=a;b", "ns=1;g=09087e75-8e5e-499b-954f-f2a9603db28a", "ns=1;b=AAEC"} {
		if err := CheckOPCUANodeID(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"", "2258", "ns=65536;i=1", "ns=1;i=-1", "ns=1;s=", "ns=1;g=xyz", "ns=1;b=!!", "ns=1", "nsu=;s=a"} {
		if err := CheckOPCUANodeID(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestOPCUAStringTag(t *testing.T) {
	cfg, err := Parse([]byte(strings.Replace(opcuaStation, `type = "Double"`, `type = "string", mode = "read", archive = "all"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	tags, err := cfg.OPCUA.Clients[0].ExpandedTags()
	if err != nil || len(tags) != 1 || tags[0].Type != OPCUAString || tags[0].Type.String() != "String" || tags[0].Archive != ArchiveAll {
		t.Fatalf("got %+v, %v", tags, err)
	}
}
