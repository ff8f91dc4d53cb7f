package config

import (
	"strings"
	"testing"
)

// TestForwardValidate checks the forwarders' and central mode's
// validation, each error naming its key path.
func TestForwardValidate(t *testing.T) {
	for _, tc := range []struct {
		name, toml, err string // err "" means valid
	}{
		{"all kinds", `
[[forward.nats]]
name = "a"
url = "nats://127.0.0.1:4222,nats://127.0.0.1:4223"
[[forward.postgres]]
name = "b"
url = "postgres://postgres@127.0.0.1:5432/test"
table = "public.pith_samples"
max_bytes = 1000
max_age = "1h"
overflow = "drop_oldest"
[[forward.mqtt]]
name = "c"
url = "tcp://127.0.0.1:1883"
prefix = "pith/site1"
[[forward.http]]
name = "d"
url = "http://127.0.0.1:8081"
key = "k"
`, ""},
		{"name shared across kinds", `
[[forward.nats]]
name = "x"
url = "nats://127.0.0.1:4222"
[[forward.http]]
name = "x"
url = "http://127.0.0.1:8081"
`, `forward.http[0].name: forwarder "x" already defined at forward.nats[0]`},
		{"bad name", `
[[forward.nats]]
name = "a.b"
url = "nats://127.0.0.1:4222"
`, "forward.nats[0].name: name \"a.b\""},
		{"bad overflow", `
[[forward.mqtt]]
name = "m"
url = "tcp://127.0.0.1:1883"
prefix = "p"
overflow = "block"
`, `forward.mqtt[0].overflow: unknown policy "block"`},
		{"reject_new refused", `
[[forward.http]]
name = "h"
url = "http://127.0.0.1:8081"
overflow = "reject_new"
`, `forward.http[0].overflow: "reject_new" no longer applies`},
		{"negative max_bytes", `
[[forward.nats]]
name = "n"
url = "nats://127.0.0.1:4222"
max_bytes = -1
`, "forward.nats[0].max_bytes: must not be negative"},
		{"negative store.forward_max_bytes", `
[store]
forward_max_bytes = -1
`, "store.forward_max_bytes: must not be negative"},
		{"mqtt wildcard prefix", `
[[forward.mqtt]]
name = "m"
url = "tcp://127.0.0.1:1883"
prefix = "a/#"
`, "forward.mqtt[0].prefix"},
		{"postgres table", `
[[forward.postgres]]
name = "p"
url = "postgres://x@127.0.0.1/db"
table = "drop table;"
`, "forward.postgres[0].table"},
		{"http url", `
[[forward.http]]
name = "h"
url = "127.0.0.1:8081"
`, "forward.http[0].url"},
		{"central", `
[central]
nats = "nats://127.0.0.1:4222"
`, ""},
		{"central off ignores the rest", `
[central]
durable = ""
workers = 0
`, ""},
		{"central subject", `
[central]
nats = "nats://127.0.0.1:4222"
subjects = ["pith.>"]
`, `central.subjects[0]: want pith.<site>.samples`},
		{"central durable", `
[central]
nats = "nats://127.0.0.1:4222"
durable = "a.b"
`, "central.durable"},
		{"central url", `
[central]
nats = "http://127.0.0.1:4222"
`, "central.nats"},
		{"central workers", `
[central]
nats = "nats://127.0.0.1:4222"
workers = 0
`, "central.workers"},
		{"central partitioned", `
[central]
nats = "nats://127.0.0.1:4222"
partitions = 3
partition = 2
url = "https://central3.example:8080"
`, ""},
		{"central partition past partitions", `
[central]
nats = "nats://127.0.0.1:4222"
partitions = 3
partition = 3
`, "central.partition: want 0 to partitions-1 (2), got 3"},
		{"central partition without partitions", `
[central]
nats = "nats://127.0.0.1:4222"
partition = 1
`, "central.partition"},
		{"central negative partitions", `
[central]
nats = "nats://127.0.0.1:4222"
partitions = -1
`, "central.partitions"},
		{"central directory", `
[central]
nats = "nats://127.0.0.1:4222"
directory = "a.b"
`, "central.directory"},
		{"central url scheme", `
[central]
nats = "nats://127.0.0.1:4222"
url = "central3:8080"
`, "central.url"},
		{"postgres partition", `
[[forward.postgres]]
name = "p"
url = "postgres://x@127.0.0.1/db"
table = "t"
partition = "hour"
`, "forward.postgres[0].partition"},
		{"postgres partition day", `
[[forward.postgres]]
name = "p"
url = "postgres://x@127.0.0.1/db"
table = "t"
partition = "day"
`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.toml))
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("got error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// TestCentralPartitionSubjects: a partitioned central consumes its
// partition's subject under a durable of its own; an unsplit one its
// subjects under its durable.
func TestCentralPartitionSubjects(t *testing.T) {
	c := DefaultCentral()
	if got := c.EffectiveSubjects(); len(got) != 1 || got[0] != DefaultCentralSubjects || c.EffectiveDurable() != "central" {
		t.Errorf("unsplit: %v %q", got, c.EffectiveDurable())
	}
	c.Partitions, c.Partition = 3, 2
	if got := c.EffectiveSubjects(); len(got) != 1 || got[0] != "pith.*.samples.2" || c.EffectiveDurable() != "central-p2" {
		t.Errorf("partition 2 of 3: %v %q", got, c.EffectiveDurable())
	}
}

// TestCentralDefaults checks that [central] is off by default with usable
// defaults for the rest.
func TestCentralDefaults(t *testing.T) {
	c := Default().Central
	if c.NATS != "" || c.Durable != DefaultCentralDurable || c.Workers != DefaultCentralWorkers || len(c.Subjects) != 1 || c.Subjects[0] != DefaultCentralSubjects {
		t.Errorf("default central = %+v", c)
	}
}
