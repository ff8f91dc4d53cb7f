package config

import (
	"os"
	"reflect"
	"testing"

	"github.com/BurntSushi/toml"
)

// examplePath is the commented sample configuration shipped in the
// repository root.
const examplePath = "../../pith.example.toml"

func TestExampleFileValidates(t *testing.T) {
	cfg, err := Load(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Modbus.Clients) == 0 || len(cfg.Modbus.Servers) == 0 {
		t.Fatal("example has no Modbus client or server")
	}
	tags, err := cfg.Modbus.Clients[0].ExpandedTags()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(tags), 103; got != want {
		t.Errorf("example client expands to %d tags, want %d", got, want)
	}
	if _, err := cfg.Modbus.Servers[0].ExpandedRegisters(); err != nil {
		t.Fatal(err)
	}
}

// TestExampleFileHasEveryKey keeps the sample complete: a key added to Config
// without being documented in pith.example.toml fails here.
func TestExampleFileHasEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if _, err := toml.Decode(string(data), &tree); err != nil {
		t.Fatal(err)
	}
	present := make(map[string]bool)
	collectTreeKeys(present, "", tree)

	var schema []string
	collectSchemaKeys(&schema, "", reflect.TypeOf(Config{}))
	if len(schema) < 30 {
		t.Fatalf("schema walk found only %d keys: %v", len(schema), schema)
	}
	for _, k := range schema {
		if !present[k] {
			t.Errorf("key %s is missing from %s", k, examplePath)
		}
	}
}

// collectSchemaKeys lists the key paths of struct type t, array elements
// written without index ("modbus.client.tags.name").
func collectSchemaKeys(out *[]string, path string, t reflect.Type) {
	if t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == durationType {
		*out = append(*out, path)
		return
	}
	for name, f := range tomlFields(t) {
		collectSchemaKeys(out, joinKey(path, name), f.Type)
	}
}

// collectTreeKeys records the key paths present in a decoded tree, in the
// form collectSchemaKeys uses.
func collectTreeKeys(present map[string]bool, path string, v any) {
	switch v := v.(type) {
	case map[string]any:
		if path != "" {
			present[path] = true // a table-valued key (users.ldap.groups) is present with its table
		}
		for k, sub := range v {
			collectTreeKeys(present, joinKey(path, k), sub)
		}
	case []map[string]any:
		for _, sub := range v {
			collectTreeKeys(present, path, sub)
		}
	case []any:
		for _, sub := range v {
			collectTreeKeys(present, path, sub)
		}
	default:
		present[path] = true
	}
}
