package config

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// keyErrors flattens the *KeyError values of a (possibly joined) error.
func keyErrors(err error) []*KeyError {
	var out []*KeyError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if ke, ok := err.(*KeyError); ok {
			out = append(out, ke)
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

func TestDefaultValidates(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	cfg, err := Parse(nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := *cfg, *Default(); got.Store != want.Store || !reflect.DeepEqual(got.HTTP, want.HTTP) || got.Log != want.Log || got.Site != want.Site {
		t.Errorf("Parse(empty) = %+v, want %+v", got, want)
	}
}

func TestParseGood(t *testing.T) {
	tests := []struct {
		name  string
		toml  string
		check func(t *testing.T, c *Config)
	}{
		{
			name: "store overrides keep other defaults",
			toml: "[store]\ndurability = \"relaxed\"\ncommit_interval = \"250ms\"\nretention_raw = \"8760h\"\n",
			check: func(t *testing.T, c *Config) {
				s := c.Store
				if s.Durability != DurabilityRelaxed || s.CommitInterval.Std() != 250*time.Millisecond ||
					s.RetentionRaw.Std() != 8760*time.Hour || s.Dir != DefaultStoreDir || s.HeadMaxAge != DefaultHeadMaxAge {
					t.Errorf("store = %+v", s)
				}
			},
		},
		{
			name: "log level",
			toml: "[log]\nlevel = \"debug\"\n",
			check: func(t *testing.T, c *Config) {
				if c.Log.SlogLevel() != slog.LevelDebug {
					t.Errorf("SlogLevel = %v", c.Log.SlogLevel())
				}
			},
		},
		{
			name: "client element defaults",
			toml: "[[modbus.client]]\nname = \"a\"\nurl = \"tcp://h:1\"\ntags = [{ name = \"a.x\", register = \"input:3\", type = \"int32\" }]\n",
			check: func(t *testing.T, c *Config) {
				cl := c.Modbus.Clients[0]
				if cl.Unit != 1 || cl.Period.Std() != time.Second || cl.Timeout.Std() != time.Second || cl.Pause != 0 {
					t.Errorf("client = %+v", cl)
				}
				if got, want := cl.Tags[0], (ModbusTagSpec{Name: "a.x", Register: "input:3", Type: "int32", Order: "ABCD", Count: 1, Scale: 1, Archive: "change"}); got != want {
					t.Errorf("tag = %+v, want %+v", got, want)
				}
			},
		},
		{
			name: "explicit zeros are kept",
			toml: "[[modbus.client]]\nname = \"a\"\nurl = \"tcp://h\"\nunit = 0\nperiod = \"0s\"\n",
			check: func(t *testing.T, c *Config) {
				if cl := c.Modbus.Clients[0]; cl.Unit != 0 || cl.Period != 0 {
					t.Errorf("client = %+v", cl)
				}
			},
		},
		{
			name: "integer scale is accepted",
			toml: "[[modbus.client]]\nname = \"a\"\nurl = \"tcp://h\"\ntags = [{ name = \"a.x\", register = \"holding:0\", type = \"int16\", scale = 10 }]\n",
			check: func(t *testing.T, c *Config) {
				if c.Modbus.Clients[0].Tags[0].Scale != 10 {
					t.Errorf("scale = %v", c.Modbus.Clients[0].Tags[0].Scale)
				}
			},
		},
		{
			name: "two stations share a serial bus",
			toml: "[[modbus.client]]\nname = \"a\"\nurl = \"rtu:///dev/ttyUSB0?baud=9600&parity=N\"\n" +
				"[[modbus.client]]\nname = \"b\"\nunit = 2\nurl = \"rtu:///dev/ttyUSB0?parity=N&baud=9600\"\n",
			check: func(t *testing.T, c *Config) {
				ep, err := c.Modbus.Clients[1].Endpoint()
				if err != nil || ep.Baud != 9600 || ep.Parity != 'N' {
					t.Errorf("Endpoint() = %+v, %v", ep, err)
				}
			},
		},
		{
			name: "server register defaults",
			toml: "[[modbus.server]]\nlisten = \":5502\"\nallow_remote_writes = true\nregisters = [{ register = \"coil:0\", tag = \"x.b{i}\", type = \"bool\", count = 16, writable = true }]\n",
			check: func(t *testing.T, c *Config) {
				if !c.Modbus.Servers[0].AllowRemoteWrites {
					t.Error("allow_remote_writes = true not read")
				}
				if got, want := c.Modbus.Servers[0].Registers[0], (ModbusRegisterSpec{Register: "coil:0", Tag: "x.b{i}", Type: "bool", Order: "ABCD", Count: 16, Scale: 1, Writable: true}); got != want {
					t.Errorf("register = %+v, want %+v", got, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.toml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tt.check(t, c)
		})
	}
}

// station prefixes a tags array with a valid station, for bad-tag cases.
func station(tags string) string {
	return "[[modbus.client]]\nname = \"s\"\nurl = \"tcp://127.0.0.1:502\"\ntags = [\n" + tags + "\n]\n"
}

// server prefixes a registers array with a valid server.
func server(regs string) string {
	return "[[modbus.server]]\nlisten = \"127.0.0.1:5502\"\nregisters = [\n" + regs + "\n]\n"
}

func TestParseBad(t *testing.T) {
	const okTag = `{ name = "s.ok", register = "holding:0", type = "uint16" },`
	tests := []struct {
		name    string
		toml    string
		wantKey string // exact key path of one of the errors
		wantMsg string // part of that error's message
	}{
		{"unknown top key", "[sitee]\nname = \"x\"\n", "sitee", "unknown key"},
		{"unknown key in section", "[store]\ndurabilty = \"fsync\"\n", "store.durabilty", "unknown key"},
		{"unknown key in tag", station(okTag + okTag + okTag + `{ name = "s.x", regster = "holding:9", type = "uint16" }`),
			"modbus.client[0].tags[3].regster", "unknown key"},
		{"unknown key in second client", station(okTag) + "[[modbus.client]]\nname = \"t\"\nurl = \"tcp://h\"\nperiode = \"1s\"\n",
			"modbus.client[1].periode", "unknown key"},
		{"quoted unknown key", "[store]\n\"a b\" = 1\n", `store."a b"`, "unknown key"},
		{"api keys reserved", "[[api.keys]]\nname = \"x\"\n", "api", "unknown key"},
		{"bad duration", "[store]\nhead_max_age = \"10 minutes\"\n", "store.head_max_age", "invalid duration"},
		{"bare number duration", "[store]\ncommit_interval = 1\n", "store.commit_interval", "duration string"},
		{"duration in tag array", station(okTag) + "[[modbus.client]]\nname = \"t\"\nurl = \"tcp://h\"\ntimeout = \"1x\"\n",
			"modbus.client[1].timeout", "invalid duration"},
		{"wrong type", "[store]\nhead_max_samples = \"many\"\n", "store.head_max_samples", "expected an integer, got a string"},
		{"single bracket array of tables", "[modbus.client]\nname = \"s\"\n", "modbus.client", "write [[modbus.client]]"},
		{"section is not a table", "store = 3\n", "store", "expected a table"},
		{"tags not an array", "[[modbus.client]]\nname = \"s\"\nurl = \"tcp://h\"\ntags = 3\n", "modbus.client[0].tags", "expected an array"},
		{"float for string", station(`{ name = 1.5, register = "holding:0", type = "uint16" }`), "modbus.client[0].tags[0].name", "expected a string"},
		{"bad site name", "[site]\nname = \"my site\"\n", "site.name", "letters, digits"},
		{"bad log level", "[log]\nlevel = \"verbose\"\n", "log.level", "unknown level"},
		{"bad listen", "[http]\nlisten = \"8080\"\n", "http.listen", "not host:port"},
		{"bad durability", "[store]\ndurability = \"sync\"\n", "store.durability", "unknown durability"},
		{"relaxed needs interval", "[store]\ndurability = \"relaxed\"\ncommit_interval = \"0s\"\n", "store.commit_interval", "must be > 0"},
		{"empty dir", "[store]\ndir = \"\"\n", "store.dir", "empty"},
		{"head samples", "[store]\nhead_max_samples = 0\n", "store.head_max_samples", "at least 1"},
		{"head age", "[store]\nhead_max_age = \"0s\"\n", "store.head_max_age", "must be > 0"},
		{"negative retention", "[store]\nretention_rollups = \"-1h\"\n", "store.retention_rollups", "negative"},
		{"station name missing", "[[modbus.client]]\nurl = \"tcp://h\"\n", "modbus.client[0].name", "empty"},
		{"duplicate station", station(okTag) + "[[modbus.client]]\nname = \"s\"\nurl = \"tcp://h\"\n", "modbus.client[1].name", "already defined at modbus.client[0]"},
		{"bad scheme", "[[modbus.client]]\nname = \"s\"\nurl = \"udp://h:1\"\n", "modbus.client[0].url", "unknown scheme"},
		{"bad port", "[[modbus.client]]\nname = \"s\"\nurl = \"tcp://h:99999\"\n", "modbus.client[0].url", "port"},
		{"bad parity", "[[modbus.client]]\nname = \"s\"\nurl = \"rtu:///dev/ttyS0?parity=X\"\n", "modbus.client[0].url", "parity"},
		{"serial settings differ", "[[modbus.client]]\nname = \"a\"\nurl = \"rtu:///dev/ttyS0?baud=9600\"\n" +
			"[[modbus.client]]\nname = \"b\"\nunit = 2\nurl = \"rtu:///dev/ttyS0?baud=19200\"\n", "modbus.client[1].url", "serial settings differ"},
		{"unit too big", "[[modbus.client]]\nname = \"s\"\nurl = \"tcp://h\"\nunit = 256\n", "modbus.client[0].unit", "0..255"},
		{"broadcast unit on rtu", "[[modbus.client]]\nname = \"s\"\nurl = \"rtu:///dev/ttyS0\"\nunit = 0\n", "modbus.client[0].unit", "1..247"},
		{"negative period", "[[modbus.client]]\nname = \"s\"\nurl = \"tcp://h\"\nperiod = \"-1s\"\n", "modbus.client[0].period", "negative"},
		{"zero timeout", "[[modbus.client]]\nname = \"s\"\nurl = \"tcp://h\"\ntimeout = \"0s\"\n", "modbus.client[0].timeout", "must be > 0"},
		{"negative pause", "[[modbus.client]]\nname = \"s\"\nurl = \"tcp://h\"\npause = \"-5ms\"\n", "modbus.client[0].pause", "negative"},
		{"bad area", station(`{ name = "s.x", register = "holdings:0", type = "uint16" }`), "modbus.client[0].tags[0].register", "unknown area"},
		{"address too big", station(`{ name = "s.x", register = "holding:65536", type = "uint16" }`), "modbus.client[0].tags[0].register", "0..65535"},
		{"no colon", station(`{ name = "s.x", register = "holding", type = "uint16" }`), "modbus.client[0].tags[0].register", "AREA:ADDRESS"},
		{"value past end", station(`{ name = "s.x", register = "holding:65535", type = "float32" }`), "modbus.client[0].tags[0].register", "past 65535"},
		{"count past end", station(`{ name = "s.x{i}", register = "holding:65500", type = "uint16", count = 37 }`), "modbus.client[0].tags[0].count", "past 65535"},
		{"bad type", station(`{ name = "s.x", register = "holding:0", type = "word" }`), "modbus.client[0].tags[0].type", "unknown type"},
		{"bool in holding", station(`{ name = "s.x", register = "holding:0", type = "bool" }`), "modbus.client[0].tags[0].type", "coil or discrete"},
		{"number in coil", station(`{ name = "s.x", register = "coil:0", type = "uint16" }`), "modbus.client[0].tags[0].type", "hold bool"},
		{"bad order", station(`{ name = "s.x", register = "holding:0", type = "int32", order = "BACD" }`), "modbus.client[0].tags[0].order", "unknown order"},
		{"order on bool", station(`{ name = "s.x", register = "coil:0", type = "bool", order = "DCBA" }`), "modbus.client[0].tags[0].order", "bool"},
		{"scale on bool", station(`{ name = "s.x", register = "coil:0", type = "bool", scale = 2.0 }`), "modbus.client[0].tags[0].scale", "bool"},
		{"zero scale", station(`{ name = "s.x", register = "holding:0", type = "int16", scale = 0 }`), "modbus.client[0].tags[0].scale", "other than 0"},
		{"nan offset", station(`{ name = "s.x", register = "holding:0", type = "int16", offset = nan }`), "modbus.client[0].tags[0].offset", "finite"},
		{"zero count", station(`{ name = "s.x", register = "holding:0", type = "int16", count = 0 }`), "modbus.client[0].tags[0].count", "at least 1"},
		{"count without placeholder", station(`{ name = "s.x", register = "holding:0", type = "int16", count = 2 }`), "modbus.client[0].tags[0].name", "{i}"},
		{"empty tag name", station(`{ register = "holding:0", type = "int16" }`), "modbus.client[0].tags[0].name", "empty"},
		{"reserved tag name", station(`{ name = "pith.sys.x", register = "holding:0", type = "int16" }`), "modbus.client[0].tags[0].name", "reserved"},
		{"tag name with comma", station(`{ name = "s.a,b", register = "holding:0", type = "int16" }`), "modbus.client[0].tags[0].name", "contains"},
		{"misspelt placeholder", station(`{ name = "s.x{I}", register = "holding:0", type = "int16" }`), "modbus.client[0].tags[0].name", "contains"},
		{"bad archive", station(`{ name = "s.x", register = "holding:0", type = "int16", archive = "every" }`), "modbus.client[0].tags[0].archive", "unknown archive"},
		{"deadband needs value", station(`{ name = "s.x", register = "holding:0", type = "int16", archive = "deadband" }`), "modbus.client[0].tags[0].deadband", "> 0"},
		{"deadband without policy", station(`{ name = "s.x", register = "holding:0", type = "int16", deadband = 1.0 }`), "modbus.client[0].tags[0].deadband", "needs archive"},
		{"deadband on bool", station(`{ name = "s.x", register = "coil:0", type = "bool", archive = "deadband", deadband = 1.0 }`), "modbus.client[0].tags[0].archive", "bool"},
		{"duplicate tag across stations", station(okTag) + "[[modbus.client]]\nname = \"t\"\nurl = \"tcp://h\"\ntags = [{ name = \"s.ok\", register = \"input:0\", type = \"int16\" }]\n",
			"modbus.client[1].tags[0].name", "already defined at modbus.client[0].tags[0].name"},
		{"duplicate tag by expansion", station(`{ name = "s.r{i}", register = "holding:0", type = "int16", count = 10 },
{ name = "s.r5", register = "holding:100", type = "int16" }`), "modbus.client[0].tags[1].name", `"s.r5" already defined`},
		{"server bad listen", "[[modbus.server]]\nlisten = \"\"\n", "modbus.server[0].listen", "empty"},
		{"server duplicate listen", "[[modbus.server]]\nlisten = \":502\"\n[[modbus.server]]\nlisten = \":502\"\n", "modbus.server[1].listen", "already used"},
		{"server unit", "[[modbus.server]]\nlisten = \":502\"\nunit = 248\n", "modbus.server[0].unit", "0..247"},
		{"server remote writes", "[[modbus.server]]\nlisten = \":5502\"\nregisters = [\n" + `{ register = "holding:0", tag = "x", type = "int16" },
{ register = "coil:0", tag = "y", type = "bool", writable = true }` + "\n]\n", "modbus.server[0].allow_remote_writes", `":5502" (all interfaces) is reachable from other machines and modbus.server[0].registers[1] is writable`},
		{"server remote writes on an address", "[[modbus.server]]\nlisten = \"192.168.1.5:502\"\nallow_remote_writes = false\nregisters = [\n" + `{ register = "holding:0", tag = "x", type = "int16", writable = true }` + "\n]\n", "modbus.server[0].allow_remote_writes", `could write tag "x"`},
		{"server remote writes by name", "[[modbus.server]]\nlisten = \"plc.example.com:502\"\nregisters = [\n" + `{ register = "holding:0", tag = "x", type = "int16", writable = true }` + "\n]\n", "modbus.server[0].allow_remote_writes", "allow_remote_writes = true"},
		{"server writable input", server(`{ register = "input:0", tag = "x", type = "int16", writable = true }`), "modbus.server[0].registers[0].writable", "read-only"},
		{"server overlap", server(`{ register = "holding:0", tag = "x{i}", type = "uint16", count = 10 },
{ register = "holding:8", tag = "y", type = "float32" }`), "modbus.server[0].registers[1].register", "overlaps modbus.server[0].registers[0]"},
		{"server overlap earlier address", server(`{ register = "holding:10", tag = "y", type = "float64" },
{ register = "holding:0", tag = "x{i}", type = "uint16", count = 12 }`), "modbus.server[0].registers[1].register", "overlaps modbus.server[0].registers[0]"},
		{"server unknown key", server(`{ register = "holding:0", tag = "x", type = "int16", writeable = true }`), "modbus.server[0].registers[0].writeable", "unknown key"},
		{"server tag count", server(`{ register = "holding:0", tag = "x", type = "int16", count = 3 }`), "modbus.server[0].registers[0].tag", "{i}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.toml))
			if err == nil {
				t.Fatalf("Parse succeeded, want error at %s", tt.wantKey)
			}
			for _, ke := range keyErrors(err) {
				if ke.Key == tt.wantKey {
					if !strings.Contains(ke.Msg, tt.wantMsg) {
						t.Errorf("error at %s = %q, want it to contain %q", ke.Key, ke.Msg, tt.wantMsg)
					}
					if !strings.Contains(err.Error(), tt.wantKey+": ") {
						t.Errorf("error text %q does not name %s", err, tt.wantKey)
					}
					return
				}
			}
			t.Errorf("Parse error = %v\nwant one at key %s", err, tt.wantKey)
		})
	}
}

func TestParseSyntaxError(t *testing.T) {
	_, err := Parse([]byte("[store\ndir = 1\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("Parse = %v, want a syntax error naming line 2", err)
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	_, err := Parse([]byte("[log]\nlevel = \"x\"\n[store]\ndurability = \"y\"\n"))
	got := keyErrors(err)
	if len(got) != 2 || got[0].Key != "log.level" || got[1].Key != "store.durability" {
		t.Errorf("errors = %v, want log.level and store.durability", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	if err := os.WriteFile(good, []byte("[site]\nname = \"north\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(good)
	if err != nil || cfg.Site.Name != "north" {
		t.Fatalf("Load = %+v, %v", cfg, err)
	}

	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("[site]\nnam = \"north\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	if err == nil || !strings.HasPrefix(err.Error(), bad+": site.nam: unknown key") {
		t.Errorf("Load(bad) = %v", err)
	}
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Key != "site.nam" {
		t.Errorf("errors.As KeyError = %+v", ke)
	}

	if _, err := Load(filepath.Join(dir, "missing.toml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
}

func TestDurationText(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("1m30s")); err != nil || d.Std() != 90*time.Second {
		t.Fatalf("UnmarshalText = %v, %v", d, err)
	}
	if b, _ := d.MarshalText(); string(b) != "1m30s" {
		t.Errorf("MarshalText = %s", b)
	}
	if err := d.UnmarshalText([]byte("soon")); err == nil {
		t.Error("UnmarshalText(soon) succeeded")
	}
}

// TestRemoteWritesAllowed lists the Modbus servers the exposure check lets
// through: loopback listeners, read-only registers, or an explicit
// allow_remote_writes.
func TestRemoteWritesAllowed(t *testing.T) {
	const writable = `registers = [{ register = "holding:0", tag = "x", type = "int16", writable = true }]` + "\n"
	for _, toml := range []string{
		"[[modbus.server]]\nlisten = \"127.0.0.1:502\"\n" + writable,
		"[[modbus.server]]\nlisten = \"127.5.5.5:502\"\n" + writable,
		"[[modbus.server]]\nlisten = \"[::1]:502\"\n" + writable,
		"[[modbus.server]]\nlisten = \"localhost:502\"\n" + writable,
		"[[modbus.server]]\nlisten = \":502\"\nregisters = [{ register = \"holding:0\", tag = \"x\", type = \"int16\" }]\n",
		"[[modbus.server]]\nlisten = \"0.0.0.0:502\"\nallow_remote_writes = true\n" + writable,
	} {
		if _, err := Parse([]byte(toml)); err != nil {
			t.Errorf("Parse(%q) = %v, want no error", toml, err)
		}
	}
}
