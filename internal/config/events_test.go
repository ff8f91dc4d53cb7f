package config

import (
	"strings"
	"testing"
)

func TestEventsConfig(t *testing.T) {
	tests := []struct {
		name, toml, err string
	}{
		{"defaults", "", ""},
		{"csv zstd", "[events]\nformat = \"csv\"\ncompression = \"zstd\"\n", ""},
		{"bad format", "[events]\nformat = \"xml\"\n", "events.format"},
		{"bad compression", "[events]\ncompression = \"lz4\"\n", "events.compression"},
		{"s3", "[events.s3]\nendpoint = \"127.0.0.1:9000\"\nbucket = \"b\"\n", ""},
		{"s3 without bucket", "[events.s3]\nendpoint = \"127.0.0.1:9000\"\n", "events.s3.bucket"},
		{"s3 with scheme", "[events.s3]\nendpoint = \"http://127.0.0.1:9000\"\nbucket = \"b\"\n", "events.s3.endpoint"},
		{"nats", "[events.nats]\nurl = \"nats://127.0.0.1:4222\"\n", ""},
		{"nats bad url", "[events.nats]\nurl = \"127.0.0.1:4222\"\n", "events.nats.url"},
		{"nats bad bucket", "[events.nats]\nurl = \"nats://127.0.0.1:4222\"\nbucket = \"a.b\"\n", "events.nats.bucket"},
		{"both", "[events.s3]\nendpoint = \"127.0.0.1:9000\"\nbucket = \"b\"\n[events.nats]\nurl = \"nats://127.0.0.1:4222\"\n", "not both"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.toml))
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("error %v, want one about %s", err, tt.err)
			}
		})
	}
}
