package config

import (
	"strings"
	"testing"
)

// TestSparkplugValidate checks the Sparkplug sections' validation, each
// error naming its key path.
func TestSparkplugValidate(t *testing.T) {
	const host = "[[sparkplug.host]]\nname = \"h\"\nbroker = \"mqtt://127.0.0.1:1883\"\n"
	const edge = "[[sparkplug.edge]]\nname = \"e\"\nbroker = \"mqtt://127.0.0.1:1883\"\ngroup = \"G\"\nnode = \"N\"\ntags = [\"*\"]\n"
	for _, tc := range []struct {
		name, toml, err string // err "" means valid
	}{
		{"host and edge", host + "groups = [\"+\", \"Plant 1\"]\nhost_id = \"pith\"\ntag_template = \"sp.{node}.{metric}\"\nrebirth_wait = \"1s\"\n" + edge + "writable = [\"a.*\"]\ninterval = \"1s\"\n", ""},
		{"name twice", host + strings.Replace(edge, `name = "e"`, `name = "h"`, 1), "sparkplug.edge[0].name"},
		{"no broker url", strings.Replace(host, "mqtt://", "", 1), "sparkplug.host[0].broker"},
		{"bad group", host + "groups = [\"a/b\"]\n", "sparkplug.host[0].groups"},
		{"bad host id", host + "host_id = \"#\"\n", "sparkplug.host[0].host_id"},
		{"template without metric", host + "tag_template = \"{group}.{node}\"\n", "sparkplug.host[0].tag_template"},
		{"template with unknown field", host + "tag_template = \"{site}.{metric}\"\n", "sparkplug.host[0].tag_template"},
		{"edge without node", strings.Replace(edge, "node = \"N\"\n", "", 1), "sparkplug.edge[0].node"},
		{"edge without tags", strings.Replace(edge, "tags = [\"*\"]\n", "", 1), "sparkplug.edge[0].tags"},
		{"unknown key", host + "group = \"x\"\n", "sparkplug.host"},
	} {
		_, err := Parse([]byte(tc.toml))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.err)
		}
	}
}
