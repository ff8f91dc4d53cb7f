package config

import (
	"strings"
	"testing"
)

func TestProcessConfig(t *testing.T) {
	cases := []struct {
		name string
		toml string
		err  string // "" when valid
	}{
		{"example chain", `[[input]]
tag = "house.power"
process = [ { scale = 0.001 }, { allow_positive = true }, { power_to_kwh = "house.energy_kwh", max_gap = "5m" }, { kwh_per_day = "house.kwh_day", tz = "Europe/London" } ]
[[calc]]
tag = "hx.power_kw"
expr = "(hx.t_out - hx.t_in) * hx.flow * 4.186"
period = "0s"`, ""},
		{"integer scale", `[[input]]
tag = "a.b"
process = [ { scale = 2 } ]`, ""},
		{"two actions", `[[input]]
tag = "a.b"
process = [ { scale = 2.0, offset = 1.0 } ]`, "input[0].process[0]: want exactly one"},
		{"no action", `[[input]]
tag = "a.b"
process = [ { tz = "UTC" } ]`, "input[0].process[0]: want exactly one"},
		{"unknown step key", `[[input]]
tag = "a.b"
process = [ { scael = 2.0 } ]`, "input[0].process[0].scael: unknown key"},
		{"unknown zone", `[[input]]
tag = "a.b"
process = [ { kwh_per_day = "d", tz = "Mars/Olympus" } ]`, "input[0].process[0].tz: unknown time zone"},
		{"max_gap misplaced", `[[input]]
tag = "a.b"
process = [ { scale = 1.0, max_gap = "1m" } ]`, "input[0].process[0].max_gap: only for"},
		{"output twice", `[[input]]
tag = "a.b"
process = [ { log = "x.y" } ]
[[calc]]
tag = "x.y"
expr = "1"
period = "1s"`, "calc[0].tag: tag \"x.y\" is already written by input[0].process[0].log"},
		{"writes own input", `[[input]]
tag = "a.b"
process = [ { log = "a.b" } ]`, "writes its own input"},
		{"duplicate input", `[[input]]
tag = "a.b"
process = [ { scale = 1.0 } ]
[[input]]
tag = "a.b"
process = [ { scale = 1.0 } ]`, "input[1].tag: tag \"a.b\" already has a chain"},
		{"empty chain", `[[input]]
tag = "a.b"
process = []`, "input[0].process: want 1 to 64 steps"},
		{"false allow", `[[input]]
tag = "a.b"
process = [ { allow_positive = false } ]`, "only true is meaningful"},
		{"empty expr", `[[calc]]
tag = "a.b"
expr = " "`, "calc[0].expr: empty expression"},
		{"short period", `[[calc]]
tag = "a.b"
expr = "c"
period = "1ms"`, "calc[0].period"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.toml))
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if len(cfg.Input) > 0 && cfg.Input[0].Process[0].Scale != nil && *cfg.Input[0].Process[0].Scale == 0 {
					t.Fatal("scale decoded as 0")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, want an error containing %q", err, tc.err)
			}
		})
	}
}
