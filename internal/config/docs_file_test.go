package config

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"testing"
)

// docsPath is the configuration reference in the repository's docs.
const docsPath = "../../docs/config.md"

// docKeyRow matches a table row of docs/config.md that documents a key:
// its first cell is the full key path in backquotes, array elements
// without index ("| `modbus.client.tags.name` | ...").
var docKeyRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")

// documentedKeys returns the key paths docs/config.md documents, in the
// order they appear.
func documentedKeys(doc string) []string {
	var keys []string
	for _, m := range docKeyRow.FindAllStringSubmatch(doc, -1) {
		keys = append(keys, m[1])
	}
	return keys
}

func TestDocumentedKeysParse(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		want      []string
	}{
		{"row", "| `site.name` | string | `\"site1\"` | Name. |\n", []string{"site.name"}},
		{"header and rule", "| key | type | default | meaning |\n|---|---|---|---|\n", nil},
		{"prose mention", "The key `http.listen` is set by a flag.\n", nil},
		{"two rows", "| `a.b` | x |\n| `a.c` | y |\n", []string{"a.b", "a.c"}},
	} {
		if got := documentedKeys(tt.doc); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestDocsFileHasEveryKey keeps docs/config.md exact: a key added to Config
// without a row there fails, and so does a row naming a key Config does not
// have (renamed or removed), or a key documented twice.
func TestDocsFileHasEveryKey(t *testing.T) {
	data, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatal(err)
	}
	var schema []string
	collectSchemaKeys(&schema, "", reflect.TypeOf(Config{}))
	if len(schema) < 30 {
		t.Fatalf("schema walk found only %d keys: %v", len(schema), schema)
	}
	known := make(map[string]bool, len(schema))
	for _, k := range schema {
		known[k] = true
	}
	documented := make(map[string]bool)
	for _, k := range documentedKeys(string(data)) {
		if documented[k] {
			t.Errorf("key %s is documented twice in %s", k, docsPath)
		}
		documented[k] = true
		if !known[k] {
			t.Errorf("%s documents key %s, which the config does not have", docsPath, k)
		}
	}
	for _, k := range schema {
		if !documented[k] {
			t.Errorf("key %s is missing from %s", k, docsPath)
		}
	}
}
