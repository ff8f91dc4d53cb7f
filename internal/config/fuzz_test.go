package config

import (
	"os"
	"testing"
)

// FuzzParse feeds Parse arbitrary files. It must never panic, and whatever it
// accepts must validate again and expand without error, since the rest of
// Pith relies on a parsed Config being usable as is.
//
// Run: go test ./internal/config -run '^$' -fuzz FuzzParse -fuzztime 60s -fuzzminimizetime 5s
// (large seeds make the default minimization slow; it shows as 0 execs/s).
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(examplePath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(""))
	f.Add([]byte(station(`{ name = "s.r{i}", register = "holding:65500", type = "float64", count = 9 }`)))
	f.Add([]byte(server(`{ register = "holding:0", tag = "x{i}", type = "uint16", count = 10 },
{ register = "holding:8", tag = "y", type = "float32" }`)))
	f.Add([]byte("[[modbus.client]]\nname = \"a\"\nurl = \"rtu:///dev/ttyS0?baud=9600&parity=N\"\nunit = 3\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
		for i := range cfg.Modbus.Clients {
			if _, err := cfg.Modbus.Clients[i].ExpandedTags(); err != nil {
				t.Fatalf("client %d: %v", i, err)
			}
			if _, err := cfg.Modbus.Clients[i].Endpoint(); err != nil {
				t.Fatalf("client %d: %v", i, err)
			}
		}
		for i := range cfg.Modbus.Servers {
			if _, err := cfg.Modbus.Servers[i].ExpandedRegisters(); err != nil {
				t.Fatalf("server %d: %v", i, err)
			}
		}
	})
}
